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

Per-row files: ``benchmarks/results/detect-<dataset>-<llm>-<scorer>-<prompt>-<render>.jsonl``.
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
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from grapheval_plugins.cache import CachedKG
from grapheval_plugins.extract.parser import parse_triples
from grapheval_plugins.extract.prompts import KG_PROMPT, KG_PROMPT_PAPER

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the harness beside this script
import harness as bench  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CACHE = HERE / ".cache"
PROMPTS = {"examples-first": KG_PROMPT, "paper-order": KG_PROMPT_PAPER}
SUMMEVAL_SAMPLE_SEED = 0
RUN_ORDER_SEED = 0
SPLIT_SEED = 0

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
    prompt: Annotated[str, typer.Option(help="examples-first (default) or paper-order.")] = "examples-first",
    render: Annotated[str, typer.Option(help="concat (paper) or sentence.")] = "concat",
    sample: Annotated[Optional[int], typer.Option(help="Stratified sample of N rows (fixed seed).")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the stratified sample.")] = SUMMEVAL_SAMPLE_SEED,
    limit: Annotated[Optional[int], typer.Option(help="Only the first N rows (after sampling/ordering).")] = None,
    reverse: Annotated[bool, typer.Option(help="Walk the run order from its end (a second process, with --out, "
                                               "works toward the first one; then `merge`).")] = False,
    kg_only: Annotated[bool, typer.Option(help="Take every KG from the committed file; never call the LLM.")] = False,
    pairs: Annotated[bool, typer.Option(help="Lever: re-read the committed answers accepting [subject, predicate] "
                                              "pairs; scores only rows of the base run; no LLM call.")] = False,
    out: Annotated[Optional[Path], typer.Option(help="Result file (default: benchmarks/results/detect-...).")] = None,
) -> None:
    """Score DATASET raw and with GraphEval; resumable (ids already in the result file are skipped)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if prompt not in PROMPTS:
        raise typer.BadParameter(f"prompt must be one of {sorted(PROMPTS)}")
    name = Path(dataset).stem if Path(dataset).suffix else dataset
    rows = dataset_rows(dataset, sample, seed)
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
        rows, target, dataset=name, llm=chat, scorer=scorer, kg_cache=CACHE / f"kg-{bench.slug(llm)}.sqlite",
        kg_file=kg_path(llm), prompt=kg_prompt, render=render,
    )
    typer.echo(
        f"{target}: {summary.done} scored, {summary.skipped} already done, {summary.errors} errors, "
        f"{summary.llm_calls} LLM calls, {summary.seconds:.0f} s"
    )
    if summary.error_ids:
        typer.echo(f"errored ids (redone on the next run): {summary.error_ids[:20]}")


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


# ----------------------------------------------------------------- the shipped decision rule (method="hybrid")
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
    """Per data set: raw, the paper's procedure and the shipped default (weights fitted on the other sets)."""
    from grapheval_plugins.aggregate import hybrid_weights

    shipped = hybrid_weights(next(iter(default.values()))[0]["scorer"])
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
        if shipped is not None:
            methods.append(("hybrid, shipped weights (fitted on all three sets: in-sample), 0.5",
                            [hybrid_score(r, shipped) for r in rows], 0.5, rows))
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
    """The shipped default (``method="hybrid"``) against raw and the paper's procedure, from the per-row files."""
    names = datasets.split(",")
    paper = _load_sets(llm, scorer, PAPER_TAG, "concat", names)
    default = _load_sets(llm, scorer, DEFAULT_TAG, "concat", names)
    if not default:
        typer.echo("no result rows found", err=True)
        raise typer.Exit(1)
    typer.echo(hybrid_tables(paper, default, n_boot=n_boot, seed=seed))


@app.command("fit-hybrid")
def fit_hybrid_command(
    llm: Annotated[str, typer.Option()] = "local:qwen2.5-coder-1.5b",
    scorer: Annotated[str, typer.Option()] = "judge:local:qwen2.5-coder-1.5b",
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = "summeval,qags_c,qags_x",
) -> None:
    """Fit the hybrid rule's weights on all rows of these sets; prints the entry for ``HYBRID_WEIGHTS``."""
    default = _load_sets(llm, scorer, DEFAULT_TAG, "concat", datasets.split(","))
    rows = [r for rs in default.values() for r in rs]
    w = fit_weights(rows, f"{'+'.join(default)} ({len(rows)} rows, {DEFAULT_TAG} per-row files): "
                          f"benchmarks/detection.py fit-hybrid --llm {llm} --scorer {scorer}")
    typer.echo(f'"{scorer}": HybridWeights(\n    whole={w.whole:.4f}, claims={w.claims:.4f}, bias={w.bias:.4f},\n'
               f'    fitted_on="{w.fitted_on}",\n),')


@app.command("live-default")
def live_default(
    dataset: Annotated[str, typer.Argument(help="summeval, qags_c or qags_x.")],
    llm: Annotated[str, typer.Option()] = "local:qwen2.5-coder-1.5b",
    scorer: Annotated[str, typer.Option()] = "judge:local:qwen2.5-coder-1.5b",
    n: Annotated[int, typer.Option("-n", help="Rows, drawn at random (seeded) from the per-row file.")] = 6,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """Run the shipped ``GraphEval()`` itself on a few rows, from the committed knowledge graphs (no LLM call), and
    compare its P(hallucination) with the one the tables derive from the per-row files."""
    from grapheval_plugins import GraphEval
    from grapheval_plugins.aggregate import hybrid_weights
    from grapheval_plugins.cache import MemoryKGCache

    rows = {r["id"]: r for r in bench.load_results(result_path(dataset, llm, scorer, DEFAULT_TAG, "concat"))
            if not r.get("error")}
    data = {r["id"]: r for r in bench.load_dataset(dataset)}
    ids = sorted(rows)
    random.Random(seed).shuffle(ids)
    cache = MemoryKGCache()
    llm_id = _kg_llm_id(llm)
    for e in bench.read_jsonl(kg_path(llm)):
        if e["llm"] == llm_id and e["prompt"] == KG_PROMPT.version + "+pairs":
            cache.set(llm_id, KG_PROMPT.cache_id, e["text"], CachedKG(triples=e["triples"], raw_text=e.get("raw_text")))
    engine = GraphEval(llm=bench.cache_only_chat_model(llm_id), scorer=scorer, cache=cache)
    weights = hybrid_weights(scorer)
    typer.echo("| id | label | derived P | live P | difference | same verdict at 0.5 | claims |\n|---|---|---|---|---|---|---|")
    for rid in ids[:n]:
        report = engine.evaluate(data[rid]["context"], data[rid]["output"], id=rid)
        derived = hybrid_score(rows[rid], weights)
        live = 1.0 - report.score if report.score is not None else math.nan
        typer.echo(f"| {rid} | {rows[rid]['label']} | {derived:.3f} | {live:.3f} | {abs(live - derived):.3f} "
                   f"| {(live > 0.5) == (derived > 0.5)} | {len(report.claims)} + whole |")


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


if __name__ == "__main__":
    app()
