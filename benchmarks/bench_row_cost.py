"""Seconds per row of the offline default against the whole-output check, each row in a fresh process.

    nice -n 10 .venv/bin/python benchmarks/bench_row_cost.py run --dataset qags_c --rows 8 --seed 0 --threads 1

For each of ``--rows`` rows drawn from the set (``random.Random(seed).sample`` of its ids) and each engine below, a
child process loads the local models, warms them on one fixed row of another set (so the fixed prompt prefixes
are in the KV cache, as in a batch run's steady state) and then times ``GraphEval.evaluate`` on the row: nothing
of the row is cached, no knowledge graph, no claim score. Engines, in a rotating order per row so that load drifts
evenly:

* ``raw``: ``GraphEval(mode="raw")``, the whole output judged (the baseline a default row is compared with);
* ``default``: ``GraphEval()`` as shipped (hybrid rule; extraction fidelity as far as the decision needs it);
* ``no-fidelity``: ``GraphEval(fidelity="off")`` (the default before extraction fidelity);
* ``paper``: ``GraphEval(rule="paper")``.

Reported per engine: mean seconds a row (extraction and checking apart), claims scored, and the ratio to ``raw``
on the same rows. Writes ``benchmarks/results/row-cost-<set>-<rows>[-<tag>].json``.

``batch`` times a batch instead, the CLI's main job: each engine in its own process, warmed up as above, runs
``GraphEval.evaluate_many`` on all the drawn rows at once (``raw``; ``default``; ``default-two-stage``, every row
extracted and then every row checked, through ``extract_rows`` / ``check_rows``), and reports wall seconds a row and
P(hallucination) per row, with how many rows ``default`` and ``default-two-stage`` decide alike, and each session's
counters (``SessionStats``: tokens evaluated and generated, seconds of prompt evaluation and of decoding). Writes ``benchmarks/results/batch-cost-<set>-<rows>[-<tag>].json``:

    nice -n 10 .venv/bin/python benchmarks/bench_row_cost.py batch --dataset qags_c --rows 8 --seed 0 --threads 0
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import time
from datetime import date
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness as bench  # noqa: E402

RESULTS = HERE / "results"
ENGINES: dict[str, dict[str, Any]] = {
    "raw": {"mode": "raw"},
    "default": {},
    "no-fidelity": {"fidelity": "off"},
    "paper": {"rule": "paper"},
}
LLM = "local:qwen2.5-coder-1.5b"
JUDGE = "judge:local:qwen2.5-coder-1.5b"
WARM_SET = "qags_x"  # the warm-up row comes from another set than the timed rows (unless that is the set)
app = typer.Typer(add_completion=False)


def engine(name: str, threads: Optional[int]) -> Any:
    from grapheval_plugins import GraphEval
    from grapheval_plugins.models import resolve_llm, resolve_scorer

    options = {"n_threads": threads} if threads else {}
    scorer = resolve_scorer(JUDGE, **options)
    return GraphEval(llm=resolve_llm(LLM, **options), scorer=scorer, cache=False, **ENGINES[name])


def _child_result(cmd: list[str], label: str, load: list[float]) -> dict[str, Any] | None:
    """Run one child process and read the JSON line it prints last (``None``, with its stderr shown, when it
    failed); the load average after it goes to ``load``."""
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    load.append(os.getloadavg()[0])
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        typer.echo(f"{label}: failed\n{done.stderr[-2000:]}", err=True)
        return None
    result: dict[str, Any] = json.loads(lines[-1])
    return result


@app.command(hidden=True)
def child(name: str, dataset: str, row_id: str, threads: Optional[int] = None) -> None:
    """One engine on one row in this process, after a warm-up row; prints one JSON line."""
    rows = {r["id"]: r for r in bench.load_dataset(dataset)}
    warm_set = WARM_SET if dataset != WARM_SET else "qags_c"
    warm = bench.load_dataset(warm_set)[0]
    ge = engine(name, threads)
    ge.evaluate(warm["context"], warm["output"])
    row = rows[row_id]
    t0 = time.perf_counter()
    report = ge.evaluate(row["context"], row["output"])
    seconds = time.perf_counter() - t0
    issues = report.extraction.issues if report.extraction is not None else []
    dropped = sum(1 for i in issues if i.startswith("fidelity: dropped"))
    n_claims = len(report.claims) + (report.whole_output is not None) + dropped  # judged against the context
    print(json.dumps({
        "engine": name, "id": row_id, "seconds": round(seconds, 3),
        "extract": round(report.timings.get("extract", 0.0), 3), "check": round(report.timings.get("check", 0.0), 3),
        "claims": n_claims, "dropped": dropped,
        "p_hallucination": None if report.score is None else round(1 - report.score, 6),
        "fidelity": ge.fidelity_in_force(), "errors": [e.message for e in report.errors],
    }))


@app.command()
def run(
    dataset: Annotated[str, typer.Option()] = "qags_c",
    rows: Annotated[int, typer.Option()] = 8,
    seed: Annotated[int, typer.Option()] = 0,
    threads: Annotated[Optional[int], typer.Option(help="llama.cpp threads (0: the thread policy).")] = 1,
    engines: Annotated[str, typer.Option(help="Comma-separated engines.")] = ",".join(ENGINES),
    tag: Annotated[str, typer.Option(help="Appended to the result file's name.")] = "",
) -> None:
    """Every engine on every drawn row, each in its own process; the table and a JSON file."""
    names = engines.split(",")
    out = RESULTS / f"row-cost-{dataset}-{rows}{'-' + tag if tag else ''}.json"
    results: list[dict[str, Any]] = []
    load: list[float] = []
    for n, row in enumerate(bench.sample_rows(dataset, rows, seed)):
        order = names[n % len(names):] + names[: n % len(names)]
        for name in order:
            cmd = [sys.executable, __file__, "child", name, dataset, row["id"]]
            if threads is not None:
                cmd += ["--threads", str(threads)]
            result = _child_result(cmd, f"{name} {row['id']}", load)
            if result is None:
                continue
            results.append(result)
            typer.echo(f"{row['id']} {name}: {result['seconds']:.1f} s, {result['claims']} claims", err=True)
    record = {
        "date": date.today().isoformat(), "cpu": bench.cpu_model(), "python": platform.python_version(),
        "command": f"benchmarks/bench_row_cost.py run --dataset {dataset} --rows {rows} --seed {seed} --threads {threads} "
                   f"--engines {engines}" + (f" --tag {tag}" if tag else ""),
        "load_average": [round(min(load or [0]), 2), round(max(load or [0]), 2)],
        "summary": summary(results, names), "rows": results,
    }
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    typer.echo(table(record["summary"]))
    typer.echo(f"written to {out}")


BATCH_ENGINES = ("raw", "default", "default-two-stage")


@app.command(hidden=True)
def child_batch(name: str, dataset: str, seed: int, rows: int, threads: Optional[int] = None,
                judge_prompt: str = "question-first") -> None:
    """One engine on the drawn rows as one batch in this process, after a warm-up row; prints one JSON line."""
    from bench_judge_prompt import VARIANTS

    from grapheval_plugins import GraphEval
    from grapheval_plugins.models import resolve_llm, resolve_scorer
    from grapheval_plugins.types import ExtractedRow

    options: dict[str, Any] = {"n_threads": threads} if threads else {}
    llm, scorer = resolve_llm(LLM, **options), resolve_scorer(JUDGE, prompt=VARIANTS[judge_prompt], **options)
    ge = GraphEval(llm=llm, scorer=scorer, cache=False, show_progress=False,
                   **({"mode": "raw"} if name == "raw" else {}))
    warm = bench.load_dataset(WARM_SET if dataset != WARM_SET else "qags_c")[0]
    ge.evaluate(warm["context"], warm["output"])
    batch = [{"id": r["id"], "context": r["context"], "output": r["output"]}
             for r in bench.sample_rows(dataset, rows, seed)]
    sessions = {"chat": llm.session, "judge": scorer.session}
    for session in sessions.values():
        session.reset_stats()
    t0 = time.perf_counter()
    if name == "default-two-stage":
        staged = ge.extract_rows(batch)
        checked = iter(ge.check_rows([r for r in staged if isinstance(r, ExtractedRow)]))
        reports = [next(checked) if isinstance(r, ExtractedRow) else r for r in staged]
    else:
        reports = ge.evaluate_many(batch)
    seconds = time.perf_counter() - t0
    print(json.dumps({
        "engine": name, "seconds": round(seconds, 3), "rows": len(reports),
        "p_hallucination": {r.id: None if r.score is None else round(1 - r.score, 6) for r in reports},
        "hallucinated": {r.id: r.hallucinated for r in reports},
        "errors": [e.message for r in reports for e in r.errors],
        "sessions": {role: {k: round(v, 3) if isinstance(v, float) else v for k, v in vars(session.stats).items()}
                     for role, session in sessions.items()},
    }))


@app.command()
def batch(
    dataset: Annotated[str, typer.Option()] = "qags_c",
    rows: Annotated[int, typer.Option()] = 8,
    seed: Annotated[int, typer.Option()] = 0,
    threads: Annotated[Optional[int], typer.Option(help="llama.cpp threads (0: the thread policy).")] = 0,
    engines: Annotated[str, typer.Option(help="Comma-separated batch engines, run in this order.")] = ",".join(BATCH_ENGINES),
    tag: Annotated[str, typer.Option(help="Appended to the result file's name.")] = "",
    judge_prompt: Annotated[str, typer.Option(help="The judge's wording: a variant of bench_judge_prompt.py "
                                                   "(question-first is the shipped one).")] = "question-first",
) -> None:
    """Every batch engine on all drawn rows as one ``evaluate_many`` batch, each in its own process."""
    from bench_judge_prompt import VARIANTS

    if judge_prompt not in VARIANTS:
        raise typer.BadParameter(f"unknown judge prompt {judge_prompt!r}; known: {', '.join(VARIANTS)}")
    out = RESULTS / f"batch-cost-{dataset}-{rows}{'-' + tag if tag else ''}.json"
    results: dict[str, dict[str, Any]] = {}
    load: list[float] = []
    for name in engines.split(","):
        if name not in BATCH_ENGINES:
            raise typer.BadParameter(f"unknown batch engine {name!r}; known: {', '.join(BATCH_ENGINES)}")
        cmd = [sys.executable, __file__, "child-batch", name, dataset, str(seed), str(rows)]
        if threads is not None:
            cmd += ["--threads", str(threads)]
        cmd += ["--judge-prompt", judge_prompt]
        result = _child_result(cmd, name, load)
        if result is None:
            continue
        results[name] = result
        typer.echo(f"{name}: {results[name]['seconds'] / rows:.1f} s a row", err=True)
    base = results.get("raw", {}).get("seconds")
    summary_ = {name: {"seconds_a_row": round(r["seconds"] / max(1, r["rows"]), 3),
                       "vs_raw": round(r["seconds"] / base, 2) if base else float("nan")}
                for name, r in results.items()}
    if "default" in results and "default-two-stage" in results:
        a, b = results["default"], results["default-two-stage"]
        summary_["default"]["same_p_as_two_stage"] = sum(a["p_hallucination"][k] == v for k, v in b["p_hallucination"].items())
        summary_["default"]["same_verdict_as_two_stage"] = sum(a["hallucinated"][k] == v for k, v in b["hallucinated"].items())
        summary_["default"]["max_abs_dp_vs_two_stage"] = max(
            (abs(a["p_hallucination"][k] - v) for k, v in b["p_hallucination"].items()
             if v is not None and a["p_hallucination"][k] is not None), default=0.0)
    record = {
        "date": date.today().isoformat(), "cpu": bench.cpu_model(), "python": platform.python_version(),
        "command": f"benchmarks/bench_row_cost.py batch --dataset {dataset} --rows {rows} --seed {seed} "
                   f"--threads {threads} --engines {engines}" + (f" --tag {tag}" if tag else "")
                   + (f" --judge-prompt {judge_prompt}" if judge_prompt != "question-first" else ""),
        "load_average": [round(min(load or [0]), 2), round(max(load or [0]), 2)],
        "summary": summary_, "engines": results,
    }
    out.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    for name, values in summary_.items():
        typer.echo(f"{name}: {values}")
    typer.echo(f"written to {out}")


def summary(results: list[dict[str, Any]], names: list[str]) -> dict[str, dict[str, float]]:
    """Per engine, over the rows every engine finished: mean seconds, extraction, checking, claims; ratio to raw."""
    ids = set.intersection(*({r["id"] for r in results if r["engine"] == n} for n in names)) if names else set()
    out: dict[str, dict[str, float]] = {}
    for name in names:
        rs = [r for r in results if r["engine"] == name and r["id"] in ids]
        if not rs:
            continue
        out[name] = {key: round(sum(r[key] for r in rs) / len(rs), 3) for key in ("seconds", "extract", "check", "claims")}
        out[name]["rows"] = len(rs)
    base = out.get("raw", {}).get("seconds")
    for values in out.values():
        values["vs_raw"] = round(values["seconds"] / base, 2) if base else float("nan")
    return out


def table(summary_: dict[str, dict[str, float]]) -> str:
    lines = ["| engine | rows | s a row | extraction | checking | claims against the context | × raw |", "|---|---|---|---|---|---|---|"]
    for name, v in summary_.items():
        lines.append(f"| {name} | {int(v['rows'])} | {v['seconds']:.1f} | {v['extract']:.1f} | {v['check']:.1f} | "
                     f"{v['claims']:.1f} | {v['vs_raw']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    app()
