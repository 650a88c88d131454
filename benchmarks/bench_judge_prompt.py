"""The local judge's wording: what a shorter per-claim suffix costs in detection and saves in time.

The judge evaluates a row's context once and then, for each claim, only what follows it in the prompt: the claim
and the start of the answer, and the question if the wording asks it after the claim (``JudgePrompt.claim_segments``).
The committed detection files were scored with the question after the claim (``question-after``, ``JUDGE_PROMPT``,
the 1.5B's wording until 2026-12-03): 21 tokens (the 1.5B's tokenizer) read again for every claim. The 1.5B's
wording since then (``question-first``, ``QUESTION_FIRST_PROMPT``) asks it before the context. This script scores
rows again with a wording, on the committed knowledge graphs of the detection files (no extraction), and compares
detection with the committed ``question-after`` scores on the same rows:

    # score (resumable: ids already in the variant's file are skipped); the lab rows, or every row with --all
    nice -n 10 .venv/bin/python benchmarks/bench_judge_prompt.py score --variant question-first --all
    # check that this script gives the committed scores with their wording (first rows of each set)
    nice -n 10 .venv/bin/python benchmarks/bench_judge_prompt.py score --variant question-after --limit 2
    # the tables (no model): the lab rows, every row both hold (--all) or the rows outside the lab subset (--held-out)
    .venv/bin/python benchmarks/bench_judge_prompt.py report --variant question-first --held-out
    # the hybrid weights of a wording, fitted on every row its files hold (no model)
    .venv/bin/python benchmarks/bench_judge_prompt.py fit --variant question-first

For each row it scores what the default engine reads: the whole output against the context (``p_raw``), each
triple against the context, and each triple against its own output (the fidelity round trip, every triple). The
``question-after`` side comes from the committed per-row files (``detect-…-examples-first+pairs-concat.jsonl`` and
``fidelity-…``). Hybrid weights are fitted on the other sets' rows of the same wording, as in ``detection.py
lab-report``. Per-row files: ``benchmarks/results/judge-prompt-<variant>-<set>-<judge>.jsonl``.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the harness and detection.py beside this script
import detection  # noqa: E402
import harness as bench  # noqa: E402

from grapheval_plugins.local.judge import JUDGE_PROMPT, QUESTION_FIRST_PROMPT, JudgePrompt  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
JUDGE = detection.LAB_SCORER
LLM = detection.LAB_LLM
SETS = ("summeval", "qags_c", "qags_x")
LAB_NOTE = f"{detection.LAB_FILE.name} (seed {detection.LAB_SEED})"

VARIANTS: dict[str, JudgePrompt] = {
    # the general wording, that of the committed detection files (the 1.5B's until 2026-12-03): the question after
    # each claim
    "question-after": JUDGE_PROMPT,
    # no question at all: the system message already asks for one word of the three labels
    "claim-only": JudgePrompt(claim_template="Claim: {claim}"),
    # the question asked before the context, so it is evaluated once per context: the 1.5B's wording since then
    "question-first": QUESTION_FIRST_PROMPT,
}
COMMITTED = "question-after"
"""The wording of the committed detection files that ``report`` compares a variant with."""

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def variant_path(variant: str, dataset: str) -> Path:
    return RESULTS / f"judge-prompt-{variant}-{dataset}-{bench.slug(JUDGE)}.jsonl"


def _p(score: Any) -> Optional[float]:
    return None if score.error is not None else round(score.p_unsupported, 6)


@app.command()
def score(
    variant: Annotated[str, typer.Option(help=f"One of {', '.join(VARIANTS)}.")] = "question-first",
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = ",".join(SETS),
    limit: Annotated[Optional[int], typer.Option(help="Only the first N lab rows of each set.")] = None,
    all_rows: Annotated[bool, typer.Option("--all", help="Every row of the committed detection file: the lab "
                                                          "rows first, then the others in the set's run order.")] = False,
    threads: Annotated[Optional[int], typer.Option(help="llama.cpp threads (default: the thread policy).")] = None,
) -> None:
    """Score the lab rows of each set (every row with ``--all``) with the judge prompt VARIANT (resumable)."""
    from grapheval_plugins.inputs import normalize_output, normalize_passages
    from grapheval_plugins.models import resolve_scorer
    from grapheval_plugins.types import Triple

    if variant not in VARIANTS:
        raise typer.BadParameter(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    logging.basicConfig(level=logging.WARNING)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    options: dict[str, Any] = {"prompt": VARIANTS[variant]}
    if threads is not None:
        options["n_threads"] = threads
    judge = resolve_scorer(JUDGE, **options)
    for name in datasets.split(","):
        base = {r["id"]: r for r in bench.load_results(detection.result_path(name, LLM, JUDGE, detection.DEFAULT_TAG,
                                                                              "concat")) if not r.get("error")}
        data = {r["id"]: r for r in bench.load_dataset(name)}
        ids = [i for i in detection.lab_ids(name)[:limit] if i in base]
        if all_rows:
            ids += [i for i in _run_order(name) if i in base and i not in ids]
        with bench.ResultStore(variant_path(variant, name)) as store:
            todo = [i for i in ids if i not in store.done()]
            for n_done, rid in enumerate(todo, start=1):
                row, passages = base[rid], normalize_passages(data[rid]["context"])
                output = normalize_output(data[rid]["output"])
                claims = [Triple.from_list(t[:3]).sentence() for t in row["triples"]]
                judge.session.reset_stats()
                t0 = time.perf_counter()
                by_context = judge.check([passages] * len(claims), claims) if claims else []
                whole = judge.check([passages], [output])[0]  # after the triples, as the detection runs read it
                by_output = judge.check([(output,)] * len(claims), claims) if claims else []
                stats = judge.session.stats
                store.append({
                    "id": rid, "dataset": name, "label": row["label"], "variant": variant,
                    "fingerprint": judge.fingerprint(), "p_raw": _p(whole),
                    "triples": [[*t[:3], _p(c), _p(o)] for t, c, o in zip(row["triples"], by_context, by_output)],
                    "seconds": round(time.perf_counter() - t0, 3), "evaluated_tokens": stats.evaluated_tokens,
                    # a claim without a verdict against the context: the row is redone by the next run
                    "error": whole.error or next((c.error for c in by_context if c.error is not None), None),
                })
                typer.echo(f"{variant} {name} {n_done}/{len(todo)} {rid}: {len(claims)} triple(s), "
                           f"{stats.evaluated_tokens} tokens, {time.perf_counter() - t0:.1f} s", err=True)


def _run_order(name: str) -> list[str]:
    """The set's ids in the detection runs' order (:func:`detection.lab_first`: the lab rows first)."""
    return detection.lab_first(detection.lab_ids(name),
                               detection.dataset_rows(name, None, detection.SUMMEVAL_SAMPLE_SEED))


def report_order(name: str, all_rows: bool, held_out: bool, limit: Optional[int]) -> list[str]:
    """The ids ``report`` reads for set ``name``: every row in run order (``all_rows``), the rows outside the lab
    subset (``held_out``: none of them ranked a lever), else the first ``limit`` lab rows."""
    if all_rows or held_out:
        lab = set(detection.lab_ids(name)) if held_out else set()
        return [i for i in _run_order(name) if i not in lab]
    return detection.lab_ids(name)[:limit]


def _rows(variant: str, name: str) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in bench.load_results(variant_path(variant, name)) if not r.get("error")}


def _as_lab(row: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """A variant row as ``detection.lab_scores`` reads it: (the detection row, its fidelity row)."""
    default = {"label": row["label"], "p_raw": row["p_raw"], "triples": [t[:4] for t in row["triples"]]}
    return default, {"triples": row["triples"]}


def _committed(name: str) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    default = {r["id"]: r for r in bench.load_results(detection.result_path(name, LLM, JUDGE, detection.DEFAULT_TAG,
                                                                             "concat"))}
    fid = {r["id"]: r for r in bench.load_results(detection.fidelity_path(name, LLM, JUDGE)) if not r.get("error")}
    return {i: (default[i], fid[i]) for i in fid if i in default}


def _fit(rows: list[tuple[dict, dict]], with_fidelity: bool, fitted_on: str) -> Any:
    """The hybrid weights fitted on ``(detection row, fidelity row)`` pairs, over the kept triples with fidelity."""
    from grapheval_plugins.calibrate import fit_hybrid

    scores = [detection.lab_scores(d, f if with_fidelity else None) for d, f in rows]
    return fit_hybrid([d["label"] for d, _ in rows], [s for s, _ in scores], [max(c) for _, c in scores],
                      fitted_on=fitted_on)


def _methods(sets: dict[str, list[tuple[dict, dict]]], name: str) -> dict[str, list[float]]:
    """raw, triples only + fidelity, and hybrid + fidelity (weights fitted on the other sets' rows) on set ``name``."""
    others = [t for other, ts in sets.items() if other != name for t in ts]
    w = _fit(others, True, "+".join(o for o in sets if o != name))
    rows = sets[name]
    return {
        "raw": [d["p_raw"] for d, _ in rows],
        "triples + fidelity": [max(detection.lab_scores(d, f)[1]) for d, f in rows],
        "hybrid + fidelity": [w.probability(*detection.lab_scores(d, f)) for d, f in rows],
    }


@app.command()
def report(
    variant: Annotated[str, typer.Option(help=f"The variant to compare with {COMMITTED}.")] = "question-first",
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = ",".join(SETS),
    all_rows: Annotated[bool, typer.Option("--all", help="Every row both hold, not only the lab subset's.")] = False,
    held_out: Annotated[bool, typer.Option("--held-out", help="Every row both hold outside the lab subset (the "
                                                               "rows no lever was ranked on).")] = False,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N lab rows of each set.")] = None,
    n_boot: Annotated[int, typer.Option()] = 2000,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """The variant against the committed ``question-after`` scores, on the lab rows both hold (every row with
    ``--all``, every row outside the lab subset with ``--held-out``; no model)."""
    if all_rows and held_out:
        raise typer.BadParameter("--all and --held-out exclude each other")
    names = datasets.split(",")
    new = {n: _rows(variant, n) for n in names}
    old = {n: _committed(n) for n in names}
    ids = {n: [i for i in report_order(n, all_rows, held_out, limit) if i in new[n] and i in old[n]] for n in names}
    ids = {n: v for n, v in ids.items() if v}
    if len(ids) < 2:
        typer.echo("need rows of two sets or more (weights are fitted on the other sets)", err=True)
        raise typer.Exit(1)
    sides = {
        COMMITTED: {n: [old[n][i] for i in v] for n, v in ids.items()},
        variant: {n: [_as_lab(new[n][i]) for i in v] for n, v in ids.items()},
    }
    rows = ("every row both hold" if all_rows else f"every row both hold outside the lab subset ({LAB_NOTE})"
            if held_out else f"the first {limit or 'all'} lab rows of each set ({LAB_NOTE})")
    typer.echo(f"judge `{JUDGE}`, the committed knowledge graphs, {rows}\n")
    typer.echo(f"| set | rows (hallucinated) | method | {COMMITTED}: BA / AUC | "
               f"{variant}: BA / AUC |\n|---|---|---|---|---|")
    lifts: dict[str, list[Any]] = {}
    for n in ids:
        y = [d["label"] for d, _ in sides[COMMITTED][n]]
        m_old, m_new = _methods(sides[COMMITTED], n), _methods(sides[variant], n)
        for key in m_old:
            cells = []
            for m in (m_old, m_new):
                pred = [v > 0.5 for v in m[key]]
                cells.append(f"{100 * bench.balanced_accuracy(y, pred):.1f} / {100 * bench.roc_auc(y, m[key]):.1f}")
            typer.echo(f"| {n} | {len(y)} ({sum(y)}) | {key} | {cells[0]} | {cells[1]} |")
            lifts.setdefault(key, []).append(bench.LiftInput(n, y, m_old[key], m_new[key]))
    typer.echo("")
    for key, inputs in lifts.items():
        lift = bench.bootstrap_lift(inputs, n_boot=n_boot, seed=seed)
        typer.echo(f"- {key}: size-weighted BA at 0.5, {variant} minus {COMMITTED}: {lift.lift:+.1f} points "
                   f"(95 % CI {lift.ci_low:+.1f} … {lift.ci_high:+.1f})")
    tokens = {n: [new[n][i]["evaluated_tokens"] for i in v] for n, v in ids.items()}
    claims = {n: [len(new[n][i]["triples"]) for i in v] for n, v in ids.items()}
    for n in ids:
        typer.echo(f"- {n}: {variant} evaluated {sum(tokens[n]) / len(tokens[n]):.0f} prompt tokens a row "
                   f"({sum(claims[n]) / len(claims[n]):.1f} triples a row, each against the context and the output)")
    deltas = []
    for n, v in ids.items():
        for i in v:
            (d, f), row = old[n][i], new[n][i]
            deltas.append(abs(row["p_raw"] - d["p_raw"]))
            deltas += [abs(a - b) for t, c, o in zip(row["triples"], d["triples"], f["triples"])
                       for a, b in ((t[3], c[3]), (t[4], o[4])) if a is not None and b is not None]
    typer.echo(f"- P(unsupported) against the committed {COMMITTED} scores: max |Δ| {max(deltas):.4f}, "
               f"mean {sum(deltas) / len(deltas):.4f} over {len(deltas)} scores")


@app.command()
def fit(
    variant: Annotated[str, typer.Option(help="The wording whose per-row files the weights are fitted on.")] =
    "question-first",
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = ",".join(SETS),
) -> None:
    """Fit the hybrid rule's weights on every row the variant's files hold, without and with extraction fidelity;
    prints the two entries for ``aggregate.FITTED_WEIGHTS`` (no model)."""
    from grapheval_plugins.extract.prompts import KG_PROMPT

    names = datasets.split(",")
    rows = [_as_lab(r) for n in names for r in _rows(variant, n).values()]
    if not rows:
        typer.echo(f"no scored rows of {variant!r} in {', '.join(names)}", err=True)
        raise typer.Exit(1)
    counts = ", ".join(f"{n} {len(_rows(variant, n))}" for n in names)
    judges = {r["fingerprint"] for n in names for r in _rows(variant, n).values()}
    judge = f'"{judges.pop()}"' if len(judges) == 1 else "None"  # the one judge that scored every row, if one did
    for fidelity in ("off", "drop"):
        kept = "triples the output does not support dropped" if fidelity == "drop" else "every triple"
        w = _fit(rows, fidelity == "drop", f"{'+'.join(names)} ({len(rows)} rows: {counts}; judge wording {variant}, "
                                           f"{kept}): benchmarks/bench_judge_prompt.py fit --variant {variant}")
        typer.echo(f'HybridWeights(\n    whole={w.whole:.4f}, claims={w.claims:.4f}, bias={w.bias:.4f},\n'
                   f'    fitted_on="{w.fitted_on}",\n    scorer="{JUDGE}", prompt="{KG_PROMPT.version}", '
                   f'fidelity="{fidelity}",\n    fingerprint={judge},\n),')


if __name__ == "__main__":
    app()
