"""Correction measured against the truth: GraphEval and the correction methods on planted errors.

The cases come from ``benchmarks/planted_errors.py`` (faithful outputs with one error planted, the original kept).
GraphEval checks each corrupted output once (**detector recall**: the share of planted errors it flags at all, and
the share whose flag names the planted value, *on target*); every method then corrects the flagged ones, starting
from that same report, and each correction is scored against the original (:func:`planted_errors.score_case`):
**restored**, **collateral**, **deleted**, **unchanged**, plus the re-check's verdict, the chat-model calls and the
seconds per case.

Methods: ``direct`` (the Direct Prompt, prompt D), ``paper`` (GraphCorrect as published: prompts B then C per
flagged triple), ``evidence`` (GraphCorrect with the reason and the closest evidence in step 1, a follow-up when it
repeats the triple, prompt D when no triple change applies), ``constrained`` (``evidence``'s step 1 held to the
context, the edit made in place, a re-check without extraction), and the other variants of ``bench_correct.py``.
A method added to an existing ``--tag`` reuses that tag's detections: only the correction runs.

Commands (from the repository root; resumable per case, per-case JSONL under ``benchmarks/results/``):

    # detect, then correct the flagged cases with each method in turn (case by case, methods interleaved)
    .venv/bin/python benchmarks/bench_planted.py run --method direct --method evidence \\
        --sample 16 --seed 1 --tag s16-seed1 --threads 1
    # the same cases' original outputs, unplanted: the detector's false flags on these rows
    .venv/bin/python benchmarks/bench_planted.py originals --sample 16 --seed 1 --tag s16-seed1 --threads 1
    # the table, from the per-case files only (no model)
    .venv/bin/python benchmarks/bench_planted.py table --tag s16-seed1
    # a smoke test with the fake chat model and the keyword scorer (numbers mean nothing)
    .venv/bin/python benchmarks/bench_planted.py run --fake --sample 6 --method direct --method evidence

Per-case files: ``planted-detect-<llm>-<scorer>[-<tag>].jsonl`` (the detection report of each corrupted output),
``planted-detect-original-<llm>-<scorer>[-<tag>].jsonl`` (the same for the original outputs, ``originals``) and ``planted-correct-<llm>-<scorer>-<method>[-<tag>].jsonl`` (one line per flagged case and method).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the harness and planted_errors beside this script
import harness as bench  # noqa: E402
import planted_errors as pe  # noqa: E402

from grapheval_plugins import GraphEval, Report  # noqa: E402
from grapheval_plugins.exceptions import InputError  # noqa: E402
from grapheval_plugins.models import DEFAULT_LLM, DEFAULT_SCORER  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = HERE / ".cache"
FAKE = "fake"

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def _variants() -> dict[str, dict[str, Any]]:
    import bench_correct

    return dict(bench_correct.VARIANTS)


def _names(llm: str, scorer: str, fake: bool) -> tuple[str, str]:
    return (FAKE, "keyword-overlap") if fake else (llm, scorer)


def _draws(specs: Sequence[str] | None) -> list[tuple[int, int]]:
    """Each ``"N:SEED"`` as ``(N, SEED)``."""
    draws = []
    for spec in specs or ():
        n, sep, seed = spec.partition(":")
        if not sep or not n.strip().isdigit() or not seed.strip().lstrip("-").isdigit():
            raise typer.BadParameter(f"--exclude-draw takes N:SEED (e.g. 32:1), got {spec!r}")
        draws.append((int(n), int(seed)))
    return draws


def _suffix(tag: str | None) -> str:
    return f"-{bench.slug(tag)}" if tag else ""


def detect_path(results: Path, llm: str, scorer: str, tag: str | None = None) -> Path:
    return results / f"planted-detect-{bench.slug(llm)}-{bench.slug(scorer)}{_suffix(tag)}.jsonl"


def originals_path(results: Path, llm: str, scorer: str, tag: str | None = None) -> Path:
    return results / f"planted-detect-original-{bench.slug(llm)}-{bench.slug(scorer)}{_suffix(tag)}.jsonl"


def correct_path(results: Path, llm: str, scorer: str, method: str, tag: str | None = None) -> Path:
    return results / f"planted-correct-{bench.slug(llm)}-{bench.slug(scorer)}-{method}{_suffix(tag)}.jsonl"


def select(
    cases: Sequence[pe.PlantedCase], sample: int | None, seed: int, limit: int | None,
    exclude: Sequence[tuple[int, int]] = (), skip: int = 0,
) -> list[pe.PlantedCase]:
    """The cases of a run: all, or ``sample`` drawn with ``seed`` (kinds in turn, :func:`planted_errors.draw`),
    then grouped by context (cases of one context back to back, so a local judge reuses its evaluated prefix),
    then, past the first ``skip``, the first ``limit`` (two runs side by side take ``--limit N`` and ``--skip N``,
    each with its own ``--tag``). Each ``(n, s)`` of ``exclude`` first leaves out the cases of the earlier draw of ``n``
    with seed ``s``, in turn (each draw from what the ones before it left): a held-out sample for settings tuned on
    those draws."""
    for n, s in exclude:
        taken = {c.id for c in pe.draw(cases, n, s)}
        cases = [c for c in cases if c.id not in taken]
    picked = pe.draw(cases, sample, seed) if sample is not None else list(cases)
    first = {c: i for i, c in reversed(list(enumerate(x.context for x in picked)))}
    picked = sorted(picked, key=lambda x: first[x.context])
    picked = picked[skip:]
    return picked[:limit] if limit is not None else picked


def on_target(report: Report, case: pe.PlantedCase) -> bool | None:
    """Whether an unsupported claim of ``report`` names the planted value: all its words; for an added negation
    the word "not"; for a removed one, the auxiliary left and the word after it (``"is"`` alone is in too many
    claims). ``None`` when the report is not a flag."""
    if not report.hallucinated:
        return None
    want = pe.value_words(case.planted_value)
    if case.kind == "negation-added":
        want = [w for w in want if w in ("not", "never")] or want
    elif case.kind == "negation-removed":
        after = [t for t in pe.words(case.corrupted) if t.start >= case.span[1]][:1]
        want = want + [t.norm for t in after]
    for claim in report.unsupported:
        text = claim.triple.sentence() if claim.triple is not None else claim.claim
        got = pe.value_words(text)
        if all(w in got for w in want):
            return True
    return False


def detection_row(case: pe.PlantedCase, report: Report, seconds: float) -> dict[str, Any]:
    data = report.model_dump(mode="json")
    data.update(
        id=case.id, kind=case.kind, set=case.set, source_id=case.source_id, flagged=report.hallucinated,
        on_target=on_target(report, case), detect_seconds=round(seconds, 3),
        detect_llm_calls=report.extraction.attempts if report.extraction is not None else 0,
        error="; ".join(f"{e.stage}: {e.message}" for e in report.errors) if not report.ok else None,
    )
    return data


def score_fields(case: pe.PlantedCase, corrected: str) -> dict[str, Any]:
    """The score of ``corrected`` against the truth of ``case``, as the per-case fields (the ``table`` command
    recomputes them from ``corrected``, so the figures always follow the scoring functions as they are)."""
    score = pe.score_case(case, corrected)
    return {
        "restored": score.restored,
        "exact": score.exact,
        "collateral": score.collateral,
        "collateral_words": score.collateral_words,
        "outside_words": score.outside_words,
        "deleted": score.deleted,
        "unchanged": score.unchanged,
        "outcome": score.outcome,
        "region": score.region,
        "rougeL_outside": score.rougeL_outside,
    }


def correction_row(case: pe.PlantedCase, method: str, result: Any, seconds: float) -> dict[str, Any]:
    """One per-case line: the correction, its score against the truth, the re-check, calls and seconds."""
    return {
        "id": case.id,
        "kind": case.kind,
        "set": case.set,
        "method": method,
        "status": result.status,
        "flagged": result.flagged,
        "passed": result.passed,
        "changed": result.changed,
        **score_fields(case, result.corrected),
        "llm_calls": result.llm_calls,
        "recheck_llm_calls": result.recheck_llm_calls,
        "seconds": round(seconds, 3),
        "timings": {k: round(v, 3) for k, v in result.timings.items()},
        "original_value": case.original_value,
        "planted_value": case.planted_value,
        "corrupted": case.corrupted,
        "corrected": result.corrected,
        "original": case.original,
        "diff": result.diff,
        "changes": [
            {
                "kind": c.kind,
                "old": c.old.as_list() if c.old else None,
                "new": c.new.as_list() if c.new else None,
                "applied": c.applied,
                "reason": c.reason,
                "raw_answers": list(c.raw_answers),
            }
            for c in result.changes
        ],
        "error": "; ".join(f"{e.stage}: {e.message}" for e in result.errors) if result.status == "error" else None,
    }


def _engine(llm: str, scorer: str, fake: bool, threads: int | None) -> GraphEval:
    if fake:
        import bench_correct

        chat, judge = bench_correct.fake_models()
        return GraphEval(llm=chat, scorer=judge, cache=True)
    from grapheval_plugins.models import resolve_llm, resolve_scorer

    options: dict[str, Any] = {"n_threads": threads} if threads else {}
    CACHE.mkdir(parents=True, exist_ok=True)
    return GraphEval(
        llm=resolve_llm(llm, **options) if llm.startswith("local:") else llm,
        scorer=resolve_scorer(scorer, **options) if scorer.startswith("judge:local:") else scorer,
        cache=CACHE / f"kg-{bench.slug(llm)}.sqlite",
    )


def warm_judge(engine: GraphEval, case: pe.PlantedCase) -> None:
    """What a detection of ``case`` in this process leaves the judge holding: the context evaluated (scored
    against the whole output), then the output (scored against itself, as the extraction-fidelity pass does).
    Untimed; a correction timed after it is timed as one that follows its detection (``GraphCorrect.correct``
    without a ``report``)."""
    engine.scorer.check([case.context, case.corrupted], [case.corrupted, case.corrupted])


@app.command()
def run(
    method: Annotated[
        Optional[list[str]], typer.Option(help="Correction method (repeat); none: detection only.")
    ] = None,
    cases_file: Annotated[Path, typer.Option("--cases", help="The planted-errors file.")] = pe.DEFAULT_OUT,
    llm: Annotated[str, typer.Option(help="Chat model spec (extraction and correction).")] = DEFAULT_LLM,
    scorer: Annotated[str, typer.Option(help="Scorer spec.")] = DEFAULT_SCORER,
    sample: Annotated[Optional[int], typer.Option(help="Draw N cases (kinds in turn, seeded).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the draw.")] = 0,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N cases (after drawing/grouping).")] = None,
    skip: Annotated[int, typer.Option(help="Leave out the first N cases (after drawing/grouping).")] = 0,
    exclude_draw: Annotated[
        Optional[list[str]],
        typer.Option(help="N:SEED: leave out the cases of that earlier draw (a held-out sample); repeat for "
                          "draws made in turn, each with the options of its own run."),
    ] = None,
    tag: Annotated[Optional[str], typer.Option(help="Suffix of the per-case file names.")] = None,
    threads: Annotated[Optional[int], typer.Option(help="llama.cpp threads of local models (default: all).")] = None,
    fake: Annotated[bool, typer.Option(help="Fake chat model + keyword scorer: a smoke test.")] = False,
    warm: Annotated[
        bool,
        typer.Option(help="Before correcting from a stored detection, score the output against the context, "
                          "untimed: the judge then holds what a detection in this process would leave it."),
    ] = True,
    results_dir: Annotated[Path, typer.Option(help="Where the per-case files go.")] = RESULTS,
) -> None:
    """Detect the planted errors, then correct each flagged case with every METHOD; resumable."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    variants = _variants()
    methods = list(method or [])
    bad = [m for m in methods if m not in variants]
    if bad:
        raise typer.BadParameter(f"unknown method(s) {bad}: use {sorted(variants)}")
    cases = select(pe.read_cases(cases_file), sample, seed, limit, _draws(exclude_draw), skip)
    llm_name, scorer_name = _names(llm, scorer, fake)
    engine = _engine(llm, scorer, fake, threads)
    if not fake:
        kg_file = RESULTS / f"kg-{bench.slug(llm)}.jsonl"
        if kg_file.exists() and engine.cache is not None:
            bench.seed_kg_cache(kg_file, engine.cache, engine.prompt)
    results_dir.mkdir(parents=True, exist_ok=True)
    from grapheval_plugins.correct import GraphCorrect

    fixers = {m: GraphCorrect(engine, show_progress=False, **variants[m]) for m in methods}
    locks = contextlib.ExitStack()  # one run per method and tag: two would append the same cases twice
    try:
        for m in methods:
            locks.enter_context(bench.write_lock(correct_path(results_dir, llm_name, scorer_name, m, tag), "--method"))
    except InputError as exc:
        locks.close()
        raise typer.BadParameter(str(exc)) from exc
    detections = bench.ResultStore(detect_path(results_dir, llm_name, scorer_name, tag))
    stores = {m: bench.ResultStore(correct_path(results_dir, llm_name, scorer_name, m, tag)) for m in methods}
    t0 = time.perf_counter()
    try:
        for number, case in enumerate(cases, start=1):
            fresh = case.id not in detections.done()
            if fresh:
                t = time.perf_counter()
                report = engine.evaluate(case.context, case.corrupted, id=case.id)
                detections.append(detection_row(case, report, time.perf_counter() - t))
            det = detections.rows[case.id]
            report = Report.model_validate({k: v for k, v in det.items() if k in Report.model_fields or k == "threshold"})
            line = f"[{number}/{len(cases)}] {case.id}: flagged={det['flagged']} on_target={det['on_target']}"
            for m, fixer in fixers.items():
                if not report.ok or not report.hallucinated or case.id in stores[m].done():
                    continue
                if warm and not fresh:
                    warm_judge(engine, case)
                t = time.perf_counter()
                result = asyncio.run(fixer.acorrect(case.context, case.corrupted, report=report, id=case.id))
                row = correction_row(case, m, result, time.perf_counter() - t)
                stores[m].append(row)
                line += f" | {m}: {row['outcome']} passed={row['passed']} {row['seconds']:.0f}s"
            typer.echo(f"{line} ({time.perf_counter() - t0:.0f} s)")
    finally:
        detections.close()
        for store in stores.values():
            store.close()
        locks.close()


@app.command()
def originals(
    cases_file: Annotated[Path, typer.Option("--cases", help="The planted-errors file.")] = pe.DEFAULT_OUT,
    llm: Annotated[str, typer.Option(help="Chat model spec (extraction).")] = DEFAULT_LLM,
    scorer: Annotated[str, typer.Option(help="Scorer spec.")] = DEFAULT_SCORER,
    sample: Annotated[Optional[int], typer.Option(help="Draw N cases (kinds in turn, seeded).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the draw.")] = 0,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N cases (after drawing/grouping).")] = None,
    exclude_draw: Annotated[
        Optional[list[str]],
        typer.Option(help="N:SEED: leave out the cases of that earlier draw (a held-out sample); repeat for "
                          "draws made in turn, each with the options of its own run."),
    ] = None,
    tag: Annotated[Optional[str], typer.Option(help="Suffix of the per-case file names.")] = None,
    threads: Annotated[Optional[int], typer.Option(help="llama.cpp threads of local models (default: all).")] = None,
    fake: Annotated[bool, typer.Option(help="Fake chat model + keyword scorer: a smoke test.")] = False,
    results_dir: Annotated[Path, typer.Option(help="Where the per-case files go.")] = RESULTS,
) -> None:
    """Detect the ORIGINAL (faithful) outputs of the same cases: how often the detector flags the output before
    any error was planted (its false flags on these rows, beside its recall); resumable."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    cases = select(pe.read_cases(cases_file), sample, seed, limit, _draws(exclude_draw))
    llm_name, scorer_name = _names(llm, scorer, fake)
    engine = _engine(llm, scorer, fake, threads)
    if not fake:
        kg_file = RESULTS / f"kg-{bench.slug(llm)}.jsonl"
        if kg_file.exists() and engine.cache is not None:
            bench.seed_kg_cache(kg_file, engine.cache, engine.prompt)
    results_dir.mkdir(parents=True, exist_ok=True)
    with bench.ResultStore(originals_path(results_dir, llm_name, scorer_name, tag)) as store:
        for number, case in enumerate(cases, start=1):
            if case.id in store.done():
                continue
            t = time.perf_counter()
            report = engine.evaluate(case.context, case.original, id=case.id)
            row = detection_row(case, report, time.perf_counter() - t)
            row["on_target"] = None
            store.append(row)
            typer.echo(f"[{number}/{len(cases)}] {case.id} (original): flagged={row['flagged']} "
                       f"{row['detect_seconds']:.0f}s")


# --------------------------------------------------------------------------------------------- tables
def _pct(n: int, d: int) -> str:
    return "—" if not d else f"{100 * n / d:.0f} % ({n}/{d})"


def _mean(values: Sequence[float]) -> str:
    return "—" if not values else f"{sum(values) / len(values):.1f}"


def _mean3(values: Sequence[float]) -> str:
    return "—" if not values else f"{sum(values) / len(values):.3f}"


def detection_table(
    cases: Sequence[pe.PlantedCase],
    det: Mapping[str, Mapping[str, Any]],
    original: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """Detector recall by kind: flagged and flagged on target, over the cases detected without error; with the
    detections of the original outputs, how many of those the detector flags too, and how many planted errors
    it flags where it does not flag the original."""
    both = original is not None
    lines = [
        "| kind | cases | flagged | flag names the planted value | s / case |"
        + (" original flagged | flagged, original not |" if both else ""),
        "|---|---|---|---|---|" + ("---|---|" if both else ""),
    ]
    kinds = [k for k in pe.KINDS if any(c.kind == k for c in cases)]
    for kind in [*kinds, "all"]:
        rows = [det[c.id] for c in cases if (kind == "all" or c.kind == kind) and c.id in det]
        rows = [r for r in rows if not r.get("error")]
        flagged = sum(1 for r in rows if r["flagged"])
        target = sum(1 for r in rows if r.get("on_target"))
        seconds = [float(r["detect_seconds"]) for r in rows]
        line = (f"| {kind} | {len(rows)} | {_pct(flagged, len(rows))} | {_pct(target, len(rows))} "
                f"| {_mean(seconds)} |")
        if original is not None:
            pairs = [(r, original[r["id"]]) for r in rows if r["id"] in original and not original[r["id"]].get("error")]
            orig = sum(1 for _, o in pairs if o["flagged"])
            only = sum(1 for r, o in pairs if r["flagged"] and not o["flagged"])
            line += f" {_pct(orig, len(pairs))} | {_pct(only, len(pairs))} |"
        lines.append(line)
    return "\n".join(lines)


def correction_table(per_method: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """One line per method over the flagged cases it corrected: restored (clean: no collateral), collateral,
    deleted, unchanged, wrong edit, mean ROUGE-L F of the text outside the span (1.0: untouched), passes the
    re-check (and restored among those), calls and seconds per case."""
    lines = [
        "| method | flagged cases | restored | restored, no collateral | collateral | deleted | unchanged "
        "| wrong edit | ROUGE-L outside the span | passes re-check | restored & passes | LLM calls / case "
        "| re-check calls / case | s / case |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for method, rows in per_method.items():
        ok = [r for r in rows if not r.get("error")]
        n = len(ok)

        def count(pred: Any, rows: Sequence[Mapping[str, Any]] = ok) -> int:
            return sum(1 for r in rows if pred(r))

        lines.append(
            f"| {method} | {n} | {_pct(count(lambda r: r['restored']), n)} "
            f"| {_pct(count(lambda r: r['restored'] and not r['collateral']), n)} "
            f"| {_pct(count(lambda r: r['collateral']), n)} | {_pct(count(lambda r: r['deleted']), n)} "
            f"| {_pct(count(lambda r: r['unchanged']), n)} | {_pct(count(lambda r: r['outcome'] == 'wrong'), n)} "
            f"| {_mean3([float(r['rougeL_outside']) for r in ok if r.get('rougeL_outside') is not None])} "
            f"| {_pct(count(lambda r: r['passed']), n)} | {_pct(count(lambda r: r['restored'] and r['passed']), n)} "
            f"| {_mean([float(r['llm_calls']) for r in ok])} | {_mean([float(r['recheck_llm_calls']) for r in ok])} "
            f"| {_mean([float(r['seconds']) for r in ok])} |"
        )
    return "\n".join(lines)


def outcomes_by_kind(per_method: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """Each case's outcome per method, grouped by kind (``restored``, ``restored+collateral``, ``deleted``,
    ``unchanged``, ``wrong``)."""
    ids = sorted({r["id"] for rows in per_method.values() for r in rows})
    by_id = {m: {r["id"]: r for r in rows} for m, rows in per_method.items()}
    kinds = {r["id"]: r["kind"] for rows in per_method.values() for r in rows}
    head = "| case | kind | " + " | ".join(per_method) + " |"
    lines = [head, "|---|---|" + "---|" * len(per_method)]
    for rid in sorted(ids, key=lambda i: (pe.KINDS.index(kinds[i]) if kinds[i] in pe.KINDS else 99, i)):
        cells = []
        for m in per_method:
            r = by_id[m].get(rid)
            cells.append("—" if r is None else r["outcome"] + (" ✓" if r["passed"] else ""))
        lines.append(f"| `{rid}` | {kinds[rid]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@app.command()
def table(
    cases_file: Annotated[Path, typer.Option("--cases", help="The planted-errors file.")] = pe.DEFAULT_OUT,
    llm: Annotated[str, typer.Option(help="Chat model spec the run used.")] = DEFAULT_LLM,
    scorer: Annotated[str, typer.Option(help="Scorer spec the run used.")] = DEFAULT_SCORER,
    tag: Annotated[
        Optional[list[str]], typer.Option(help="The run's --tag (repeat: runs side by side on parts of the cases).")
    ] = None,
    fake: Annotated[bool, typer.Option(help="Report the fake smoke-test run.")] = False,
    same_cases: Annotated[bool, typer.Option(help="Compare the methods on the cases all of them corrected.")] = True,
    results_dir: Annotated[Path, typer.Option(help="Where the per-case files are.")] = RESULTS,
) -> None:
    """Markdown tables from the per-case files (no model is loaded)."""
    llm_name, scorer_name = _names(llm, scorer, fake)
    all_cases = {c.id: c for c in pe.read_cases(cases_file)}
    tags: list[str | None] = list(tag) if tag else [None]
    paths = [detect_path(results_dir, llm_name, scorer_name, t) for t in tags]
    missing = [p for p in paths if not p.exists()]
    if missing:
        typer.echo(f"no detection results at {missing[0]}")
        raise typer.Exit(1)
    det = {r["id"]: r for p in paths for r in bench.load_results(p)}
    cases = [all_cases[i] for i in det if i in all_cases]
    for case in cases:  # recomputed from the stored report, so the figure follows on_target() as it is
        row = det[case.id]
        if not row.get("error"):
            report = Report.model_validate({k: v for k, v in row.items() if k in Report.model_fields or k == "threshold"})
            det[case.id] = {**row, "on_target": on_target(report, case)}
    typer.echo(f"Chat model: `{llm_name}`; scorer: `{scorer_name}`; machine: {bench.cpu_model()} ({platform.machine()}, "
               f"{os.cpu_count()} CPU(s)); {len(cases)} planted cases detected.\n")
    opaths = [p for t in tags if (p := originals_path(results_dir, llm_name, scorer_name, t)).exists()]
    original = {r["id"]: r for p in opaths for r in bench.load_results(p)} if opaths else None
    typer.echo(detection_table(cases, det, original))
    per_method: dict[str, list[dict[str, Any]]] = {}
    for method in _variants():
        files = [p for t in tags if (p := correct_path(results_dir, llm_name, scorer_name, method, t)).exists()]
        if files:
            per_method[method] = [
                {**r, **score_fields(all_cases[r["id"]], r["corrected"])} if r["id"] in all_cases else r
                for p in files for r in bench.load_results(p)
            ]
    if not per_method:
        return
    if same_cases:
        common = set.intersection(*({r["id"] for r in rows} for rows in per_method.values()))
        per_method = {m: [r for r in rows if r["id"] in common] for m, rows in per_method.items()}
    typer.echo("")
    typer.echo(correction_table(per_method))
    typer.echo("")
    typer.echo(outcomes_by_kind(per_method))


if __name__ == "__main__":
    app()
