"""Correction study (the paper's Tables 3–4 design): GraphCorrect vs the Direct Prompt, on the outputs GraphEval flags.

For every row, GraphEval checks the output once (the detection report is stored and shared by every variant; rows
the detection study already judged with the same models are rebuilt from its per-row file, not judged again). Each
flagged output is then corrected by a variant and checked again by the same GraphEval; we report, among flagged
outputs, the share that pass the re-check (Table 4) and ROUGE-1/2/L between original and corrected (Table 3).

Variants: ``paper`` (GraphCorrect as published: prompts B then C per flagged triple, one round), ``direct`` (the
Direct Prompt baseline, prompt D), and the options measured against the paper: ``rounds2`` (verify loop, up to 2
rounds), ``guard`` (reject a change that drops a supported triple), ``batch`` (all step-1 corrections of one output
in one call), and ``evidence`` (GraphCorrect with step 1 told why the triple failed and shown the closest sentences
of the deciding passage, one follow-up when it repeats the triple; prompt D on the output when no triple change
could be applied), ``evidence-only`` (the same without that fallback), ``evidence-rounds2`` and ``evidence-guard``.

Commands (run from the repository root):

    # correct (resumable; KGs cached under benchmarks/.cache/, shared with benchmarks/detection.py)
    .venv/bin/python benchmarks/bench_correct.py run qags_c --variant paper
    .venv/bin/python benchmarks/bench_correct.py run qags_c --variant direct
    # the table, from the per-row files only (no model)
    .venv/bin/python benchmarks/bench_correct.py report qags_c
    # a random sample disjoint from the first 80 rows, in files of their own (suffix -<tag>)
    .venv/bin/python benchmarks/bench_correct.py run qags_c --variant evidence \
        --sample 30 --seed 1 --exclude-first 80 --tag random30-seed1
    .venv/bin/python benchmarks/bench_correct.py report qags_c --tag random30-seed1
    # a smoke test of this script with a fake chat model and the keyword scorer (numbers mean nothing)
    .venv/bin/python benchmarks/bench_correct.py run qags_c --fake --limit 3

Defaults: chat model and scorer are the package's offline defaults (``grapheval_plugins.models.DEFAULT_LLM`` /
``DEFAULT_SCORER``). Per-row files: ``benchmarks/results/correct-<dataset>-<llm>-<scorer>-<variant>.jsonl``;
detection reports: ``benchmarks/results/reports-<dataset>-<llm>-<scorer>.jsonl``.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from grapheval_plugins import GraphEval, Report
from grapheval_plugins.correct import GraphCorrect
from grapheval_plugins.models import DEFAULT_LLM, DEFAULT_SCORER

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the harness beside this script
import harness as bench  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = HERE / ".cache"
FAKE = "fake"

VARIANTS: dict[str, dict[str, Any]] = {
    "paper": {"method": "graph"},
    "direct": {"method": "direct"},
    "rounds2": {"method": "graph", "max_rounds": 2},
    "guard": {"method": "graph", "guard": "reject"},
    "batch": {"method": "graph", "batch_step1": True},
    "evidence": {"method": "evidence"},
    "evidence-only": {"method": "evidence", "direct_fallback": False},
    "evidence-rounds2": {"method": "evidence", "max_rounds": 2},
    "evidence-guard": {"method": "evidence", "guard": "reject"},
    "constrained": {"method": "constrained"},
    "constrained-fallback": {"method": "constrained", "direct_fallback": True},
}

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


# --------------------------------------------------------------------------------------------- fake models
_WORD = re.compile(r"[a-z0-9]+")


def _tag(name: str, text: str) -> str:
    found = re.search(rf"<{name}>(.*?)</{name}>", text, re.S)
    return found.group(1) if found else ""


def _keep_known(part: str, known: set[str]) -> str:
    kept = " ".join(w for w in part.split() if all(t in known for t in _WORD.findall(w.lower())))
    return kept or part


def _fake_respond(messages: list[Any]) -> str:
    """Prompt A: naive triples. B: drop the words the context lacks. C: substitute the parts. D: drop unknown words."""
    from grapheval_plugins.testing import naive_triples_chat_model

    text = str(messages[-1].content)
    if "<old_triple>" in text:
        summary = _tag("context", text)
        old, new = json.loads(_tag("old_triple", text)), json.loads(_tag("new_triple", text))
        for a, b in zip(old, new):
            if a != b:
                summary = summary.replace(a, b, 1)
        return "<context>" + summary + "</context>"
    if "<triple>" in text or "<triples>" in text:
        known = set(_WORD.findall(_tag("context", text).lower()))
        if "<triples>" in text:
            olds = json.loads(_tag("triples", text))
            return "<python>" + json.dumps([[_keep_known(p, known) for p in t] for t in olds]) + "</python>"
        return json.dumps([_keep_known(p, known) for p in json.loads(_tag("triple", text))])
    if "<summary>" in text:
        known = set(_WORD.findall(_tag("context", text).lower()))
        return "Here is the corrected summary:\n" + _keep_known(_tag("summary", text), known)
    return str(naive_triples_chat_model().respond(messages))  # type: ignore[misc]


def fake_models() -> tuple[Any, Any]:
    """A deterministic fake chat model (labelled ``fake``) and the keyword scorer: for smoke tests only."""
    from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel

    return ScriptedChatModel(respond=_fake_respond, model_label=FAKE), KeywordScorer()


# --------------------------------------------------------------------------------------------- helpers
def _names(llm: str, scorer: str, fake: bool) -> tuple[str, str]:
    return (FAKE, "keyword-overlap") if fake else (llm, scorer)


def result_path(results: Path, dataset: str, llm: str, scorer: str, variant: str, tag: str | None = None) -> Path:
    suffix = f"-{bench.slug(tag)}" if tag else ""
    return results / f"correct-{dataset}-{bench.slug(llm)}-{bench.slug(scorer)}-{variant}{suffix}.jsonl"


def reports_path(results: Path, dataset: str, llm: str, scorer: str) -> Path:
    return results / f"reports-{dataset}-{bench.slug(llm)}-{bench.slug(scorer)}.jsonl"


def _context_order(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Rows sharing a context run back to back, so a local judge reuses the context's evaluated prefix.
    order = {c: i for i, c in reversed(list(enumerate(r["context"] for r in rows)))}
    return sorted(rows, key=lambda r: order[r["context"]])


def dataset_rows(
    name: str | list[dict[str, Any]], sample: Optional[int], seed: int, limit: Optional[int], exclude_first: int = 0
) -> list[dict[str, Any]]:
    """The rows of a run: without ``exclude_first`` rows of the unsampled run order (what ``--limit N`` alone
    selects), then a stratified sample of ``sample`` rows with ``seed``, in run order, then the first ``limit``.

    >>> rows = [{"id": str(i), "context": str(i // 2), "output": "o", "label": i % 2} for i in range(40)]
    >>> picked = dataset_rows(rows, 10, 1, None, exclude_first=20)
    >>> len(picked), min(int(r["id"]) for r in picked) >= 20
    (10, True)
    """
    rows = bench.load_dataset(name) if isinstance(name, str) else [dict(r) for r in name]
    if exclude_first:
        skipped = {r["id"] for r in _context_order(rows)[:exclude_first]}
        rows = [r for r in rows if r["id"] not in skipped]
    if sample is not None:
        rows = bench.stratified_sample(rows, sample, seed=seed)
    rows = _context_order(rows)
    return rows[:limit] if limit is not None else rows


def detection_study_reports(
    results: Path, dataset: str, llm: str, scorer: str, rows: list[dict[str, Any]], engine: GraphEval
) -> dict[str, Report]:
    """Reports rebuilt from the detection study's per-row file for the same models, prompt and rendering
    (``benchmarks/detection.py``), so rows it already judged are not judged again: decided by ``engine``'s rule,
    weights and threshold. None when ``engine`` drops unfaithful triples (``fidelity_in_force() == "drop"``): the
    study's rows hold no round-trip scores, so its verdicts cannot be rebuilt; those rows are detected again."""
    from grapheval_plugins.inputs import normalize_output

    path = results / f"detect-{dataset}-{bench.slug(llm)}-{bench.slug(scorer)}-examples-first-concat.jsonl"
    if not path.exists() or engine.fidelity_in_force() != "off":
        return {}
    rule, weights = engine.decision_rule()
    outputs = {r["id"]: r["output"] for r in rows}
    found = {}
    for det in bench.load_results(path):
        rid = det.get("id")
        if rid in outputs and not det.get("error") and det.get("prompt") == engine.prompt.version:
            found[rid] = bench.report_from_detection_row(det, normalize_output(outputs[rid]),
                                                         engine.hallucination_threshold, method=rule, weights=weights)
    return found


def detect(
    engine: GraphEval,
    rows: list[dict[str, Any]],
    path: Path,
    batch_rows: int,
    known: dict[str, Report] | None = None,
) -> dict[str, Report]:
    """Detection reports for ``rows``: read from ``path`` or taken from ``known``; the missing ones computed and
    appended to ``path``."""
    store = bench.ResultStore(path)
    known = known or {}
    todo = [r for r in rows if r["id"] not in store.done() and r["id"] not in known]
    from tqdm import tqdm

    with tqdm(total=len(todo), desc="detect", unit="row") as bar:
        for start in range(0, len(todo), batch_rows):
            batch = todo[start : start + batch_rows]
            for row, report in zip(batch, engine.evaluate_many(batch, show_progress=False)):
                data = report.model_dump(mode="json")
                data["id"] = row["id"]
                if not report.ok:
                    data["error"] = "; ".join(f"{e.stage}: {e.message}" for e in report.errors)
                store.append(data)
            bar.update(len(batch))
    return {**known, **{rid: Report.model_validate(data) for rid, data in store.rows.items()}}


def _row_result(row: dict[str, Any], result: Any, seconds: float) -> dict[str, Any]:
    rouge = result.rouge
    return {
        "id": row["id"],
        "label": row.get("label"),
        "flagged": result.flagged,
        "status": result.status,
        "passed": result.passed,
        "changed": result.changed,
        "rouge1": rouge.rouge1 if rouge else None,
        "rouge2": rouge.rouge2 if rouge else None,
        "rougeL": rouge.rougeL if rouge else None,
        "llm_calls": result.llm_calls,
        "recheck_llm_calls": result.recheck_llm_calls,
        "guard_checks": result.guard_checks,
        "rounds": len(result.rounds),
        "original": result.original,
        "corrected": result.corrected,
        "diff": result.diff,
        "changes": [
            {
                "old": c.old.as_list() if c.old else None,
                "new": c.new.as_list() if c.new else None,
                "applied": c.applied,
                "reason": c.reason,
                "follow_up": c.follow_up,
                "kind": c.kind,
            }
            for c in result.changes
        ],
        "issues": result.issues,
        "seconds": round(seconds, 3),
        "error": "; ".join(f"{e.stage}: {e.message}" for e in result.errors)
        if result.status == "error"
        else None,
    }


# --------------------------------------------------------------------------------------------- commands
@app.command()
def run(
    dataset: Annotated[str, typer.Argument(help="qags_c, qags_x, summeval, or a JSONL path.")],
    variant: Annotated[str, typer.Option(help=f"One of {', '.join(VARIANTS)}.")] = "paper",
    llm: Annotated[str, typer.Option(help="Chat model spec (extraction and correction).")] = DEFAULT_LLM,
    scorer: Annotated[str, typer.Option(help="Scorer spec.")] = DEFAULT_SCORER,
    sample: Annotated[Optional[int], typer.Option(help="Stratified sample of N rows (fixed seed).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the stratified sample.")] = 0,
    limit: Annotated[
        Optional[int], typer.Option(help="Only the first N rows (after sampling/ordering).")
    ] = None,
    exclude_first: Annotated[
        int, typer.Option(help="Leave out the first N rows of the unsampled order (what --limit N alone runs).")
    ] = 0,
    tag: Annotated[
        Optional[str], typer.Option(help="Suffix of the per-row file name (keeps a sample's files apart).")
    ] = None,
    batch_rows: Annotated[int, typer.Option(help="Rows corrected (and written) per batch.")] = 8,
    fake: Annotated[
        bool, typer.Option(help="Fake chat model + keyword scorer: a smoke test of this script.")
    ] = False,
    results_dir: Annotated[Path, typer.Option(help="Where the per-row files go.")] = RESULTS,
) -> None:
    """Correct the flagged outputs of DATASET with one variant; resumable (ids already written are skipped)."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if variant not in VARIANTS:
        raise typer.BadParameter(f"variant must be one of {sorted(VARIANTS)}")
    name = Path(dataset).stem if Path(dataset).suffix else dataset
    rows = dataset_rows(dataset, sample, seed, limit, exclude_first)
    llm_name, scorer_name = _names(llm, scorer, fake)
    if fake:
        chat, judge = fake_models()
        engine = GraphEval(llm=chat, scorer=judge, cache=True)
    else:
        CACHE.mkdir(parents=True, exist_ok=True)
        engine = GraphEval(llm=llm, scorer=scorer, cache=CACHE / f"kg-{bench.slug(llm)}.sqlite")
        kg_file = RESULTS / f"kg-{bench.slug(llm)}.jsonl"
        if kg_file.exists() and engine.cache is not None:
            bench.seed_kg_cache(kg_file, engine.cache, engine.prompt)
    results_dir.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    known = {} if fake else detection_study_reports(RESULTS, name, llm_name, scorer_name, rows, engine)
    reports = detect(engine, rows, reports_path(results_dir, name, llm_name, scorer_name), batch_rows, known)
    fixer = GraphCorrect(engine, show_progress=False, **VARIANTS[variant])
    store = bench.ResultStore(result_path(results_dir, name, llm_name, scorer_name, variant, tag))
    todo = [r for r in rows if r["id"] not in store.done()]

    async def one(row: dict[str, Any]) -> dict[str, Any]:
        t = time.perf_counter()
        report = reports.get(row["id"])
        result = await fixer.acorrect(row["context"], row["output"], report=report, id=row["id"])
        return _row_result(row, result, time.perf_counter() - t)

    async def batch_of(batch: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(one(r) for r in batch)))

    from tqdm import tqdm

    with store, tqdm(total=len(todo), desc=f"correct ({variant})", unit="row") as bar:  # closing: the last fsync
        for start in range(0, len(todo), batch_rows):
            batch = todo[start : start + batch_rows]
            for data in asyncio.run(batch_of(batch)):
                store.append(data)
            bar.update(len(batch))
    typer.echo(
        f"{store.path}: {len(todo)} corrected, {len(rows) - len(todo)} already done, "
        f"{time.perf_counter() - t0:.0f} s ({fixer.describe()})"
    )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _fmt(value: float | None, digits: int = 1) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def table(dataset: str, per_variant: dict[str, list[dict[str, Any]]]) -> str:
    """The markdown table of one data set: one line per variant, over the outputs GraphEval flagged."""
    lines = [
        "| variant | rows | flagged (label 1) | pass re-check % | changed % | ROUGE-1 | ROUGE-2 | ROUGE-L "
        "| LLM calls / flagged | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for variant, rows in per_variant.items():
        ok = [r for r in rows if not r.get("error")]
        flagged = [r for r in ok if r["flagged"]]
        n = len(flagged)
        positive = sum(1 for r in flagged if r.get("label") == 1)
        passed = sum(1 for r in flagged if r["passed"])
        changed = sum(1 for r in flagged if r["changed"])
        rouge = {
            k: _mean([r[k] for r in flagged if r[k] is not None]) for k in ("rouge1", "rouge2", "rougeL")
        }
        calls = _mean([float(r["llm_calls"]) for r in flagged])
        lines.append(
            f"| {variant} | {len(rows)} | {n} ({positive}) | {_fmt(100 * passed / n if n else None)} "
            f"| {_fmt(100 * changed / n if n else None)} | {_fmt(rouge['rouge1'], 3)} | {_fmt(rouge['rouge2'], 3)} "
            f"| {_fmt(rouge['rougeL'], 3)} | {_fmt(calls, 2)} | {len(rows) - len(ok)} |"
        )
    return "\n".join(lines)


def paths_table(per_variant: dict[str, list[dict[str, Any]]]) -> str:
    """Where the corrections of each variant came from, over the flagged outputs: step-1 attempts, how many
    answers repeated the triple (first answer; after the follow-up), triple changes applied, direct rewrites
    (the Direct Prompt, or the ``evidence`` fallback) applied, passes by each path, seconds per flagged row."""
    lines = [
        "| variant | flagged | step-1 attempts | repeated the triple | repeated after follow-up | triple changes "
        "applied | direct rewrites applied | pass via triples | pass via direct | s / flagged |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for variant, rows in per_variant.items():
        flagged = [r for r in rows if not r.get("error") and r["flagged"]]
        fallback_kind = "direct" if variant == "direct" else "graph"  # files written before changes had a kind
        for r in flagged:
            for c in r["changes"]:
                c.setdefault("kind", fallback_kind)
        changes = [c for r in flagged for c in r["changes"]]
        step1 = [c for c in changes if c["kind"] == "graph" and c["old"] is not None]
        repeated = sum(
            1 for c in step1 if c.get("follow_up") or c["reason"] == "step 1: the model returned the triple unchanged"
        )
        twice = sum(1 for c in step1 if c.get("follow_up") and c["new"] is not None and c["old"] == c["new"])
        triple_applied = sum(1 for c in step1 if c["applied"])
        direct_applied = sum(1 for c in changes if c["kind"] == "direct" and c["applied"])

        def by_direct(row: dict[str, Any]) -> bool:
            return any(c["kind"] == "direct" and c["applied"] for c in row["changes"])

        pass_direct = sum(1 for r in flagged if r["passed"] and by_direct(r))
        pass_triples = sum(1 for r in flagged if r["passed"] and r["changed"] and not by_direct(r))
        seconds = _mean([float(r["seconds"]) for r in flagged])
        lines.append(
            f"| {variant} | {len(flagged)} | {len(step1)} | {repeated} | {twice} | {triple_applied} "
            f"| {direct_applied} | {pass_triples} | {pass_direct} | {_fmt(seconds, 0)} |"
        )
    return "\n".join(lines)


@app.command()
def report(
    datasets: Annotated[list[str], typer.Argument(help="Data set names.")],
    llm: Annotated[str, typer.Option(help="Chat model spec the runs used.")] = DEFAULT_LLM,
    scorer: Annotated[str, typer.Option(help="Scorer spec the runs used.")] = DEFAULT_SCORER,
    fake: Annotated[bool, typer.Option(help="Report the fake smoke-test runs.")] = False,
    tag: Annotated[Optional[str], typer.Option(help="The runs' --tag (their file-name suffix).")] = None,
    results_dir: Annotated[Path, typer.Option(help="Where the per-row files are.")] = RESULTS,
    same_rows: Annotated[
        bool, typer.Option(help="Compare the variants on the rows every one of them has done.")
    ] = True,
) -> None:
    """Markdown tables from the per-row files (no model is loaded)."""
    llm_name, scorer_name = _names(llm, scorer, fake)
    typer.echo(
        f"Chat model (extraction and correction): `{llm_name}`; scorer: `{scorer_name}`; "
        f"machine: {platform.machine()} {os.cpu_count()} CPU(s). ROUGE: rouge-score F-measures, Porter "
        "stemmer, original vs corrected, over the outputs GraphEval flagged (unchanged outputs count as 1.0)."
    )
    for dataset in datasets:
        per_variant = {}
        for variant in VARIANTS:
            path = result_path(results_dir, dataset, llm_name, scorer_name, variant, tag)
            if path.exists():
                per_variant[variant] = bench.load_results(path)
        if not per_variant:
            typer.echo(f"\n{dataset}: no results under {results_dir}")
            continue
        if same_rows:
            common = set.intersection(*({r["id"] for r in rows} for rows in per_variant.values()))
            per_variant = {v: [r for r in rows if r["id"] in common] for v, rows in per_variant.items()}
        typer.echo(f"\n**{dataset}**\n")
        typer.echo(table(dataset, per_variant))
        typer.echo("")
        typer.echo(paths_table(per_variant))


if __name__ == "__main__":
    app()
