"""Detection study (the paper's Table 2 design): raw scorer vs scorer + GraphEval, per data set.

Commands (run from the repository root):

    # score rows (resumable; KGs cached under benchmarks/.cache/, exported to benchmarks/results/kg-<llm>.jsonl)
    .venv/bin/python benchmarks/detection.py run qags_x --llm local:qwen2.5-coder-0.5b \
        --scorer judge:local:qwen2.5-coder-0.5b
    # re-score from the committed KGs with no LLM at all (any extraction not in the file fails loudly)
    .venv/bin/python benchmarks/detection.py run qags_x --llm local:qwen2.5-coder-0.5b --kg-only \
        --scorer judge:local:qwen2.5-coder-0.5b
    # the tables, from the committed per-row files only (no model)
    .venv/bin/python benchmarks/detection.py report --llm local:qwen2.5-coder-0.5b \
        --scorer judge:local:qwen2.5-coder-0.5b
    # a sample of raw-vs-graph disagreements to categorise by hand
    .venv/bin/python benchmarks/detection.py disagreements --llm ... --scorer ... -n 30
    # the lab subset (60 rows per set, stratified, seeded; ids written to benchmarks/lab_subset.json)
    .venv/bin/python benchmarks/detection.py lab-subset
    # lever 1, extraction fidelity: each committed triple of the lab rows scored against its own output (resumable)
    nice -n 10 .venv/bin/python benchmarks/detection.py fidelity qags_c --threads 1
    # the lever's tables, from the committed per-row files only (no model)
    .venv/bin/python benchmarks/detection.py lab-report
    # lever 3, evidence per claim: each committed triple of the lab rows scored against its 3 closest context
    # sentences (resumable), then its tables from the committed per-row files only (no model)
    nice -n 10 .venv/bin/python benchmarks/detection.py evidence qags_c --k 3 --threads 1
    .venv/bin/python benchmarks/detection.py evidence-report
    # lever 4, triples grouped per output sentence: its tables from the committed per-row files only (no model)
    .venv/bin/python benchmarks/detection.py sentence-report
    # lever 2, triples that keep the claim: the lab rows extracted with the keep-qualifiers prompt (resumable), their
    # fidelity pass, then the table against the default's triples on the same rows (no model)
    nice -n 10 .venv/bin/python benchmarks/detection.py run qags_x --lab --prompt keep-qualifiers \
        --llm local:qwen2.5-coder-1.5b --scorer judge:local:qwen2.5-coder-1.5b --threads 1
    nice -n 10 .venv/bin/python benchmarks/detection.py fidelity qags_x --prompt keep-qualifiers --threads 1
    .venv/bin/python benchmarks/detection.py prompt-report
    # lever 2 on every row of a set: the same three steps without --lab / with --all (the report then covers every
    # row that both prompts' per-row and fidelity files hold; resumable, the lab rows' results are kept)
    nice -n 10 .venv/bin/python benchmarks/detection.py run qags_x --prompt keep-qualifiers \
        --llm local:qwen2.5-coder-1.5b --scorer judge:local:qwen2.5-coder-1.5b --threads 1
    nice -n 10 .venv/bin/python benchmarks/detection.py fidelity qags_x --prompt keep-qualifiers --all --threads 1
    .venv/bin/python benchmarks/detection.py prompt-report --all --datasets qags_x

Per-row files: ``benchmarks/results/detect-<dataset>-<llm>-<scorer>-<prompt>-<render>.jsonl``; the fidelity
lever's: ``benchmarks/results/fidelity-<dataset>-<llm>-<scorer>-<prompt>-<render>.jsonl``; the evidence lever's:
``benchmarks/results/evidence-k<k>-<dataset>-<llm>-<scorer>-<prompt>-<render>.jsonl``.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import random
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from grapheval_plugins.cache import CachedKG
from grapheval_plugins.extract.parser import parse_triples
from grapheval_plugins.extract.prompts import KG_PROMPT, KG_PROMPT_KEEP_QUALIFIERS, KG_PROMPT_PAPER

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the harness beside this script
import harness as bench  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = HERE / ".cache"
PROMPTS = {"examples-first": KG_PROMPT, "paper-order": KG_PROMPT_PAPER, "keep-qualifiers": KG_PROMPT_KEEP_QUALIFIERS}
SUMMEVAL_SAMPLE_SEED = 0
RUN_ORDER_SEED = 0
SPLIT_SEED = 0
LAB_SEED = 0
LAB_ROWS = 60
LAB_FILE = HERE / "lab_subset.json"
SCORE_CACHE = CACHE / "scores.sqlite"

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def result_path(dataset: str, llm: str, scorer: str, prompt: str, render: str) -> Path:
    return RESULTS / f"detect-{dataset}-{bench.slug(llm)}-{bench.slug(scorer)}-{prompt}-{render}.jsonl"


def kg_path(llm: str) -> Path:
    return RESULTS / f"kg-{bench.slug(llm)}.jsonl"


def dataset_rows(name: str, sample: Optional[int], seed: int) -> list[dict[str, Any]]:
    rows = bench.load_dataset(name)
    if sample is not None:
        rows = bench.stratified_sample(rows, sample, seed=seed)
    # Run order: contexts in a seeded random order (so the rows done so far are a random subset of the set,
    # whenever a long run is stopped), rows sharing a context back to back (a judge reuses the context's
    # evaluated prefix).
    contexts = list(dict.fromkeys(r["context"] for r in rows))
    random.Random(RUN_ORDER_SEED).shuffle(contexts)
    order = {c: i for i, c in enumerate(contexts)}
    return sorted(rows, key=lambda r: order[r["context"]])


def _kg_llm_id(llm: str) -> str:
    """The chat model id recorded in the exported KG file for ``llm`` (the cache key's first part)."""
    ids = {e["llm"] for e in bench.read_jsonl(kg_path(llm))}
    if len(ids) != 1:
        raise typer.BadParameter(f"{kg_path(llm)} holds {len(ids)} chat model ids ({sorted(ids)}); expected one")
    return ids.pop()


PAIR = re.compile(r'\[\s*"((?:[^"\\\n]|\\.)*)"\s*,\s*"((?:[^"\\\n]|\\.)*)"\s*\]')


def lenient_triples(raw_text: str) -> list[list[str]]:
    """The triples of an answer, plus its ``["subject", "predicate phrase"]`` pairs (which small models write
    instead of triples) read as ``[subject, first word, rest]``: the rendered sentence is the pair's two parts."""
    out = [t.as_list() for t in parse_triples(raw_text).triples]
    for a, b in PAIR.findall(raw_text):
        a, b = " ".join(a.split()), " ".join(b.split())
        if a and b:
            words = b.split(" ", 1)
            out.append([a, words[0], words[1]] if len(words) == 2 else [a, "is", b])
    return out


def derive_pairs_kgs(llm_id: str, base_version: str, kg_file: Path) -> str:
    """Export, under ``<base version>+pairs``, every KG of ``kg_file`` re-read with :func:`lenient_triples`."""
    version = base_version + "+pairs"
    entries = []
    for e in bench.read_jsonl(kg_file):
        if e["llm"] == llm_id and e["prompt"] == base_version:
            triples = e["triples"] or (lenient_triples(e["raw_text"]) if e.get("raw_text") else [])
            entries.append((llm_id, version, e["text"], CachedKG(triples=triples, raw_text=e.get("raw_text"))))
    bench.export_kg(kg_file, entries)
    return version


def copy_unchanged_rows(
    rows: list[dict[str, Any]], base: dict[str, dict[str, Any]], target: Path, version: str
) -> list[dict[str, Any]]:
    """Pairs lever: a base row that had triples keeps its knowledge graph (pairs are only read where no triple
    parsed), so its result is copied to ``target`` instead of judged again; the rows left to score are returned.
    (Re-judging such rows gave the same scores, to the 6 decimals stored, on the 27 QAGS-X rows checked.)"""
    store = bench.ResultStore(target)
    todo = []
    for row in rows:
        done = base[row["id"]]
        if done.get("fallback"):
            todo.append(row)
        elif row["id"] not in store.done():
            store.append({**done, "prompt": version, "llm_calls": 0, "cached": True, "copied": True})
    return todo


_CONTENT_WORD = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    "a an the of in on at to for and or is was are were be been by with as from that this it its his her their "
    "he she they has have had not".split()
)


def _content_words(text: str) -> set[str]:
    words = _CONTENT_WORD.findall(text.lower().replace("'s", ""))
    return {w for w in words if w not in _STOPWORDS and len(w) > 1}


def is_grounded(output: str, subject: str, obj: str) -> bool:
    """Grounded-triples lever: a triple is kept when every content word of its subject and object occurs in the
    output (case-insensitive, possessive 's and stop words ignored). Catches facts the extraction invented or glued
    from elsewhere, e.g. ``[Bahar Mustafa, is a, man]`` when the output never says "man"."""
    return _content_words(subject + " " + obj) <= _content_words(output)


def grounded_row(row: dict[str, Any], output: str) -> dict[str, Any]:
    """A detection result row re-decided with only its grounded triples (no model call): ``p_graph`` is the
    largest P(unsupported) over the kept triples, or the whole output's score (``p_raw``) when none is kept, which
    is what GraphEval's fallback checks."""
    kept = [t for t in row["triples"] if is_grounded(output, t[0], t[2])]
    dropped = [t for t in row["triples"] if not is_grounded(output, t[0], t[2])]
    p_graph = max((t[3] for t in kept), default=row["p_raw"]) if row["triples"] else row["p_graph"]
    return {**row, "prompt": row["prompt"] + "+grounded", "triples": kept, "dropped": dropped,
            "p_graph": p_graph, "fallback": row.get("fallback") or not kept, "llm_calls": 0, "cached": True}


@app.command()
def grounded(
    llm: Annotated[str, typer.Option()] = "local:qwen2.5-coder-0.5b",
    scorer: Annotated[str, typer.Option()] = "judge:local:qwen2.5-coder-0.5b",
    prompt: Annotated[str, typer.Option()] = "examples-first",
    render: Annotated[str, typer.Option()] = "concat",
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "summeval,qags_c,qags_x",
) -> None:
    """Lever: write ``<prompt>+grounded`` result files from the base files, keeping only grounded triples
    (:func:`is_grounded`); no model is loaded. Report them with ``report --prompt <prompt>+grounded``."""
    for name in datasets.split(","):
        base = result_path(name, llm, scorer, prompt, render)
        if not base.exists():
            continue
        outputs = {r["id"]: r["output"] for r in bench.load_dataset(name)}
        target = result_path(name, llm, scorer, prompt + "+grounded", render)
        rows = [grounded_row(r, outputs[r["id"]]) for r in bench.load_results(base) if not r.get("error")]
        target.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        dropped = sum(len(r["dropped"]) for r in rows)
        total = dropped + sum(len(r["triples"]) for r in rows)
        typer.echo(f"{target}: {len(rows)} rows, {dropped} of {total} triples dropped as ungrounded")


@app.command()
def run(
    dataset: Annotated[str, typer.Argument(help="summeval, qags_c, qags_x, or a JSONL path.")],
    llm: Annotated[str, typer.Option(help="Chat model spec for extraction.")] = "local:qwen2.5-coder-0.5b",
    scorer: Annotated[str, typer.Option(help="Scorer spec.")] = "judge:local:qwen2.5-coder-0.5b",
    prompt: Annotated[str, typer.Option(help="examples-first (default), paper-order or keep-qualifiers "
                                              "(lever 2).")] = "examples-first",
    render: Annotated[str, typer.Option(help="concat (paper) or sentence.")] = "concat",
    lab: Annotated[bool, typer.Option("--lab", help="Only the lab subset's rows (benchmarks/lab_subset.json), in "
                                                    "its order.")] = False,
    sample: Annotated[Optional[int], typer.Option(help="Stratified sample of N rows (fixed seed).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the stratified sample.")] = SUMMEVAL_SAMPLE_SEED,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N rows (after sampling/ordering).")] = None,
    reverse: Annotated[bool, typer.Option(help="Walk the run order from its end (a second process, with --out, "
                                               "works toward the first one; then `merge`).")] = False,
    kg_only: Annotated[bool, typer.Option(help="Take every KG from the committed file; never call the LLM.")] = False,
    pairs: Annotated[bool, typer.Option(help="Lever: re-read the committed answers accepting [subject, predicate] "
                                              "pairs; scores only rows of the base run; no LLM call.")] = False,
    out: Annotated[Optional[Path], typer.Option(help="Result file (default: benchmarks/results/detect-...).")] = None,
    cache: Annotated[Optional[Path], typer.Option(help="Claim-score cache (SQLite file): claims scored by an "
                                                       "earlier run with the same scorer, judge prompt, premise and "
                                                       "claim are not scored again.")] = None,
    threads: Annotated[Optional[int], typer.Option(help="llama.cpp threads of a local judge (default: all cores "
                                                         "this process may use).")] = None,
) -> None:
    """Score DATASET raw and with GraphEval; resumable (ids already in the result file are skipped)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if prompt not in PROMPTS:
        raise typer.BadParameter(f"prompt must be one of {sorted(PROMPTS)}")
    name = Path(dataset).stem if Path(dataset).suffix else dataset
    rows = dataset_rows(dataset, sample, seed)
    if lab:
        by_id = {r["id"]: r for r in rows}
        rows = [by_id[i] for i in lab_ids(name)]
    if limit is not None:
        rows = rows[:limit]
    if reverse:
        rows = rows[::-1]
    chat: Any = llm
    kg_prompt = PROMPTS[prompt]
    tag = prompt
    if kg_only or pairs:
        chat = bench.cache_only_chat_model(_kg_llm_id(llm))
    if pairs:
        base = {r["id"]: r for r in bench.load_results(result_path(name, llm, scorer, prompt, render))
                if not r.get("error")}
        rows = [r for r in rows if r["id"] in base]
        kg_prompt = dataclasses.replace(kg_prompt, version=derive_pairs_kgs(_kg_llm_id(llm), kg_prompt.version,
                                                                            kg_path(llm)))
        tag = prompt + "+pairs"
    target = out or result_path(name, llm, scorer, tag, render)
    if pairs:
        rows = copy_unchanged_rows(rows, base, target, kg_prompt.version)
    summary = bench.run_detection(
        rows, target, dataset=name, llm=chat, scorer=bench_scorer(scorer, cache, threads),
        kg_cache=CACHE / f"kg-{bench.slug(llm)}.sqlite",
        kg_file=kg_path(llm), prompt=kg_prompt, render=render,
    )
    typer.echo(
        f"{target}: {summary.done} scored, {summary.skipped} already done, {summary.errors} errors, "
        f"{summary.llm_calls} LLM calls, {summary.seconds:.0f} s"
    )
    if summary.error_ids:
        typer.echo(f"errored ids (redone on the next run): {summary.error_ids[:20]}")


def bench_scorer(spec: str, cache: Optional[Path], threads: Optional[int]) -> Any:
    """The scorer of a run: ``spec`` (a local judge at ``threads`` llama.cpp threads), behind the claim-score cache
    at ``cache`` when given (the cache keeps the scorer's name, so result rows and hybrid weights read the same)."""
    from grapheval_plugins.models import resolve_scorer
    from grapheval_plugins.score_cache import CachedScorer, SQLiteScoreCache

    options: dict[str, Any] = {}
    if spec.startswith("judge:local:"):
        from grapheval_plugins.local.judge import JUDGE_PROMPT

        # The committed per-row files were scored in this wording; a resumed run extends them alike (the 1.5B's
        # shipped wording since 2026-12-03, QUESTION_FIRST_PROMPT, is scored by bench_judge_prompt.py).
        options["prompt"] = JUDGE_PROMPT
        if threads is not None:
            options["n_threads"] = threads
    scorer = resolve_scorer(spec, **options)
    return CachedScorer(scorer, SQLiteScoreCache(cache)) if cache is not None else scorer


@app.command()
def merge(
    source: Annotated[Path, typer.Argument(help="Result file written by a second process (`run --reverse --out`).")],
    into: Annotated[Path, typer.Argument(help="The main result file of the same run.")],
) -> None:
    """Append SOURCE's rows that INTO lacks (by id), so that one file holds the whole run."""
    added = bench.merge_results(source, into)
    typer.echo(f"{into}: {added} row(s) added from {source}; {len(bench.load_results(into))} in all")


# --------------------------------------------------------------------------------------------- tables
def _fmt(x: float, digits: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def _load_sets(llm: str, scorer: str, prompt: str, render: str, datasets: list[str]) -> dict[str, list[dict]]:
    sets: dict[str, list[dict]] = {}
    for name in datasets:
        path = result_path(name, llm, scorer, prompt, render)
        rows = [r for r in bench.load_results(path) if not r.get("error")]
        if rows:
            sets[name] = rows
    return sets


def _combined(row: dict[str, Any], how: str) -> float:
    if how == "raw":
        return row["p_raw"]
    if how == "graph":
        return row["p_graph"]
    if how == "mean":
        return (row["p_raw"] + row["p_graph"]) / 2
    if how == "max":
        return max(row["p_raw"], row["p_graph"])
    if how == "min":
        return min(row["p_raw"], row["p_graph"])
    raise ValueError(how)


def _fitted(sets: dict[str, list[dict]], name: str, how: str) -> tuple[list[float], str]:
    """Per-row thresholds for ``name``, never fitted on the rows they decide.

    With other data sets: one threshold fitted on all their rows. With ``name`` alone: 2-fold cross-fitting
    (a seeded half split; each half decided by the threshold fitted on the other half).
    """
    rows = sets[name]
    others = [r for other, rs in sets.items() if other != name for r in rs]
    if others:
        t = bench.fit_threshold([r["label"] for r in others], [_combined(r, how) for r in others])
        return [t] * len(rows), f"{t:.3f}"
    ids = sorted(r["id"] for r in rows)
    random.Random(SPLIT_SEED).shuffle(ids)
    fold = {rid: i % 2 for i, rid in enumerate(ids)}
    ts = []
    for k in (0, 1):
        train = [r for r in rows if fold[r["id"]] != k]
        ts.append(bench.fit_threshold([r["label"] for r in train], [_combined(r, how) for r in train]))
    return [ts[fold[r["id"]]] for r in rows], f"{ts[0]:.2f}/{ts[1]:.2f}"


def tables(sets: dict[str, list[dict]], n_boot: int = 2000, seed: int = 0) -> str:
    """Markdown tables: at 0.5, with thresholds fitted elsewhere, and decisions from both scores."""
    import numpy as np

    lines: list[str] = []
    for policy in ("0.5", "fitted"):
        title = ("the paper’s 0.5" if policy == "0.5" else
                 "fitted on the other data set(s); on a lone data set, 2-fold cross-fitted (split seed "
                 f"{SPLIT_SEED})")
        lines += [f"**Threshold: {title}**", "",
                  "| data set | n | t raw | t graph | BA raw | BA graph | lift | TPR/TNR raw | TPR/TNR graph "
                  "| AUC raw | AUC graph |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        inputs = []
        for name, rows in sets.items():
            y = np.array([r["label"] for r in rows])
            raw = np.array([r["p_raw"] for r in rows])
            graph = np.array([r["p_graph"] for r in rows])
            if policy == "0.5":
                t_raw, t_graph = np.full(len(rows), 0.5), np.full(len(rows), 0.5)
                d_raw = d_graph = "0.5"
            else:
                tr_list, d_raw = _fitted(sets, name, "raw")
                tg_list, d_graph = _fitted(sets, name, "graph")
                t_raw, t_graph = np.array(tr_list), np.array(tg_list)
            pr, pg = raw > t_raw, graph > t_graph
            ba_r, ba_g = 100 * bench.balanced_accuracy(y, pr), 100 * bench.balanced_accuracy(y, pg)
            tr, nr = bench.rates(y, pr)
            tg, ng = bench.rates(y, pg)
            lines.append(
                f"| {name} | {len(rows)} | {d_raw} | {d_graph} | {_fmt(ba_r)} | {_fmt(ba_g)} "
                f"| {ba_g - ba_r:+.1f} | {tr:.2f}/{nr:.2f} | {tg:.2f}/{ng:.2f} "
                f"| {_fmt(100 * bench.roc_auc(y, raw))} | {_fmt(100 * bench.roc_auc(y, graph))} |"
            )
            # Per-row thresholds folded into the scores: s > t  <=>  s - t + 0.5 > 0.5.
            inputs.append(bench.LiftInput(name, y.tolist(), (raw - t_raw + 0.5).tolist(),
                                          (graph - t_graph + 0.5).tolist()))
        lift = bench.bootstrap_lift(inputs, n_boot=n_boot, seed=seed)
        lines += ["", f"Size-weighted lift over {', '.join(i.name for i in inputs)}: **{lift.lift:+.1f}** points "
                  f"(bootstrap SE {lift.se:.1f}, 95 % CI {lift.ci_low:+.1f} … {lift.ci_high:+.1f}; "
                  f"{lift.n_boot} resamples of rows within each data set, seed {lift.seed}).", ""]
    lines += ["**Decisions from both scores** (balanced accuracy; fitted as above)", ""]
    hows = ["raw", "graph", "mean", "max", "min"]
    lines.append("| data set | " + " | ".join(f"{h} @0.5 | {h} fitted" for h in hows) + " |")
    lines.append("|---|" + "---|" * (2 * len(hows)))
    for name, rows in sets.items():
        y = [r["label"] for r in rows]
        cells = []
        for how in hows:
            s = [_combined(r, how) for r in rows]
            at = 100 * bench.balanced_accuracy(y, [v > 0.5 for v in s])
            ts, _ = _fitted(sets, name, how)
            fit = 100 * bench.balanced_accuracy(y, [v > t for v, t in zip(s, ts)])
            cells.append(f"{_fmt(at)} | {_fmt(fit)}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    lines.append("")
    return "\n".join(lines)


def stats(sets: dict[str, list[dict]]) -> str:
    """Extraction statistics and time per stage."""
    lines = ["| data set | rows | triples/row | fallback (no triple parsed) | LLM calls/row (first run) "
             "| s extract | s check graph | s check raw |", "|---|---|---|---|---|---|---|---|"]
    for name, rows in sets.items():
        n = len(rows)
        fresh = [r for r in rows if not r.get("cached")]

        def mean(values: list[float]) -> float:
            return sum(values) / len(values) if values else math.nan

        lines.append(
            f"| {name} | {n} | {mean([len(r['triples']) for r in rows]):.1f} "
            f"| {sum(1 for r in rows if r.get('fallback'))} "
            f"| {_fmt(mean([r['llm_calls'] for r in fresh]), 2)} "
            f"| {_fmt(mean([r['timings']['extract'] for r in fresh]))} "
            f"| {_fmt(mean([r['timings']['check_graph'] for r in rows]))} "
            f"| {_fmt(mean([r['timings']['check_raw'] for r in rows]))} |"
        )
    return "\n".join(lines) + "\n"


@app.command()
def report(
    llm: Annotated[str, typer.Option()] = "local:qwen2.5-coder-0.5b",
    scorer: Annotated[str, typer.Option()] = "judge:local:qwen2.5-coder-0.5b",
    prompt: Annotated[str, typer.Option()] = "examples-first",
    render: Annotated[str, typer.Option()] = "concat",
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "summeval,qags_c,qags_x",
    n_boot: Annotated[int, typer.Option()] = 2000,
    seed: Annotated[int, typer.Option()] = 0,
    same_rows_as: Annotated[Optional[str], typer.Option(help="Only rows also in the files of this prompt tag "
                                                              "(e.g. examples-first+pairs).")] = None,
    rows_after: Annotated[Optional[str], typer.Option(
        help="Only rows after the first N of each set's run order, e.g. qags_c=40,qags_x=30: leaves out the rows "
             "a lever was designed on.")] = None,
) -> None:
    """Print the tables from the per-row result files (no model is loaded)."""
    sets = _load_sets(llm, scorer, prompt, render, datasets.split(","))
    if rows_after:
        for item in rows_after.split(","):
            name, _, n = item.partition("=")
            if name in sets:
                first = {r["id"] for r in dataset_rows(name, None, SUMMEVAL_SAMPLE_SEED)[: int(n)]}
                sets[name] = [r for r in sets[name] if r["id"] not in first]
        sets = {k: v for k, v in sets.items() if v}
    if same_rows_as:
        other = _load_sets(llm, scorer, same_rows_as, render, list(sets))
        sets = {k: [r for r in v if r["id"] in {o["id"] for o in other.get(k, [])}] for k, v in sets.items()}
        sets = {k: v for k, v in sets.items() if v}
    if not sets:
        typer.echo("no result rows found", err=True)
        raise typer.Exit(1)
    typer.echo(f"LLM `{llm}`, scorer `{scorer}`, prompt `{prompt}`, render `{render}`\n")
    typer.echo(tables(sets, n_boot=n_boot, seed=seed))
    typer.echo(stats(sets))


# ----------------------------------------------------------------- the shipped decision rule (rule="hybrid")
PAPER_TAG = "examples-first"
"""Per-row files of the paper's procedure (kg-parser/1: triples only)."""
DEFAULT_TAG = "examples-first+pairs"
"""Per-row files of the shipped default's claims: pairs read (kg-parser/2), so the fallback rows are re-judged."""


def hybrid_score(row: dict[str, Any], weights: Any) -> float:
    """The shipped rule's P(hallucination) of a per-row result: the core's own function over its two scores."""
    return weights.probability(row["p_raw"], [row["p_graph"]])


def fit_weights(rows: list[dict[str, Any]], fitted_on: str) -> Any:
    from grapheval_plugins.calibrate import fit_hybrid

    return fit_hybrid([r["label"] for r in rows], [r["p_raw"] for r in rows], [r["p_graph"] for r in rows],
                      fitted_on=fitted_on)


def hybrid_tables(paper: dict[str, list[dict]], default: dict[str, list[dict]], n_boot: int, seed: int) -> str:
    """Per data set: raw, the paper's procedure and the shipped default's rule (weights fitted on the other sets)."""
    first = next(iter(default.values()))[0]
    in_sample = files_weights(first["llm"], first["scorer"], False, list(default))
    lines: list[str] = []
    lifts: dict[str, list[Any]] = {"raw @0.5": [], "raw, threshold fitted elsewhere": []}
    for name, rows in default.items():
        base = {r["id"]: r for r in paper.get(name, [])}
        rows = [r for r in rows if r["id"] in base]
        others = [r for other, rs in default.items() if other != name for r in rs]
        loso = fit_weights(others, "+".join(o for o in default if o != name))
        y = [r["label"] for r in rows]
        t_raw = bench.fit_threshold([r["label"] for r in others], [r["p_raw"] for r in others])
        t_paper = bench.fit_threshold([r["label"] for other, rs in paper.items() if other != name for r in rs],
                                      [r["p_graph"] for other, rs in paper.items() if other != name for r in rs])
        methods = [
            ("raw (whole output), 0.5", [r["p_raw"] for r in rows], 0.5, rows),
            (f"raw, threshold fitted elsewhere ({t_raw:.3f})", [r["p_raw"] for r in rows], t_raw, rows),
            ("paper's procedure, 0.5", [base[r["id"]]["p_graph"] for r in rows], 0.5, [base[r["id"]] for r in rows]),
            (f"paper's procedure, threshold fitted elsewhere ({t_paper:.3f})",
             [base[r["id"]]["p_graph"] for r in rows], t_paper, [base[r["id"]] for r in rows]),
            ("paper's rule + pairs, 0.5", [r["p_graph"] for r in rows], 0.5, rows),
            (f"**hybrid (default), weights fitted on {loso.fitted_on}, 0.5**",
             [hybrid_score(r, loso) for r in rows], 0.5, rows),
        ]
        methods.append(("hybrid, shipped weights (fitted on all three sets: in-sample), 0.5",
                        [hybrid_score(r, in_sample) for r in rows], 0.5, rows))
        lines += [f"**{name}** ({len(rows)} rows; {sum(y)} hallucinated)", "",
                  "| method | BA | TPR/TNR | AUC | fallback rows | LLM calls/row | s/row |", "|---|---|---|---|---|---|---|"]
        for label, scores, t, src in methods:
            pred = [v > t for v in scores]
            tpr, tnr = bench.rates(y, pred)
            # Calls and seconds of the first (uncached) run: the default extracts exactly as the paper's run did.
            fresh = [base[r["id"]] for r in rows if not base[r["id"]].get("cached")] or src
            calls = sum(r["llm_calls"] for r in fresh) / len(fresh) if "raw" not in label else 0.0
            # raw alone: its check after the context was read for the triples (a raw-only run also pays that read);
            # the paper's rule: extraction + the triples; the default: both.
            secs = [(0 if label.startswith("paper") else r["timings"]["check_raw"])
                    + (0 if label.startswith("raw") else r["timings"]["extract"] + r["timings"]["check_graph"])
                    for r in fresh]
            fallback = "—" if label.startswith("raw") else str(sum(1 for r in src if r.get("fallback")))
            lines.append(f"| {label} | {_fmt(100 * bench.balanced_accuracy(y, pred))} | {tpr:.2f}/{tnr:.2f} "
                         f"| {_fmt(100 * bench.roc_auc(y, scores))} | {fallback} | {calls:.2f} "
                         f"| {sum(secs) / len(secs):.1f} |")
        lines.append("")
        hyb = [hybrid_score(r, loso) for r in rows]
        raw = [r["p_raw"] for r in rows]
        lifts["raw @0.5"].append(bench.LiftInput(name, y, raw, hyb))
        lifts["raw, threshold fitted elsewhere"].append(bench.LiftInput(name, y, raw, hyb, raw_threshold=t_raw))
    for against, inputs in lifts.items():
        lift = bench.bootstrap_lift(inputs, n_boot=n_boot, seed=seed)
        lines.append(f"Size-weighted BA lift of the default (weights fitted on the other sets, 0.5) over {against}, "
                     f"{', '.join(i.name for i in inputs)}: **{lift.lift:+.1f}** points (bootstrap SE {lift.se:.1f}, "
                     f"95 % CI {lift.ci_low:+.1f} … {lift.ci_high:+.1f}; {lift.n_boot} resamples, seed {lift.seed}).")
        lines.append("")
    return "\n".join(lines)


@app.command("hybrid")
def hybrid_report(
    llm: Annotated[str, typer.Option()] = "local:qwen2.5-coder-1.5b",
    scorer: Annotated[str, typer.Option()] = "judge:local:qwen2.5-coder-1.5b",
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "summeval,qags_c,qags_x",
    n_boot: Annotated[int, typer.Option()] = 2000,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """The shipped default (``rule="hybrid"``) against raw and the paper's procedure, from the per-row files."""
    names = datasets.split(",")
    paper = _load_sets(llm, scorer, PAPER_TAG, "concat", names)
    default = _load_sets(llm, scorer, DEFAULT_TAG, "concat", names)
    if not default:
        typer.echo("no result rows found", err=True)
        raise typer.Exit(1)
    typer.echo(hybrid_tables(paper, default, n_boot=n_boot, seed=seed))


def files_weights(llm: str, scorer: str, with_fidelity: bool,
                  datasets: Sequence[str] = ("summeval", "qags_c", "qags_x")) -> Any:
    """The hybrid weights fitted on every row of the committed per-row files (and their fidelity files when
    ``with_fidelity``): the weights those files are read with. For the local judges the files hold the
    ``JUDGE_PROMPT`` wording (:func:`bench_scorer`); the 1.5B's shipped weights are fitted on its
    ``QUESTION_FIRST_PROMPT`` scores instead (``bench_judge_prompt.py fit``)."""
    default = _load_sets(llm, scorer, DEFAULT_TAG, "concat", list(datasets))
    rows = [r for rs in default.values() for r in rs]
    command = f"benchmarks/detection.py fit-hybrid --llm {llm} --scorer {scorer}"
    if with_fidelity:
        fid = {(r["dataset"], r["id"]): r for name in default for r in bench.load_results(fidelity_path(name, llm, scorer))
               if not r.get("error")}
        rows = [r for r in rows if (r["dataset"], r["id"]) in fid]
        rows = [{**r, "p_graph": max(lab_scores(r, fid[(r["dataset"], r["id"])])[1])} for r in rows]
        command += " --fidelity"
    return fit_weights(rows, f"{'+'.join(default)} ({len(rows)} rows, {DEFAULT_TAG} per-row files"
                             f"{' + fidelity files' if with_fidelity else ''}): {command}")


@app.command("fit-hybrid")
def fit_hybrid_command(
    llm: Annotated[str, typer.Option()] = "local:qwen2.5-coder-1.5b",
    scorer: Annotated[str, typer.Option()] = "judge:local:qwen2.5-coder-1.5b",
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "summeval,qags_c,qags_x",
    with_fidelity: Annotated[bool, typer.Option("--fidelity", help="Weights for GraphEval(fidelity=\"drop\"): the "
                                                                    "claims term over the triples the fidelity files "
                                                                    "keep (rows without a fidelity row left out).")] = False,
) -> None:
    """Fit the hybrid rule's weights on all rows of these sets' per-row files (:func:`files_weights`); prints an
    entry in the form of ``aggregate.FITTED_WEIGHTS``."""
    w = files_weights(llm, scorer, with_fidelity, datasets.split(","))
    typer.echo(f'HybridWeights(\n    whole={w.whole:.4f}, claims={w.claims:.4f}, bias={w.bias:.4f},\n'
               f'    fitted_on="{w.fitted_on}",\n    scorer="{scorer}", prompt="{KG_PROMPT.version}", '
               f'fidelity="{"drop" if with_fidelity else "off"}",\n),')


@app.command("live-default")
def live_default(
    dataset: Annotated[str, typer.Argument(help="summeval, qags_c or qags_x.")],
    llm: Annotated[str, typer.Option()] = "local:qwen2.5-coder-1.5b",
    scorer: Annotated[str, typer.Option()] = "judge:local:qwen2.5-coder-1.5b",
    n: Annotated[int, typer.Option("-n", help="Rows, drawn at random (seeded) from the per-row file.")] = 6,
    seed: Annotated[int, typer.Option()] = 0,
    with_fidelity: Annotated[bool, typer.Option("--fidelity", help="GraphEval(fidelity=\"drop\"), on the first N "
                                                                    "lab rows that lose a triple to it.")] = False,
    threads: Annotated[Optional[int], typer.Option(help="llama.cpp threads of a local judge.")] = None,
    cache: Annotated[Optional[Path], typer.Option(help="Claim-score cache (SQLite).")] = None,
) -> None:
    """Run the shipped ``GraphEval()`` itself on a few rows, from the committed knowledge graphs (no LLM call), and
    compare its P(hallucination) with the one the tables derive from the per-row files."""
    from grapheval_plugins import GraphEval
    from grapheval_plugins.cache import MemoryKGCache

    rows = {r["id"]: r for r in bench.load_results(result_path(dataset, llm, scorer, DEFAULT_TAG, "concat"))
            if not r.get("error")}
    data = {r["id"]: r for r in bench.load_dataset(dataset)}
    ids = sorted(rows)
    random.Random(seed).shuffle(ids)
    fid: dict[str, dict[str, Any]] = {}
    if with_fidelity:
        fid = {r["id"]: r for r in bench.load_results(fidelity_path(dataset, llm, scorer)) if not r.get("error")}
        ids = [i for i in lab_ids(dataset) if i in fid and len(kept_triples(fid[i])) < len(fid[i]["triples"])]
    kg_cache = MemoryKGCache()
    llm_id = _kg_llm_id(llm)
    for e in bench.read_jsonl(kg_path(llm)):
        if e["llm"] == llm_id and e["prompt"] == KG_PROMPT.version + "+pairs":
            kg_cache.set(llm_id, KG_PROMPT.cache_id, e["text"], CachedKG(triples=e["triples"],
                                                                         raw_text=e.get("raw_text")))
    # the files' judge wording and the weights fitted on them (for the 1.5B, its wording and weights until 2026-12-03)
    weights = files_weights(llm, scorer, with_fidelity)
    engine = GraphEval(llm=bench.cache_only_chat_model(llm_id), scorer=bench_scorer(scorer, None, threads),
                       cache=kg_cache, fidelity="drop" if with_fidelity else "off", score_cache=cache,
                       hybrid_weights=weights)
    typer.echo("| id | label | derived P | live P | difference | same verdict at 0.5 | claims | fidelity notes |\n"
               "|---|---|---|---|---|---|---|---|")
    for rid in ids[:n]:
        report = engine.evaluate(data[rid]["context"], data[rid]["output"], id=rid)
        derived = (weights.probability(*lab_scores(rows[rid], fid[rid])) if with_fidelity
                   else hybrid_score(rows[rid], weights))
        live = 1.0 - report.score if report.score is not None else math.nan
        typer.echo(f"| {rid} | {rows[rid]['label']} | {derived:.3f} | {live:.3f} | {abs(live - derived):.3f} "
                   f"| {(live > 0.5) == (derived > 0.5)} | {len(report.triples)} + whole "
                   f"| {'; '.join(i for i in report.extraction.issues if i.startswith('fidelity')) if report.extraction else ''} |")


@app.command()
def disagreements(
    llm: Annotated[str, typer.Option()] = "local:qwen2.5-coder-0.5b",
    scorer: Annotated[str, typer.Option()] = "judge:local:qwen2.5-coder-0.5b",
    prompt: Annotated[str, typer.Option()] = "examples-first",
    render: Annotated[str, typer.Option()] = "concat",
    datasets: Annotated[str, typer.Option()] = "summeval,qags_c,qags_x",
    n: Annotated[int, typer.Option("-n", help="Sample size.")] = 30,
    seed: Annotated[int, typer.Option()] = 0,
    out: Annotated[Optional[Path], typer.Option(help="Write the sample as JSONL here.")] = None,
) -> None:
    """A seeded sample of rows where raw and graph decide differently at 0.5, with the context's text."""
    sets = _load_sets(llm, scorer, prompt, render, datasets.split(","))
    rows = [r for rs in sets.values() for r in rs if (r["p_raw"] > 0.5) != (r["p_graph"] > 0.5)]
    rng = random.Random(seed)
    sample = sorted(rng.sample(rows, min(n, len(rows))), key=lambda r: r["id"])
    data = {name: {d["id"]: d for d in bench.load_dataset(name)} for name in sets}
    records = []
    for r in sample:
        src = data[r["dataset"]][r["id"]]
        graph_right = (r["p_graph"] > 0.5) == bool(r["label"])
        records.append({"id": r["id"], "label": r["label"], "p_raw": r["p_raw"], "p_graph": r["p_graph"],
                        "graph_right": graph_right, "output": src["output"], "triples": r["triples"],
                        "context": src["context"]})
    typer.echo(f"{len(rows)} disagreements; sample of {len(sample)} (seed {seed})", err=True)
    text = "\n".join(json.dumps(rec, ensure_ascii=False) for rec in records) + "\n"
    if out:
        out.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


# ----------------------------------------------------------------------------- the lab subset and lever 1
LAB_LLM = "local:qwen2.5-coder-1.5b"
LAB_SCORER = "judge:local:qwen2.5-coder-1.5b"


def fidelity_path(dataset: str, llm: str, scorer: str, tag: str = DEFAULT_TAG) -> Path:
    """Per-row file of the fidelity lever: each triple of the per-row file of ``tag`` (the default's unless told)
    scored against its output."""
    return RESULTS / f"fidelity-{dataset}-{bench.slug(llm)}-{bench.slug(scorer)}-{tag}-concat.jsonl"


def draw_lab_subset(sets: dict[str, list[dict[str, Any]]], n: int, seed: int) -> dict[str, list[str]]:
    """Per set, ``n`` ids stratified by label (:func:`harness.stratified_sample`, ``seed``), listed in a seeded
    random order (so the first k of a list, where a run stopped, are a random subset too).

    >>> rows = [{"id": str(i), "label": int(i < 30)} for i in range(100)]
    >>> ids = draw_lab_subset({"toy": rows}, 10, seed=0)["toy"]
    >>> len(ids), sum(int(i) < 30 for i in ids)
    (10, 3)
    """
    out: dict[str, list[str]] = {}
    for name, rows in sets.items():
        ids = [r["id"] for r in bench.stratified_sample(sorted(rows, key=lambda r: r["id"]), n, seed=seed)]
        random.Random(seed).shuffle(ids)
        out[name] = ids
    return out


def lab_first(lab: list[str], rows: list[dict[str, Any]]) -> list[str]:
    """The ids of ``rows``: the lab subset's first (in its order), then the others in the order of ``rows`` (the
    order of the ``--all`` passes, so that the lab rows done first are the same rows whatever else is done).

    >>> lab_first(["c", "a"], [{"id": i} for i in "abcd"])
    ['c', 'a', 'b', 'd']
    """
    ids = [r["id"] for r in rows]
    present, first = set(ids), set(lab)
    return [i for i in lab if i in present] + [i for i in ids if i not in first]


def lab_ids(dataset: str) -> list[str]:
    """The lab subset's ids of ``dataset``, in their run order (from the committed ``benchmarks/lab_subset.json``)."""
    if not LAB_FILE.exists():
        raise typer.BadParameter(f"{LAB_FILE} is missing: run `detection.py lab-subset` first")
    sets: dict[str, list[str]] = json.loads(LAB_FILE.read_text(encoding="utf-8"))["sets"]
    if dataset not in sets:
        raise typer.BadParameter(f"{dataset!r} is not in {LAB_FILE} (sets: {sorted(sets)})")
    return sets[dataset]


@app.command("lab-subset")
def lab_subset(
    llm: Annotated[str, typer.Option()] = LAB_LLM,
    scorer: Annotated[str, typer.Option()] = LAB_SCORER,
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "summeval,qags_c,qags_x",
    n: Annotated[int, typer.Option("-n", help="Rows per set.")] = LAB_ROWS,
    seed: Annotated[int, typer.Option()] = LAB_SEED,
) -> None:
    """Write ``benchmarks/lab_subset.json``: N rows per set, stratified by label, drawn (seeded) from the rows that
    both committed per-row files (the paper's and the default's) hold, so every lever can be measured on them."""
    names = datasets.split(",")
    paper = _load_sets(llm, scorer, PAPER_TAG, "concat", names)
    default = _load_sets(llm, scorer, DEFAULT_TAG, "concat", names)
    pool = {name: [r for r in default[name] if r["id"] in {p["id"] for p in paper.get(name, [])}] for name in default}
    sets = draw_lab_subset(pool, n, seed)
    record = {
        "command": f"benchmarks/detection.py lab-subset --llm {llm} --scorer {scorer} --datasets {datasets} -n {n} "
                   f"--seed {seed}",
        "seed": seed,
        "rows_per_set": n,
        "drawn_from": {name: f"{len(pool[name])} rows in both the {PAPER_TAG} and {DEFAULT_TAG} per-row files"
                       for name in pool},
        "sets": sets,
    }
    LAB_FILE.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    for name, ids in sets.items():
        labels = {r["id"]: r["label"] for r in pool[name]}
        typer.echo(f"{name}: {len(ids)} ids ({sum(labels[i] for i in ids)} hallucinated) of {len(pool[name])}")


def fidelity_row(row: dict[str, Any], scores: list[Any], scorer: Any, seconds: float, scored: int) -> dict[str, Any]:
    """One fidelity result row: each triple as ``[s, r, o, P(unsupported | context), P(unsupported | output)]``
    (``None`` where the judge gave no verdict against the output)."""
    triples = [[*t[:4], None if sc.error is not None else round(sc.p_unsupported, 6)]
               for t, sc in zip(row["triples"], scores)]
    return {"id": row["id"], "dataset": row["dataset"], "label": row["label"], "scorer": scorer.name,
            "fingerprint": scorer.fingerprint(), "prompt": row["prompt"], "render": row["render"],
            "triples": triples, "unjudged": [sc.error for sc in scores if sc.error is not None],
            "claims_scored": scored, "seconds": round(seconds, 3), "error": None}


@app.command()
def fidelity(
    dataset: Annotated[str, typer.Argument(help="summeval, qags_c or qags_x.")],
    llm: Annotated[str, typer.Option()] = LAB_LLM,
    scorer: Annotated[str, typer.Option()] = LAB_SCORER,
    threads: Annotated[Optional[int], typer.Option(help="llama.cpp threads of a local judge.")] = 1,
    cache: Annotated[Path, typer.Option(help="Claim-score cache (SQLite).")] = SCORE_CACHE,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N lab rows.")] = None,
    all_rows: Annotated[bool, typer.Option("--all", help="Every row of the per-row file of --prompt (the "
                                                          "default's unless told): the lab rows first, then the "
                                                          "others in the set's run order.")] = False,
    prompt: Annotated[str, typer.Option(help="Tag of the per-row file whose triples are scored (e.g. keep-qualifiers, "
                                              "lever 2); its lab rows done so far (every row with --all).")
                      ] = DEFAULT_TAG,
) -> None:
    """Lever 1 on the lab subset: score each triple of the default's committed per-row file against the output it
    was extracted from, with the row's own scorer (what ``GraphEval(fidelity="drop")`` adds to a row's scorer
    pass); no extraction. Resumable: rows already in the fidelity file are skipped, claims already in the cache
    are not scored again."""
    import time

    from grapheval_plugins.exceptions import ScoringError
    from grapheval_plugins.inputs import normalize_output
    from grapheval_plugins.types import Triple

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    base = {r["id"]: r for r in bench.load_results(result_path(dataset, llm, scorer, prompt, "concat"))
            if not r.get("error")}
    outputs = {r["id"]: normalize_output(r["output"]) for r in bench.load_dataset(dataset)}
    ids = [i for i in lab_ids(dataset)[:limit] if i in base]
    if all_rows:
        ids += [r["id"] for r in dataset_rows(dataset, None, SUMMEVAL_SAMPLE_SEED) if r["id"] in base and r["id"] not in ids]
    judge = bench_scorer(scorer, cache, threads)
    t_all = time.perf_counter()
    with bench.ResultStore(fidelity_path(dataset, llm, scorer, prompt)) as store:
        todo = [i for i in ids if i not in store.done()]
        for n_done, rid in enumerate(todo, start=1):
            row = base[rid]
            claims = [Triple.from_list(t[:3]).sentence() for t in row["triples"]]
            misses = judge.misses
            t0 = time.perf_counter()
            try:
                scores = judge.check([(outputs[rid],)] * len(claims), claims) if claims else []
            except ScoringError as exc:  # recorded, and redone by the next run
                store.append({"id": rid, "dataset": dataset, "label": row["label"], "error": str(exc)})
                continue
            store.append(fidelity_row(row, scores, judge, time.perf_counter() - t0, judge.misses - misses))
            typer.echo(f"{dataset} {n_done}/{len(todo)} {rid}: {len(claims)} triple(s), "
                       f"{time.perf_counter() - t0:.1f} s", err=True)
    typer.echo(f"{fidelity_path(dataset, llm, scorer, prompt)}: {len(todo)} row(s) scored, {len(ids) - len(todo)} already "
               f"done, {time.perf_counter() - t_all:.0f} s")


def round_trip_needed(fid: dict[str, Any], threshold: float = 0.5) -> list[int]:
    """The triples of a fidelity row that ``GraphEval(fidelity="drop")`` scores against the output, replayed with the
    core's order (:func:`~grapheval_plugins.aggregate.fidelity_to_check`) on the committed scores."""
    from grapheval_plugins.aggregate import fidelity_to_check

    p_context = [t[3] for t in fid["triples"]]
    scored: dict[int, Optional[float]] = {}
    while todo := fidelity_to_check(p_context, scored, threshold):
        scored.update({i: fid["triples"][i][4] for i in todo})
    return sorted(scored)


def round_trip_row(fid: dict[str, Any], threshold: float = 0.5) -> dict[str, Any]:
    """The fidelity row as the engine sees it: only the triples it scores against the output carry that score
    (``None`` for the others, which it keeps)."""
    needed = set(round_trip_needed(fid, threshold))
    return {**fid, "triples": [[*t[:4], t[4] if i in needed else None] for i, t in enumerate(fid["triples"])]}


@app.command("fidelity-cost")
def fidelity_cost(
    llm: Annotated[str, typer.Option()] = LAB_LLM,
    scorer: Annotated[str, typer.Option()] = LAB_SCORER,
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "summeval,qags_c,qags_x",
) -> None:
    """How many triples the engine scores against their output (the round trip as far as the decision needs it)
    against scoring every triple, and a check that both decide every committed row alike (no model)."""
    weights = files_weights(llm, scorer, True)
    typer.echo("| set | rows | triples | scored against the output | fewer by | same P(hallucination) |")
    typer.echo("|---|---|---|---|---|---|")
    for name in datasets.split(","):
        default = {r["id"]: r for r in bench.load_results(result_path(name, llm, scorer, DEFAULT_TAG, "concat"))}
        fids = [r for r in bench.load_results(fidelity_path(name, llm, scorer)) if not r.get("error")]
        total = sum(len(f["triples"]) for f in fids)
        needed = sum(len(round_trip_needed(f)) for f in fids)
        same = sum(
            abs(weights.probability(*lab_scores(default[f["id"]], f))
                - weights.probability(*lab_scores(default[f["id"]], round_trip_row(f)))) < 1e-12
            for f in fids
        ) if weights is not None else 0
        typer.echo(f"| {name} | {len(fids)} | {total} | {needed} | {total / max(needed, 1):.2f}× | {same} of {len(fids)} |")


def kept_triples(fid: dict[str, Any]) -> list[list[Any]]:
    """The triples a fidelity row keeps (the core's rule, :func:`~grapheval_plugins.aggregate.faithful_to_output`)."""
    from grapheval_plugins.aggregate import faithful_to_output

    return [t for t in fid["triples"] if faithful_to_output(t[4])]


def lab_scores(row: dict[str, Any], fid: Optional[dict[str, Any]], soft: bool = False) -> tuple[float, list[float]]:
    """``(p_whole, p_claims)`` of a default per-row result, with only the triples the fidelity row keeps when
    ``fid`` is given; with no triple left, the whole output is the one claim (the engine's fallback).

    ``soft`` (a variant measured here only, not in the core): every triple kept, its P(unsupported) by the context
    down-weighted by the probability that its output supports it, ``p_context · (1 − p_output)``."""
    if fid is not None and soft:
        return row["p_raw"], [t[3] * (1.0 - t[4]) if t[4] is not None else t[3] for t in fid["triples"]] or [row["p_raw"]]
    triples = row["triples"] if fid is None else kept_triples(fid)
    return row["p_raw"], [t[3] for t in triples] or [row["p_raw"]]


def _lab_methods(name: str, sets: dict[str, list[tuple[dict, dict, dict]]]) -> list[tuple[str, str, list[float], float]]:
    """(key, label, P(hallucination) per row, threshold) of each method on set ``name``; everything fitted (hybrid
    weights, thresholds) is fitted on the other sets' rows (those reported)."""
    rows = sets[name]
    others = [t for other, ts in sets.items() if other != name for t in ts]
    fitted_on = "+".join(o for o in sets if o != name)

    def fit(use_fid: bool, soft: bool = False) -> Any:
        from grapheval_plugins.calibrate import fit_hybrid

        scores = [lab_scores(d, f if use_fid else None, soft) for _, d, f in others]
        return fit_hybrid([d["label"] for _, d, _ in others], [w for w, _ in scores], [max(c) for _, c in scores],
                          fitted_on=fitted_on)

    def thr(values: list[float]) -> float:
        return float(bench.fit_threshold([d["label"] for _, d, _ in others], values))

    raw = [d["p_raw"] for _, d, _ in rows]
    paper = [p["p_graph"] for p, _, _ in rows]
    triples = [max(lab_scores(d, None)[1]) for _, d, _ in rows]
    triples_fid = [max(lab_scores(d, f)[1]) for _, d, f in rows]
    w, w_fid, w_soft = fit(False), fit(True), fit(True, soft=True)
    hybrid = [w.probability(*lab_scores(d, None)) for _, d, _ in rows]
    hybrid_fid = [w_fid.probability(*lab_scores(d, f)) for _, d, f in rows]
    triples_soft = [max(lab_scores(d, f, soft=True)[1]) for _, d, f in rows]
    hybrid_soft = [w_soft.probability(*lab_scores(d, f, soft=True)) for _, d, f in rows]
    t_raw = thr([d["p_raw"] for _, d, _ in others])
    t_paper = thr([p["p_graph"] for p, _, _ in others])
    t_fid = thr([max(lab_scores(d, f)[1]) for _, d, f in others])
    return [
        ("raw", "raw (whole output), 0.5", raw, 0.5),
        ("raw-fitted", f"raw, threshold fitted elsewhere ({t_raw:.3f})", raw, t_raw),
        ("paper", "paper's rule over its triples, 0.5", paper, 0.5),
        ("paper-fitted", f"paper's rule, threshold fitted elsewhere ({t_paper:.3f})", paper, t_paper),
        ("triples", "triples only (the default's triples), 0.5", triples, 0.5),
        ("triples+fidelity", "**triples only + fidelity**, 0.5", triples_fid, 0.5),
        ("triples+fidelity-fitted", f"triples only + fidelity, threshold fitted elsewhere ({t_fid:.3f})",
         triples_fid, t_fid),
        ("hybrid", f"hybrid, weights fitted on {fitted_on} ({w.whole:.2f}·whole + {w.claims:.2f}·claims), 0.5",
         hybrid, 0.5),
        ("hybrid+fidelity", f"**hybrid + fidelity**, weights fitted on {fitted_on} ({w_fid.whole:.2f}·whole + "
         f"{w_fid.claims:.2f}·claims), 0.5", hybrid_fid, 0.5),
        ("triples+soft", "triples only, down-weighted by fidelity (not in the core), 0.5", triples_soft, 0.5),
        ("hybrid+soft", f"hybrid, down-weighted by fidelity (not in the core), weights fitted on {fitted_on}, 0.5",
         hybrid_soft, 0.5),
    ]


def alarm_capped_threshold(labels: list[int], scores: list[float], cap: float) -> float:
    """The threshold of the best balanced accuracy at which at most a ``cap`` share of the faithful rows (label 0)
    is flagged (``score > threshold``); of equal ones, the lowest.

    >>> alarm_capped_threshold([0, 0, 0, 0, 1], [0.1, 0.2, 0.3, 0.9, 0.8], 0.25)
    0.3
    >>> alarm_capped_threshold([0, 1, 0], [0.4, 0.9, 0.95], 0.0)
    0.95
    """
    from grapheval_plugins.calibrate import balanced_accuracy, rates

    best: tuple[float, float] | None = None
    for t in sorted({-math.inf, *scores}):
        predicted = [v > t for v in scores]
        if 1.0 - rates(labels, predicted)[1] > cap + 1e-12:
            continue
        ba = balanced_accuracy(labels, predicted)
        if best is None or ba > best[0] + 1e-12:
            best = (ba, t)
    return best[1] if best is not None else max(scores)


def operating_point_tables(sets: dict[str, list[tuple[dict, dict, dict]]], margin: float = 0.03) -> str:
    """Per set: raw at 0.5, and each of the default's scores (hybrid + fidelity, triples only + fidelity) at 0.5,
    at the threshold fitted on the other sets' rows for at most raw's false-alarm rate there plus ``margin``, and
    at the best threshold of the set itself under that cap (an upper bound no transferable threshold can pass)."""
    from grapheval_plugins.calibrate import balanced_accuracy, rates

    keys = {"hybrid+fidelity": "default (hybrid + fidelity)", "triples+fidelity": "triples only + fidelity"}
    methods = {name: {k: (s, t) for k, _, s, t in _lab_methods(name, sets)} for name in sets}
    labels = {name: [d["label"] for _, d, _ in rows] for name, rows in sets.items()}

    def alarms(y: list[int], scores: list[float], t: float) -> float:
        return 1.0 - rates(y, [v > t for v in scores])[1]

    lines = ["| set | score | threshold | BA | lift over raw | false alarms | raw's + "
             f"{100 * margin:.0f} |", "|---|---|---|---|---|---|---|"]
    weighted: dict[str, list[tuple[int, float]]] = {}
    for name in sets:
        y, raw = labels[name], methods[name]["raw"][0]
        ba_raw = balanced_accuracy(y, [v > 0.5 for v in raw])
        cap = alarms(y, raw, 0.5) + margin
        lines.append(f"| {name} | raw | 0.5 | {_fmt(100 * ba_raw)} | | {_fmt(100 * alarms(y, raw, 0.5))} % "
                     f"| {_fmt(100 * cap)} % |")
        others = [o for o in sets if o != name]
        oy = [v for o in others for v in labels[o]]
        oraw = [v for o in others for v in methods[o]["raw"][0]]
        ocap = alarms(oy, oraw, 0.5) + margin
        for key, what in keys.items():
            scores = methods[name][key][0]
            t_fit = alarm_capped_threshold(oy, [v for o in others for v in methods[o][key][0]], ocap)
            t_best = alarm_capped_threshold(y, scores, cap)
            for how, t in (("0.5", 0.5), (f"fitted elsewhere, capped ({t_fit:.3f})", t_fit),
                           (f"best on this set, capped ({t_best:.3f})", t_best)):
                ba = balanced_accuracy(y, [v > t for v in scores])
                weighted.setdefault(f"{what}, {how.split(' (')[0]}", []).append((len(y), ba - ba_raw))
                lines.append(f"| {name} | {what} | {how} | {_fmt(100 * ba)} | {100 * (ba - ba_raw):+.1f} "
                             f"| {_fmt(100 * alarms(y, scores, t))} % | |")
    lines.append("")
    for what, lifts in weighted.items():
        n = sum(size for size, _ in lifts)
        lines.append(f"- {what}: size-weighted lift over raw {100 * sum(size * d for size, d in lifts) / n:+.1f}")
    return "\n".join(lines) + "\n"


def _fidelity_rows(llm: str, scorer: str, names: list[str], order: Any
                   ) -> dict[str, list[tuple[dict, dict, dict]]]:
    """(paper's row, default's row, fidelity row) of each row id ``order(set)`` lists that all three files hold."""
    paper = {n: {r["id"]: r for r in rs} for n, rs in _load_sets(llm, scorer, PAPER_TAG, "concat", names).items()}
    default = {n: {r["id"]: r for r in rs} for n, rs in _load_sets(llm, scorer, DEFAULT_TAG, "concat", names).items()}
    sets: dict[str, list[tuple[dict, dict, dict]]] = {}
    for name in names:
        fid = {r["id"]: r for r in bench.load_results(fidelity_path(name, llm, scorer)) if not r.get("error")}
        ids = [i for i in order(name) if i in fid and i in paper.get(name, {}) and i in default.get(name, {})]
        if ids:
            sets[name] = [(paper[name][i], default[name][i], fid[i]) for i in ids]
    return sets


def _every_fidelity_row(llm: str, scorer: str, names: list[str]) -> dict[str, list[tuple[dict, dict, dict]]]:
    """:func:`_fidelity_rows` of every row, in each set's run order."""
    return _fidelity_rows(llm, scorer, names,
                          lambda name: [r["id"] for r in dataset_rows(name, None, SUMMEVAL_SAMPLE_SEED)])


def fidelity_stats(name: str, rows: list[tuple[dict, dict, dict]]) -> str:
    """What the fidelity pass drops on one set: triples and rows, split by label."""
    from grapheval_plugins.aggregate import faithful_to_output

    def count(label: int) -> tuple[int, int, int, int, int, int, int]:
        sel = [f for _, d, f in rows if d["label"] == label]
        total = sum(len(f["triples"]) for f in sel)
        dropped = sum(len(f["triples"]) - len(kept_triples(f)) for f in sel)
        some = sum(1 for f in sel if len(kept_triples(f)) < len(f["triples"]))
        every = sum(1 for f in sel if f["triples"] and not kept_triples(f))
        flagged = [t for f in sel for t in f["triples"] if t[3] > 0.5]  # unsupported by the context
        return (len(sel), total, dropped, some, every, len(flagged),
                sum(1 for t in flagged if not faithful_to_output(t[4])))

    cells = []
    for label, what in ((0, "faithful"), (1, "hallucinated")):
        n, total, dropped, some, every, flagged, flagged_dropped = count(label)
        cells.append(f"{what} rows: {dropped} of {total} triples dropped ({flagged_dropped} of the {flagged} the "
                     f"context does not support), {some} of {n} rows lose one or more, {every} lose all")
    unjudged = sum(1 for _, _, f in rows for t in f["triples"] if t[4] is None)
    seconds = [f["seconds"] for _, _, f in rows if f["claims_scored"]]
    mean_s = sum(seconds) / len(seconds) if seconds else math.nan
    return (f"{name}: " + "; ".join(cells) + f"; {unjudged} triple(s) without a verdict against the output (kept); "
            f"fidelity pass {_fmt(mean_s)} s/row ({len(seconds)} rows scored fresh)")


def lab_tables(sets: dict[str, list[tuple[dict, dict, dict]]], n_boot: int = 2000, seed: int = 0) -> str:
    """Per set, every method's BA, TPR/TNR and AUC; the size-weighted BA lifts at 0.5 (bootstrap intervals); then
    what the fidelity pass dropped."""
    lines: list[str] = []
    pairs: dict[str, list[Any]] = {"hybrid + fidelity over raw": [], "hybrid + fidelity over hybrid": [],
                                   "triples only + fidelity over raw": [], "hybrid over raw": []}
    for name, rows in sets.items():
        y = [d["label"] for _, d, _ in rows]
        lines += [f"**{name}** ({len(rows)} rows; {sum(y)} hallucinated)", "",
                  "| method | BA | TPR/TNR | AUC |", "|---|---|---|---|"]
        methods = _lab_methods(name, sets)
        for _, label, scores, t in methods:
            pred = [v > t for v in scores]
            tpr, tnr = bench.rates(y, pred)
            lines.append(f"| {label} | {_fmt(100 * bench.balanced_accuracy(y, pred))} | {tpr:.2f}/{tnr:.2f} "
                         f"| {_fmt(100 * bench.roc_auc(y, scores))} |")
        lines.append("")
        by = {key: scores for key, _, scores, _ in methods}
        raw, hyb, hyb_fid = by["raw"], by["hybrid"], by["hybrid+fidelity"]
        pairs["hybrid + fidelity over raw"].append(bench.LiftInput(name, y, raw, hyb_fid))
        pairs["hybrid + fidelity over hybrid"].append(bench.LiftInput(name, y, hyb, hyb_fid))
        pairs["triples only + fidelity over raw"].append(bench.LiftInput(name, y, raw, by["triples+fidelity"]))
        pairs["hybrid over raw"].append(bench.LiftInput(name, y, raw, hyb))
    for what, inputs in pairs.items():
        lift = bench.bootstrap_lift(inputs, n_boot=n_boot, seed=seed)
        lines.append(f"Size-weighted BA lift at 0.5, {what}: **{lift.lift:+.1f}** points (95 % CI {lift.ci_low:+.1f} "
                     f"… {lift.ci_high:+.1f}; {lift.n_boot} resamples, seed {lift.seed}).")
    lines.append("")
    lines += [fidelity_stats(name, rows) for name, rows in sets.items()]
    return "\n".join(lines) + "\n"


@app.command("operating-points")
def operating_points(
    llm: Annotated[str, typer.Option()] = LAB_LLM,
    scorer: Annotated[str, typer.Option()] = LAB_SCORER,
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "summeval,qags_c,qags_x",
    margin: Annotated[float, typer.Option(help="False alarms allowed above raw's (a share: 0.03 is 3 points).")] = 0.03,
) -> None:
    """The false-alarm goal against the lift goal, on every row of the fidelity files (no model): what balanced
    accuracy the default's scores reach when their false-alarm rate may exceed raw's by at most ``margin``, with a
    threshold fitted on the other sets and with the best threshold of the set itself."""
    sets = _every_fidelity_row(llm, scorer, datasets.split(","))
    typer.echo(f"LLM `{llm}`, judge `{scorer}`, every row of the fidelity files\n")
    typer.echo(operating_point_tables(sets, margin))


@app.command("lab-report")
def lab_report(
    llm: Annotated[str, typer.Option()] = LAB_LLM,
    scorer: Annotated[str, typer.Option()] = LAB_SCORER,
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "summeval,qags_c,qags_x",
    all_rows: Annotated[bool, typer.Option("--all", help="Every row the fidelity files hold, not only the lab "
                                                          "subset's.")] = False,
    n_boot: Annotated[int, typer.Option()] = 2000,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Lever 1's tables on the lab subset, from the committed per-row files only (paper's, default's, fidelity);
    a set is reported on the lab rows its fidelity file holds so far."""
    sets = _every_fidelity_row(llm, scorer, datasets.split(",")) if all_rows else _fidelity_rows(
        llm, scorer, datasets.split(","), lab_ids)
    if len(sets) < 2:
        typer.echo("need fidelity rows of two sets or more (weights are fitted on the other sets)", err=True)
        raise typer.Exit(1)
    rows = "every row of the fidelity files" if all_rows else f"lab subset {LAB_FILE.name} (seed {LAB_SEED})"
    typer.echo(f"LLM `{llm}`, judge `{scorer}`, {rows}\n")
    typer.echo(lab_tables(sets, n_boot=n_boot, seed=seed))


# ---------------------------------------------------------------------- lever 2: triples that keep the claim
def auc_standard_error(auc: float, n_pos: int, n_neg: int) -> float:
    """Hanley and McNeil's (1982) standard error of a ROC AUC from ``n_pos`` positives and ``n_neg`` negatives.

    >>> round(auc_standard_error(0.7, 20, 40), 3)
    0.075
    """
    q1, q2 = auc / (2 - auc), 2 * auc * auc / (1 + auc)
    var = (auc * (1 - auc) + (n_pos - 1) * (q1 - auc * auc) + (n_neg - 1) * (q2 - auc * auc)) / (n_pos * n_neg)
    return math.sqrt(max(var, 0.0))


def prompt_stats(rows: list[tuple[dict[str, Any], dict[str, Any]]]) -> dict[str, Any]:
    """One prompt's numbers on rows given as ``(per-row result, its fidelity row)``: triples per row, rows with no
    triple, the round-trip rate (share of the triples judged against their own output that it supports,
    P(unsupported) ≤ 0.5), and the triples-only decision (largest P over the triples; the whole output's score
    where none is left) with and without the fidelity drop: ROC AUC and false alarms on faithful rows at 0.5."""
    from grapheval_plugins.aggregate import faithful_to_output

    y = [d["label"] for d, _ in rows]
    judged = [t[4] for _, f in rows for t in f["triples"] if t[4] is not None]
    plain = [max(lab_scores(d, None)[1]) for d, _ in rows]
    kept = [max(lab_scores(d, f)[1]) for d, f in rows]
    faithful = [i for i, label in enumerate(y) if label == 0]

    def false_alarms(scores: list[float]) -> float:
        return sum(scores[i] > 0.5 for i in faithful) / max(len(faithful), 1)

    return {
        "rows": len(rows),
        "triples_per_row": sum(len(d["triples"]) for d, _ in rows) / max(len(rows), 1),
        "no_triple": sum(1 for d, _ in rows if not d["triples"]),
        "round_trip": sum(faithful_to_output(p) for p in judged) / max(len(judged), 1),
        "unjudged": sum(1 for _, f in rows for t in f["triples"] if t[4] is None),
        "auc_raw": bench.roc_auc(y, [d["p_raw"] for d, _ in rows]),
        "auc_triples": bench.roc_auc(y, plain),
        "auc_fidelity": bench.roc_auc(y, kept),
        "fa_raw": false_alarms([d["p_raw"] for d, _ in rows]),
        "fa_triples": false_alarms(plain),
        "fa_fidelity": false_alarms(kept),
        "scores": (y, plain, kept),
    }


def prompt_tables(sets: dict[str, dict[str, list[tuple[dict, dict]]]], n_boot: int = 2000, seed: int = 0,
                  against_raw: bool = False) -> str:
    """Per set, one line per prompt on the same rows, then the paired AUC difference of the triples-only decisions
    (second prompt minus first) with its 95 % bootstrap interval; with ``against_raw``, also each prompt's
    triples-only decisions minus its own file's raw (whole output) score, paired, on the same rows."""
    lines = ["| set | prompt | rows (hallucinated) | triples/row | rows with no triple | round trip | "
             "AUC raw | AUC triples | AUC triples + fidelity | false alarms raw / triples / + fidelity |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    notes = []
    for name, by_prompt in sets.items():
        stats = {tag: prompt_stats(rows) for tag, rows in by_prompt.items()}
        for tag, st in stats.items():
            y = st["scores"][0]
            lines.append(
                f"| {name} | {tag} | {st['rows']} ({sum(y)}) | {st['triples_per_row']:.2f} | {st['no_triple']} | "
                f"{100 * st['round_trip']:.0f} % ({st['unjudged']} unjudged) | {_fmt(100 * st['auc_raw'])} | "
                f"{_fmt(100 * st['auc_triples'])} | {_fmt(100 * st['auc_fidelity'])} | "
                f"{st['fa_raw']:.2f} / {st['fa_triples']:.2f} / {st['fa_fidelity']:.2f} |")
        (first, a), (second, b) = list(stats.items())[:2]
        y = a["scores"][0]
        se = auc_standard_error(b["auc_fidelity"], sum(y), len(y) - sum(y))
        for what, k in (("triples only", 1), ("triples only + fidelity", 2)):
            d, lo, hi = _auc_interval(y, b["scores"][k], a["scores"][k], n_boot, seed)
            d_, lo_, hi_ = (f"{v:+.1f}".replace("-", "−") for v in (d, lo, hi))
            notes.append(f"{name}, {what}: AUC {second} − {first} = {d_} points (95 % CI {lo_} … {hi_}, "
                         f"paired bootstrap, {n_boot} resamples, seed {seed}).")
        if against_raw:
            for tag, st in stats.items():
                y, raw = st["scores"][0], [d["p_raw"] for d, _ in by_prompt[tag]]
                for what, k in (("triples only", 1), ("triples only + fidelity", 2)):
                    d, lo, hi = _auc_interval(y, st["scores"][k], raw, n_boot, seed)
                    d_, lo_, hi_ = (f"{v:+.1f}".replace("-", "−") for v in (d, lo, hi))
                    notes.append(f"{name}, {tag}: AUC {what} − raw = {d_} points (95 % CI {lo_} … {hi_}, paired "
                                 f"bootstrap, {n_boot} resamples, seed {seed}).")
        notes.append(f"{name}: an AUC near {100 * b['auc_fidelity']:.0f} on these rows has a standard error of about "
                     f"{100 * se:.1f} points (Hanley–McNeil).")
    return "\n".join(lines) + "\n\n" + "\n".join(notes) + "\n"


@app.command("prompt-report")
def prompt_report(
    prompt: Annotated[str, typer.Option(help="Tag of the lever's per-row files.")] = "keep-qualifiers",
    base: Annotated[str, typer.Option(help="Tag of the per-row files it is compared with.")] = DEFAULT_TAG,
    llm: Annotated[str, typer.Option()] = LAB_LLM,
    scorer: Annotated[str, typer.Option()] = LAB_SCORER,
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "qags_x,summeval",
    all_rows: Annotated[bool, typer.Option("--all", help="Every row that both prompts' per-row and fidelity files "
                                                          "hold (the lab rows first, then the others in "
                                                          "the set's run order), not only the lab "
                                                          "subset's; adds each prompt's paired AUC difference "
                                                          "against raw.")] = False,
    n_boot: Annotated[int, typer.Option()] = 2000,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Lever 2's table: PROMPT's triples against BASE's on the same lab rows (those both prompts' per-row and
    fidelity files hold; every such row with --all), from the committed files only (no model)."""
    sets: dict[str, dict[str, list[tuple[dict, dict]]]] = {}
    used: dict[str, str] = {}
    for name in datasets.split(","):
        files = {}
        for tag in (base, prompt):
            rows = {r["id"]: r for r in bench.load_results(result_path(name, llm, scorer, tag, "concat"))
                    if not r.get("error")}
            fids = {r["id"]: r for r in bench.load_results(fidelity_path(name, llm, scorer, tag)) if not r.get("error")}
            files[tag] = (rows, fids)
        order = (lab_first(lab_ids(name), dataset_rows(name, None, SUMMEVAL_SAMPLE_SEED)) if all_rows
                 else lab_ids(name))
        ids = [i for i in order if all(i in rows and i in fids for rows, fids in files.values())]
        if ids:
            sets[name] = {tag: [(rows[i], fids[i]) for i in ids] for tag, (rows, fids) in files.items()}
            if all_rows:
                lab = set(lab_ids(name))
                used[name] = (f"{name}: {len(ids)} of the set's {len(order)} rows "
                              f"({sum(i in lab for i in ids)} lab rows, {sum(i not in lab for i in ids)} others)")
                typer.echo(f"{name}: {len(ids)} rows: {' '.join(ids)}\n", err=True)
            else:
                typer.echo(f"{name}: {len(ids)} lab rows: {' '.join(ids)}\n", err=True)
    if not sets:
        what = "row" if all_rows else "lab row"
        typer.echo(f"no {what} is in both prompts' per-row and fidelity files", err=True)
        raise typer.Exit(1)
    if all_rows:
        typer.echo(f"LLM `{llm}`, judge `{scorer}`, every row that both prompts' per-row and fidelity files hold: "
                   f"{prompt} against {base} on the same rows\n\nRows used: " + "; ".join(used.values()) + ".\n")
    else:
        typer.echo(f"LLM `{llm}`, judge `{scorer}`, lab subset {LAB_FILE.name}: {prompt} against {base} on the same "
                   f"rows\n")
    typer.echo(prompt_tables(sets, n_boot=n_boot, seed=seed, against_raw=all_rows))


# ------------------------------------------------------------------------------ lever 3: evidence per claim
EvidenceSample = tuple[dict[str, Any], dict[str, Any], Optional[dict[str, Any]]]
"""A row of lever 3's tables: the default's per-row result, its evidence row and its fidelity row."""

def evidence_path(dataset: str, llm: str, scorer: str, k: Optional[int]) -> Path:
    """Per-row file of the evidence lever: each triple of the default's per-row file scored against its ``k`` closest
    context sentences (``k`` None: against the whole context again, the timing baseline)."""
    what = f"k{k}" if k is not None else "whole"
    return RESULTS / f"evidence-{what}-{dataset}-{bench.slug(llm)}-{bench.slug(scorer)}-{DEFAULT_TAG}-concat.jsonl"


def evidence_premise(passages: tuple[str, ...], triple: Any, k: Optional[int]) -> tuple[tuple[str, ...], bool]:
    """``(premise, fell back)``: the ``k`` context sentences sharing the most content words with ``triple``
    (:func:`grapheval_plugins.text.closest_sentences`, over the passages joined), or the whole context (its
    passages) when no sentence shares a word with it, or when ``k`` is None.

    >>> from grapheval_plugins.types import Triple
    >>> ctx = ("Ann won gold in 2012. Bob lost. Rain fell.",)
    >>> evidence_premise(ctx, Triple(subject="Ann", relation="won", object="silver"), k=1)
    (('Ann won gold in 2012.',), False)
    >>> evidence_premise(ctx, Triple(subject="Zoe", relation="sang", object="jazz"), k=1)
    (('Ann won gold in 2012. Bob lost. Rain fell.',), True)
    """
    from grapheval_plugins.inputs import PASSAGE_SEPARATOR
    from grapheval_plugins.text import closest_sentences

    if k is None:
        return passages, False
    near = closest_sentences(PASSAGE_SEPARATOR.join(passages), triple, k)
    return ((near,), False) if near else (passages, True)


def evidence_row(row: dict[str, Any], premises: list[tuple[tuple[str, ...], bool]], scores: list[Any], scorer: Any,
                 k: Optional[int], seconds: float, scored: int) -> dict[str, Any]:
    """One evidence result row: each triple as ``[s, r, o, P(unsupported | whole context), P(unsupported |
    premise)]`` (``None`` where the judge gave no verdict), the indexes of the triples that fell back to the whole
    context, and each premise's length in words.

    >>> class J:
    ...     name, fingerprint = "judge:x", staticmethod(lambda: "f")
    >>> class S:
    ...     def __init__(self, p, error=None): self.p_unsupported, self.error = p, error
    >>> row = {"id": "a", "dataset": "d", "label": 1, "prompt": "p", "render": "concat",
    ...        "triples": [["Ann", "won", "gold", 0.2], ["Zoe", "sang", "jazz", 0.9]]}
    >>> out = evidence_row(row, [(("Ann won gold.",), False), (("Ann won gold. Bob lost.",), True)],
    ...                    [S(0.1234567), S(0.5, error="boom")], J(), 3, 1.23456, 2)
    >>> out["triples"], out["fallback"], out["premise_words"], out["unjudged"], out["seconds"]
    ([['Ann', 'won', 'gold', 0.2, 0.123457], ['Zoe', 'sang', 'jazz', 0.9, None]], [1], [3, 5], ['boom'], 1.235)
    """
    triples = [[*t[:4], None if sc.error is not None else round(sc.p_unsupported, 6)]
               for t, sc in zip(row["triples"], scores)]
    return {"id": row["id"], "dataset": row["dataset"], "label": row["label"], "scorer": scorer.name,
            "fingerprint": scorer.fingerprint(), "prompt": row["prompt"], "render": row["render"], "k": k,
            "triples": triples, "fallback": [i for i, (_, fell) in enumerate(premises) if fell],
            "premise_words": [sum(len(p.split()) for p in premise) for premise, _ in premises],
            "unjudged": [sc.error for sc in scores if sc.error is not None],
            "claims_scored": scored, "seconds": round(seconds, 3), "error": None}


@app.command()
def evidence(
    datasets: Annotated[Optional[list[str]], typer.Argument(help="summeval, qags_c, qags_x (default: all three).")] = None,
    k: Annotated[int, typer.Option(help="Context sentences per claim.")] = 3,
    whole: Annotated[bool, typer.Option(help="Score against the whole context instead (the timing baseline, same "
                                             "machine and threads); file evidence-whole-...")] = False,
    llm: Annotated[str, typer.Option()] = LAB_LLM,
    scorer: Annotated[str, typer.Option()] = LAB_SCORER,
    threads: Annotated[Optional[int], typer.Option(help="llama.cpp threads of a local judge.")] = 1,
    cache: Annotated[Path, typer.Option(help="Claim-score cache (SQLite).")] = SCORE_CACHE,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N lab rows of each set.")] = None,
    all_rows: Annotated[bool, typer.Option("--all", help="Every row of the default's per-row file: the lab rows "
                                                          "first, then the others in the set's run order.")] = False,
    out: Annotated[Optional[Path], typer.Option(help="Result file, one set only (default: benchmarks/results/"
                                                     "evidence-...): a timing re-run with a fresh --cache.")] = None,
) -> None:
    """Lever 3 on the lab subset: score each triple of the default's committed per-row file against only the K
    context sentences that share the most content words with it (the whole context when none shares one), with the
    row's own scorer; no extraction. Resumable: rows already in the file are skipped, claims already in the cache are
    not scored again."""
    import time

    from grapheval_plugins.exceptions import ScoringError
    from grapheval_plugins.inputs import normalize_passages
    from grapheval_plugins.types import Triple

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    judge = bench_scorer(scorer, cache, threads)
    size = None if whole else k
    datasets = datasets or ["summeval", "qags_c", "qags_x"]
    if out is not None and len(datasets) != 1:
        raise typer.BadParameter("--out takes one data set")
    for dataset in datasets:
        base = {r["id"]: r for r in bench.load_results(result_path(dataset, llm, scorer, DEFAULT_TAG, "concat"))
                if not r.get("error")}
        contexts = {r["id"]: normalize_passages(r["context"]) for r in bench.load_dataset(dataset)}
        ids = lab_ids(dataset)[:limit]
        if all_rows:
            ids += [r["id"] for r in dataset_rows(dataset, None, SUMMEVAL_SAMPLE_SEED)
                    if r["id"] in base and r["id"] not in ids]
        target = out or evidence_path(dataset, llm, scorer, size)
        t_all = time.perf_counter()
        with bench.ResultStore(target) as store:
            todo = [i for i in ids if i not in store.done()]
            for n_done, rid in enumerate(todo, start=1):
                row = base[rid]
                triples = [Triple.from_list(t[:3]) for t in row["triples"]]
                premises = [evidence_premise(contexts[rid], t, size) for t in triples]
                misses = judge.misses
                t0 = time.perf_counter()
                try:
                    scores = judge.check([p for p, _ in premises], [t.sentence() for t in triples]) if triples else []
                except ScoringError as exc:  # recorded, and redone by the next run
                    store.append({"id": rid, "dataset": dataset, "label": row["label"], "error": str(exc)})
                    continue
                seconds = time.perf_counter() - t0
                store.append(evidence_row(row, premises, scores, judge, size, seconds, judge.misses - misses))
                typer.echo(f"{dataset} {n_done}/{len(todo)} {rid}: {len(triples)} triple(s), "
                           f"{sum(f for _, f in premises)} fallback(s), {seconds:.1f} s", err=True)
        typer.echo(f"{target}: {len(todo)} row(s) scored, {len(ids) - len(todo)} already done, "
                   f"{time.perf_counter() - t_all:.0f} s")


def evidence_scores(row: dict[str, Any], ev: dict[str, Any], fid: Optional[dict[str, Any]],
                    use_evidence: bool) -> tuple[float, list[float]]:
    """``(p_whole, p_claims)`` of a default per-row result, each triple's P(unsupported) against its evidence
    premise (``use_evidence``; its whole-context P where the judge gave none) or against the whole context, with
    only the triples the fidelity row keeps when ``fid`` is given; with no triple left, the whole output is the one
    claim (the engine's fallback, as :func:`lab_scores`).

    >>> row = {"p_raw": 0.3, "triples": [["a", "b", "c", 0.9], ["d", "e", "f", 0.2]]}
    >>> ev = {"triples": [["a", "b", "c", 0.9, 0.1], ["d", "e", "f", 0.2, None]]}
    >>> evidence_scores(row, ev, None, True), evidence_scores(row, ev, None, False)
    ((0.3, [0.1, 0.2]), (0.3, [0.9, 0.2]))
    >>> fid = {"triples": [["a", "b", "c", 0.9, 0.8], ["d", "e", "f", 0.2, 0.9]]}
    >>> evidence_scores(row, ev, fid, True)
    (0.3, [0.3])
    """
    from grapheval_plugins.aggregate import faithful_to_output

    if len(ev["triples"]) != len(row["triples"]) or (fid is not None and len(fid["triples"]) != len(row["triples"])):
        raise ValueError(f"row {row.get('id')}: the evidence/fidelity rows do not hold the default row's triples")
    keep = [fid is None or faithful_to_output(f[4]) for f in (fid["triples"] if fid is not None else row["triples"])]
    p = [t[4] if use_evidence and t[4] is not None else t[3] for t in ev["triples"]]
    return row["p_raw"], [v for v, kept in zip(p, keep) if kept] or [row["p_raw"]]


def _evidence_methods(name: str, sets: dict[str, list[EvidenceSample]]
                      ) -> list[tuple[str, str, list[float]]]:
    """(key, label, P(hallucination) per row) of each method on set ``name``, all decided at 0.5; the hybrid weights
    are fitted on the other sets' rows (those reported), as :func:`_lab_methods`."""
    from grapheval_plugins.calibrate import fit_hybrid

    rows = sets[name]
    others = [t for other, ts in sets.items() if other != name for t in ts]
    fitted_on = "+".join(o for o in sets if o != name)
    out: list[tuple[str, str, list[float]]] = [("raw", "raw (whole output vs whole context)", [d["p_raw"] for d, _, _ in rows])]
    variants = [(False, False, "whole context"), (True, False, "**evidence**"), (False, True, "whole context + fidelity"),
                (True, True, "**evidence + fidelity**")]
    for use_ev, use_fid, what in variants:
        key = ("evidence" if use_ev else "context") + ("+fidelity" if use_fid else "")
        out.append((f"triples:{key}", f"triples only, {what}",
                    [max(evidence_scores(d, e, f if use_fid else None, use_ev)[1]) for d, e, f in rows]))
    for use_ev, use_fid, what in variants:
        key = ("evidence" if use_ev else "context") + ("+fidelity" if use_fid else "")
        train = [evidence_scores(d, e, f if use_fid else None, use_ev) for d, e, f in others]
        w = fit_hybrid([d["label"] for d, _, _ in others], [a for a, _ in train], [max(c) for _, c in train],
                       fitted_on=fitted_on)
        out.append((f"hybrid:{key}", f"hybrid, {what} ({w.whole:.2f}·whole + {w.claims:.2f}·claims)",
                    [w.probability(*evidence_scores(d, e, f if use_fid else None, use_ev)) for d, e, f in rows]))
    return out


def _auc_interval(y: list[int], a: list[float], b: Optional[list[float]], n_boot: int, seed: int
                  ) -> tuple[float, float, float]:
    """AUC of ``a`` (or of ``a`` minus that of ``b``, paired) with its 95 % bootstrap interval (rows resampled with
    replacement; resamples holding one label only are skipped)."""
    import numpy as np

    yy, aa = np.array(y), np.array(a)
    bb = np.array(b) if b is not None else None

    def stat(idx: Any) -> float:
        value = bench.roc_auc(yy[idx], aa[idx])
        return value - bench.roc_auc(yy[idx], bb[idx]) if bb is not None else value

    point = stat(np.arange(len(y)))
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(n_boot):
        idx = rng.integers(0, len(y), len(y))
        if 0 < yy[idx].sum() < len(idx):
            draws.append(stat(idx))
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return 100 * point, 100 * float(lo), 100 * float(hi)


def evidence_stats(name: str, rows: list[EvidenceSample], whole: dict[str, dict[str, Any]]) -> str:
    """Fallbacks, premise lengths, triple verdicts flipped at 0.5, and seconds per claim for both premises."""
    triples = [(d["label"], t) for d, e, _ in rows for t in e["triples"]]
    fell = sum(len(e["fallback"]) for _, e, _ in rows)
    unjudged = sum(1 for _, t in triples if t[4] is None)
    words = [w for _, e, _ in rows for w in e["premise_words"]]

    def flips(label: int, up: bool) -> int:
        return sum(1 for lab, t in triples if lab == label and t[4] is not None and (t[3] > 0.5) != (t[4] > 0.5)
                   and (t[4] > 0.5) == up)

    def per_claim(evs: list[dict[str, Any]]) -> str:
        fresh = [e for e in evs if e["claims_scored"] == len(e["triples"]) and e["claims_scored"]]
        n = sum(e["claims_scored"] for e in fresh)
        return (f"{sum(e['seconds'] for e in fresh) / n:.2f} s a claim ({n} claims, {len(fresh)} rows)" if n
                else "not measured")

    base = [whole[d["id"]] for d, _, _ in rows if d["id"] in whole]
    return (f"{name}: {len(triples)} triples, {fell} fell back to the whole context, {unjudged} without a verdict; "
            f"premise {sum(words) / max(len(words), 1):.0f} words on average; verdicts at 0.5 flipped to supported "
            f"{flips(0, False)} on faithful rows / {flips(1, False)} on hallucinated, to unsupported {flips(0, True)} / "
            f"{flips(1, True)}; evidence premise {per_claim([e for _, e, _ in rows])}"
            + (f"; on the rows `evidence --whole` scored: whole context {per_claim(base)}, evidence premise "
               f"{per_claim([e for d, e, _ in rows if d['id'] in whole])}" if base else ""))


def evidence_tables(sets: dict[str, list[EvidenceSample]], whole: dict[str, dict[str, dict[str, Any]]],
                    n_boot: int = 2000, seed: int = 0) -> str:
    """Per set, every method's ROC AUC (95 % bootstrap interval), BA, TPR and false-alarm rate at 0.5; the paired
    AUC differences that decide the lever; then the lever's statistics."""
    lines: list[str] = []
    summary: dict[str, list[str]] = {}
    for name, rows in sets.items():
        y = [d["label"] for d, _, _ in rows]
        for _, label, scores in _evidence_methods(name, sets):
            pred = [v > 0.5 for v in scores]
            summary.setdefault(re.sub(r" \(.*\)$", "", label), []).append(
                f"{100 * bench.roc_auc(y, scores):.1f} / {100 * bench.balanced_accuracy(y, pred):.1f} / "
                f"{1 - bench.rates(y, pred)[1]:.2f}")
    lines += ["**Summary**: AUC / BA at 0.5 / false-alarm rate at 0.5 (" + ", ".join(
        f"{name} {len(rows)} rows" for name, rows in sets.items()) + ")", "",
        "| method | " + " | ".join(sets) + " |", "|---|" + "---|" * len(sets)]
    lines += [f"| {label} | " + " | ".join(cells) + " |" for label, cells in summary.items()]
    lines.append("")
    for name, rows in sets.items():
        y = [d["label"] for d, _, _ in rows]
        lines += [f"**{name}** ({len(rows)} rows; {sum(y)} hallucinated; threshold 0.5)", "",
                  "| method | AUC (95 % CI) | BA | TPR | false alarms |", "|---|---|---|---|---|"]
        methods = _evidence_methods(name, sets)
        for _, label, scores in methods:
            pred = [v > 0.5 for v in scores]
            tpr, tnr = bench.rates(y, pred)
            auc, lo, hi = _auc_interval(y, scores, None, n_boot, seed)
            lines.append(f"| {label} | {auc:.1f} ({lo:.1f} … {hi:.1f}) | {_fmt(100 * bench.balanced_accuracy(y, pred))} "
                         f"| {tpr:.2f} | {1 - tnr:.2f} |")
        by = {key: scores for key, _, scores in methods}
        diffs = []
        for a, b in (("triples:evidence", "triples:context"), ("triples:evidence+fidelity", "triples:context+fidelity"),
                     ("triples:evidence", "raw"), ("triples:evidence+fidelity", "raw"),
                     ("hybrid:evidence+fidelity", "hybrid:context+fidelity")):
            d, lo, hi = _auc_interval(y, by[a], by[b], n_boot, seed)
            diffs.append(f"{a} − {b} {d:+.1f} ({lo:+.1f} … {hi:+.1f})")
        lines += ["", "Paired AUC differences (95 % CI, " + f"{n_boot} resamples, seed {seed}): " + "; ".join(diffs)
                  + ".", ""]
    lines += [evidence_stats(name, rows, whole.get(name, {})) for name, rows in sets.items()]
    return "\n".join(lines) + "\n"


def evidence_flips(sets: dict[str, list[EvidenceSample]], n: int, k: int) -> str:
    """Up to ``n`` triples per set whose verdict at 0.5 flipped, the largest changes first, with their premise."""
    from grapheval_plugins.inputs import normalize_passages
    from grapheval_plugins.types import Triple

    lines = []
    for name, rows in sets.items():
        contexts = {r["id"]: normalize_passages(r["context"]) for r in bench.load_dataset(name)}
        flipped = [(abs(t[4] - t[3]), d, t) for d, e, _ in rows for t in e["triples"]
                   if t[4] is not None and (t[3] > 0.5) != (t[4] > 0.5)]
        for _, d, t in sorted(flipped, key=lambda x: -x[0])[:n]:
            (premise, *_), fell = evidence_premise(contexts[d["id"]], Triple.from_list(t[:3]), k)
            lines.append(f"- {d['id']} (label {d['label']}) `{t[:3]}`: P {t[3]:.2f} → {t[4]:.2f}"
                         f"{' (fell back)' if fell else ''}; premise: {premise[:600]!r}")
    return "\n".join(lines) + "\n"


@app.command("evidence-report")
def evidence_report(
    k: Annotated[int, typer.Option(help="The evidence files' K.")] = 3,
    llm: Annotated[str, typer.Option()] = LAB_LLM,
    scorer: Annotated[str, typer.Option()] = LAB_SCORER,
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "summeval,qags_c,qags_x",
    all_rows: Annotated[bool, typer.Option("--all", help="Every row the evidence files hold, not only the lab "
                                                          "subset's.")] = False,
    flips: Annotated[int, typer.Option(help="Print N flipped triple verdicts per set, with their premise.")] = 0,
    n_boot: Annotated[int, typer.Option()] = 2000,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Lever 3's tables, from the committed per-row files only (default's, fidelity, evidence; no model); a set is
    reported on the rows its evidence file holds so far."""
    names = datasets.split(",")
    default = {n: {r["id"]: r for r in rs} for n, rs in _load_sets(llm, scorer, DEFAULT_TAG, "concat", names).items()}
    sets: dict[str, list[EvidenceSample]] = {}
    whole: dict[str, dict[str, dict[str, Any]]] = {}
    for name in names:
        ev = {r["id"]: r for r in bench.load_results(evidence_path(name, llm, scorer, k)) if not r.get("error")}
        fid = {r["id"]: r for r in bench.load_results(fidelity_path(name, llm, scorer)) if not r.get("error")}
        whole[name] = {r["id"]: r for r in bench.load_results(evidence_path(name, llm, scorer, None))
                       if not r.get("error")}
        order = [r["id"] for r in dataset_rows(name, None, SUMMEVAL_SAMPLE_SEED)] if all_rows else lab_ids(name)
        ids = [i for i in order if i in ev and i in fid and i in default.get(name, {})]
        if ids:
            sets[name] = [(default[name][i], ev[i], fid[i]) for i in ids]
    if len(sets) < 2:
        typer.echo("need evidence rows of two sets or more (hybrid weights are fitted on the other sets)", err=True)
        raise typer.Exit(1)
    rows = "every row of the evidence files" if all_rows else f"lab subset {LAB_FILE.name} (seed {LAB_SEED})"
    typer.echo(f"LLM `{llm}`, judge `{scorer}`, evidence k={k}, {rows}\n")
    typer.echo(evidence_tables(sets, whole, n_boot=n_boot, seed=seed))
    if flips:
        typer.echo(evidence_flips(sets, flips, k))


# ------------------------------------------------------------------ lever 4: triples grouped per output sentence
SENTENCE_FLAG = 0.5
"""A sentence counts as flagged (``sent-frac``) when every triple attributed to it has P(unsupported) above this."""

SENTENCE_AGGREGATES = ("sent-min", "sent-mean", "sent-frac")
"""Lever 4's row scores over the triples grouped per output sentence, fixed before any was computed:

* ``sent-min``: the largest, over the sentences, of the smallest P(unsupported) within a sentence (a sentence is
  unsupported only when all its triples are);
* ``sent-mean``: the largest, over the sentences, of the mean P(unsupported) within a sentence;
* ``sent-frac``: the share of the row's groups (sentences with a triple) whose triples are all above
  :data:`SENTENCE_FLAG`.

Each is taken over every triple and over the triples fidelity keeps; a triple sharing no content word with any output
sentence is a group of its own; a row with no triple (or none kept) is scored by its whole output, the engine's
fallback, as every triples-only row of :func:`lab_scores`."""


def output_sentences(output: str) -> list[str]:
    """The sentences of an output, split as :func:`grapheval_plugins.text.closest_sentences` splits a passage
    (after ``.``, ``!`` or ``?`` and whitespace, and at line breaks).

    >>> output_sentences("Ann won gold in 2012 . Bob lost!\\nRain fell")
    ['Ann won gold in 2012 .', 'Bob lost!', 'Rain fell']
    """
    from grapheval_plugins.text import sentence_spans

    return [output[start:end] for start, end in sentence_spans(output)]


def attribute_triples(sentences: list[str], triples: list[list[Any]]) -> list[Optional[int]]:
    """The index of the sentence each triple ``[s, r, o, …]`` is attributed to: the one sharing the most content
    words with it, weighted as :func:`grapheval_plugins.text.closest_sentences` weighs them (subject and object words
    twice, relation words once; stop words ignored, a crude plural trim); the first such sentence on a tie; ``None``
    when it shares no content word with any sentence.

    >>> s = ["Ann won gold in 2012.", "Bob lost to Ann."]
    >>> attribute_triples(s, [["Ann", "won", "gold"], ["Bob", "lost to", "Ann"], ["Zoe", "sang", "jazz"]])
    [0, 1, None]
    """
    from grapheval_plugins.text import _content_words

    found = [_content_words(sentence) for sentence in sentences]
    out: list[Optional[int]] = []
    for t in triples:
        anchor, relation = _content_words(t[0]) | _content_words(t[2]), _content_words(t[1])
        scores = [2 * len(f & anchor) + len(f & relation) for f in found]
        best = max(scores, default=0)
        out.append(scores.index(best) if best > 0 else None)
    return out


def sentence_groups(p: list[float], where: list[Optional[int]]) -> list[list[float]]:
    """The P(unsupported) of the triples grouped by the sentence they are attributed to (in sentence order), then
    each unattributed triple (``None``) as a group of its own.

    >>> sentence_groups([0.9, 0.2, 0.7, 0.4], [1, 0, 1, None])
    [[0.2], [0.9, 0.7], [0.4]]
    """
    groups: dict[int, list[float]] = {}
    for value, index in zip(p, where):
        if index is not None:
            groups.setdefault(index, []).append(value)
    return [groups[i] for i in sorted(groups)] + [[v] for v, i in zip(p, where) if i is None]


def sentence_score(groups: list[list[float]], how: str, fallback: float) -> float:
    """A row's score from its sentence groups (:data:`SENTENCE_AGGREGATES`); ``fallback`` (the whole output's P)
    when there is no group.

    >>> g = [[0.9, 0.2], [0.6, 0.8]]
    >>> [round(sentence_score(g, how, 0.1), 6) for how in SENTENCE_AGGREGATES]
    [0.6, 0.7, 0.5]
    >>> sentence_score([], "sent-min", 0.1)
    0.1
    """
    if not groups:
        return fallback
    if how == "sent-min":
        return max(min(g) for g in groups)
    if how == "sent-mean":
        return max(sum(g) / len(g) for g in groups)
    if how == "sent-frac":
        return sum(min(g) > SENTENCE_FLAG for g in groups) / len(groups)
    raise ValueError(f"unknown sentence aggregate {how!r}")


SentenceSample = tuple[dict[str, Any], dict[str, Any], dict[str, Any], list[str], list[Optional[int]]]
"""A row of lever 4's tables: the paper's and the default's per-row results, the fidelity row, the output's
sentences and each triple's sentence."""


def _sentence_methods(rows: list[SentenceSample]) -> dict[str, list[float]]:
    """Every score of lever 4's tables per row: the baselines (raw, the paper's rule, the largest P over the
    default's triples with and without fidelity), a control (their mean, no grouping) and each candidate."""
    from grapheval_plugins.aggregate import faithful_to_output

    out: dict[str, list[float]] = {"raw": [d["p_raw"] for _, d, _, _, _ in rows],
                                   "paper": [p["p_graph"] for p, _, _, _, _ in rows]}
    for use_fid in (False, True):
        suffix = "+fidelity" if use_fid else ""
        out[f"max{suffix}"] = [max(lab_scores(d, f if use_fid else None)[1]) for _, d, f, _, _ in rows]
        claims = [lab_scores(d, f if use_fid else None)[1] for _, d, f, _, _ in rows]
        out[f"mean{suffix}"] = [sum(c) / len(c) for c in claims]  # a control: the mean with no grouping
        for how in SENTENCE_AGGREGATES:
            values = []
            for _, d, f, _, where in rows:
                keep = [not use_fid or faithful_to_output(t[4]) for t in f["triples"]]
                p = [t[3] for t, k in zip(d["triples"], keep) if k]
                w = [i for i, k in zip(where, keep) if k]
                values.append(sentence_score(sentence_groups(p, w), how, d["p_raw"]))
            out[f"{how}{suffix}"] = values
    return out


SENTENCE_LABELS = {
    "raw": "raw (whole output)",
    "paper": "paper's rule (largest P over the paper run's triples)",
    "max": "largest P over the default's triples",
    "max+fidelity": "largest P over the default's triples + fidelity",
    "mean": "mean P over the default's triples (a control, not a candidate: no grouping)",
    "mean+fidelity": "mean P over the default's triples + fidelity (the same control)",
    **{f"{how}{suffix}": f"**{how}**{' + fidelity' if suffix else ''}" for how in SENTENCE_AGGREGATES
       for suffix in ("", "+fidelity")},
}
CANDIDATES = [f"{how}{suffix}" for how in SENTENCE_AGGREGATES for suffix in ("", "+fidelity")]


def coverage_stats(name: str, rows: list[SentenceSample]) -> str:
    """Output sentences with no triple (every triple; the kept ones), unattributed triples, and the hallucination
    rate of rows with an uncovered sentence against fully covered rows."""
    from grapheval_plugins.aggregate import faithful_to_output

    parts = []
    n_sent = sum(len(s) for _, _, _, s, _ in rows)
    n_triples = sum(len(w) for *_, w in rows)
    unattributed = sum(i is None for *_, w in rows for i in w)
    for use_fid in (False, True):
        uncovered_rows, covered_rows, uncovered_sentences = [], [], 0
        for _, d, f, sentences, where in rows:
            kept = {i for i, t in zip(where, f["triples"]) if i is not None and (not use_fid or faithful_to_output(t[4]))}
            missing = len(sentences) - len(kept)
            uncovered_sentences += missing
            (uncovered_rows if missing else covered_rows).append(d["label"])

        def rate(labels: list[int]) -> str:
            return f"{sum(labels)}/{len(labels)} hallucinated ({100 * sum(labels) / len(labels):.0f} %)" if labels else "none"

        parts.append(f"{'kept triples (fidelity)' if use_fid else 'every triple'}: {uncovered_sentences} of {n_sent} "
                     f"output sentences ({100 * uncovered_sentences / max(n_sent, 1):.1f} %) have none; rows with an "
                     f"uncovered sentence {rate(uncovered_rows)}, fully covered rows {rate(covered_rows)}")
    return (f"{name}: {len(rows)} rows, {n_sent / len(rows):.2f} sentences a row, {n_triples} triples "
            f"({unattributed} share no content word with any output sentence); " + "; ".join(parts))


def sentence_tables(sets: dict[str, list[SentenceSample]], n_boot: int = 2000, seed: int = 0) -> str:
    """Lever 4's tables: per set every score's AUC (95 % bootstrap interval); paired AUC differences of each candidate
    against raw and against the largest P over the same triples; the leave-one-set-out choice (the candidate with
    the best mean AUC over the two other sets) with its AUC, and TPR / false-alarm rate at a threshold fitted on the
    other sets (also for raw and the largest P + fidelity); then the coverage figures."""
    scores = {name: _sentence_methods(rows) for name, rows in sets.items()}
    labels = {name: [d["label"] for _, d, _, _, _ in rows] for name, rows in sets.items()}
    auc = {name: {key: 100 * bench.roc_auc(labels[name], v) for key, v in by.items()} for name, by in scores.items()}
    lines = [f"**ROC AUC (95 % CI)** ({n_boot} resamples of rows, seed {seed}; "
             + ", ".join(f"{n} {len(r)} rows, {sum(labels[n])} hallucinated" for n, r in sets.items()) + ")", "",
             "| score | " + " | ".join(sets) + " |", "|---|" + "---|" * len(sets)]
    for key, label in SENTENCE_LABELS.items():
        cells = []
        for name in sets:
            a, lo, hi = _auc_interval(labels[name], scores[name][key], None, n_boot, seed)
            cells.append(f"{a:.1f} ({lo:.1f} … {hi:.1f})")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    lines += ["", "**Paired AUC differences (95 % CI)**: each candidate − raw; − the largest P over the same triples "
              "(with fidelity for the + fidelity candidates)", "",
              "| candidate | " + " | ".join(f"{n} − raw | {n} − max" for n in sets) + " |",
              "|---|" + "---|---|" * len(sets)]
    for key in CANDIDATES:
        base = "max+fidelity" if key.endswith("+fidelity") else "max"
        cells = []
        for name in sets:
            for other in ("raw", base):
                d, lo, hi = _auc_interval(labels[name], scores[name][key], scores[name][other], n_boot, seed)
                cells.append(f"{d:+.1f} ({lo:+.1f} … {hi:+.1f})")
        lines.append(f"| {SENTENCE_LABELS[key]} | " + " | ".join(cells) + " |")
    controls = []
    for suffix in ("", "+fidelity"):
        for name in sets:
            d, lo, hi = _auc_interval(labels[name], scores[name][f"sent-mean{suffix}"], scores[name][f"mean{suffix}"],
                                      n_boot, seed)
            controls.append(f"{name}{' + fidelity' if suffix else ''} {d:+.1f} ({lo:+.1f} … {hi:+.1f})")
    lines += ["", "Grouping against no grouping, sent-mean − the mean over the same triples (95 % CI): "
              + "; ".join(controls) + "."]
    lines += ["", "**Leave one set out**: the candidate with the best mean AUC on the two other sets, reported on the "
              "third; thresholds fitted (best balanced accuracy) on the two other sets' rows pooled", "",
              "| held-out set | chosen (mean AUC on the others) | AUC | − raw (95 % CI) | − max + fidelity (95 % CI) "
              "| TPR / false alarms, chosen | raw | max + fidelity |", "|---|---|---|---|---|---|---|---|"]
    for name in sets:
        others = [o for o in sets if o != name]
        chosen = max(CANDIDATES, key=lambda k: (sum(auc[o][k] for o in others) / len(others), -CANDIDATES.index(k)))
        mean_other = sum(auc[o][chosen] for o in others) / len(others)
        y = labels[name]
        diffs = []
        for base in ("raw", "max+fidelity"):
            d, lo, hi = _auc_interval(y, scores[name][chosen], scores[name][base], n_boot, seed)
            diffs.append(f"{d:+.1f} ({lo:+.1f} … {hi:+.1f})")
        rates = []
        for key in (chosen, "raw", "max+fidelity"):
            t = bench.fit_threshold([v for o in others for v in labels[o]], [v for o in others for v in scores[o][key]])
            tpr, tnr = bench.rates(y, [v > t for v in scores[name][key]])
            rates.append(f"{tpr:.2f} / {1 - tnr:.2f} (t {t:.3f})")
        lines.append(f"| {name} | {SENTENCE_LABELS[chosen]} ({mean_other:.1f}) | {auc[name][chosen]:.1f} | "
                     + " | ".join(diffs) + " | " + " | ".join(rates) + " |")
    lines += ["", "**Coverage**", ""] + [f"- {coverage_stats(name, rows)}" for name, rows in sets.items()]
    return "\n".join(lines) + "\n"


@app.command("sentence-report")
def sentence_report(
    llm: Annotated[str, typer.Option()] = LAB_LLM,
    scorer: Annotated[str, typer.Option()] = LAB_SCORER,
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "summeval,qags_c,qags_x",
    n_boot: Annotated[int, typer.Option()] = 2000,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Lever 4, triples grouped per output sentence: every row that the paper's, the default's and the fidelity
    per-row files all hold, re-decided from the committed scores (no model)."""
    from grapheval_plugins.inputs import normalize_output

    names = datasets.split(",")
    paper = {n: {r["id"]: r for r in rs} for n, rs in _load_sets(llm, scorer, PAPER_TAG, "concat", names).items()}
    default = {n: {r["id"]: r for r in rs} for n, rs in _load_sets(llm, scorer, DEFAULT_TAG, "concat", names).items()}
    sets: dict[str, list[SentenceSample]] = {}
    for name in names:
        fid = {r["id"]: r for r in bench.load_results(fidelity_path(name, llm, scorer)) if not r.get("error")}
        outputs = {r["id"]: normalize_output(r["output"]) for r in bench.load_dataset(name)}
        order = [r["id"] for r in dataset_rows(name, None, SUMMEVAL_SAMPLE_SEED)]
        rows = []
        for i in order:
            if i in fid and i in paper.get(name, {}) and i in default.get(name, {}):
                d, f = default[name][i], fid[i]
                if [t[:4] for t in f["triples"]] != [t[:4] for t in d["triples"]]:
                    raise ValueError(f"{i}: the fidelity row does not hold the default row's triples")
                sentences = output_sentences(outputs[i])
                rows.append((paper[name][i], d, f, sentences, attribute_triples(sentences, d["triples"])))
        if rows:
            sets[name] = rows
    if len(sets) < 3:
        typer.echo("need rows of three sets (a choice is made on two sets and reported on the third)", err=True)
        raise typer.Exit(1)
    typer.echo(f"LLM `{llm}`, judge `{scorer}`, every row of the fidelity files\n")
    typer.echo(sentence_tables(sets, n_boot=n_boot, seed=seed))


if __name__ == "__main__":
    app()
