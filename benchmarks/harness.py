"""The benchmark harness: hallucination detection in the paper's Table 2 design, resumable, with its metrics.

Research code beside the scripts of ``benchmarks/`` (not part of the installed package); the scripts import it as
``harness`` (their folder is on ``sys.path`` when they run). The metrics users need (balanced accuracy, ROC AUC,
threshold fitting) live in :mod:`grapheval_plugins.calibrate` and are re-exported here; the result files are
:class:`grapheval_plugins.jsonl.JsonlStore` files.

For a scorer S and a chat model L, every labelled row ``{"id", "context", "output", "label"}`` (label 1 =
hallucination) is checked twice: by S alone on the whole output (``mode="raw"``, the paper's baseline) and by
S + GraphEval (``mode="graph"``). One JSON line per row records both P(unsupported) scores and the scored triples,
so every figure can be recomputed from the committed files without any model.

* :func:`run_detection` — resumable and append-only: rows whose id is already in the output file are skipped, each
  row is written (and flushed) as soon as it is done, a torn last line or an errored row is dropped and redone.
  Extracted knowledge graphs go to an on-disk cache keyed by (LLM id, prompt version, output text) and are
  exported to a small JSONL file (:func:`export_kg`) that :func:`seed_kg_cache` loads back, so a re-run or a new
  scorer costs no LLM call.
* Metrics: :func:`balanced_accuracy`, :func:`roc_auc`, :func:`fit_threshold` (fitted on one data set, applied to
  another; from :mod:`grapheval_plugins.calibrate`), :func:`bootstrap_lift` (size-weighted lift of balanced
  accuracy with a seeded bootstrap interval).

>>> balanced_accuracy([1, 1, 0, 0], [True, False, False, False])
0.75
>>> roc_auc([1, 1, 0, 0], [0.9, 0.4, 0.3, 0.1])
1.0
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grapheval_plugins._async import run_sync
from grapheval_plugins._imports import require
from grapheval_plugins.aggregate import (
    PAPER,
    HybridWeights,
    RuleLike,
    fitted_weights,
    get_rule,
    rule_argument,
)
from grapheval_plugins.cache import CachedKG, KGCache, SQLiteKGCache
from grapheval_plugins.calibrate import balanced_accuracy, fit_threshold, rates, roc_auc
from grapheval_plugins.exceptions import InputError
from grapheval_plugins.extract.extractor import describe_llm
from grapheval_plugins.extract.prompts import KG_PROMPT, KGPrompt
from grapheval_plugins.jsonl import JsonlStore, numbered_rows
from grapheval_plugins.types import ClaimCheck, Extraction, Report, Triple

__all__ = [
    "DATASETS",
    "RENDERERS",
    "LiftInput",
    "LiftResult",
    "ResultStore",
    "RunSummary",
    "balanced_accuracy",
    "bootstrap_lift",
    "cache_only_chat_model",
    "cpu_model",
    "default_data_dir",
    "export_kg",
    "sample_rows",
    "write_lock",
    "fit_threshold",
    "load_dataset",
    "load_results",
    "merge_results",
    "rates",
    "report_from_detection_row",
    "roc_auc",
    "run_detection",
    "seed_kg_cache",
    "slug",
    "stratified_sample",
]

logger = logging.getLogger(__name__)

DATASETS: tuple[str, ...] = ("summeval", "qags_c", "qags_x")
"""The paper's three benchmarks, as files ``<name>.jsonl`` in the data folder."""


# --------------------------------------------------------------------------------------------- data
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``; the platform's processor string elsewhere), for benchmark records."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def default_data_dir() -> Path:
    """Where the benchmark files are: ``$GRAPHEVAL_BENCH_DATA``, else ``shared/data/benchmarks`` beside the
    repository (``../shared``) or inside it, found from this file's place in the repository."""
    env = os.environ.get("GRAPHEVAL_BENCH_DATA")
    if env:
        return Path(env)
    root = Path(__file__).resolve().parent.parent
    for candidate in (root.parent / "shared" / "data" / "benchmarks", root / "shared" / "data" / "benchmarks"):
        if candidate.is_dir():
            return candidate
    return root.parent / "shared" / "data" / "benchmarks"


def load_dataset(name_or_path: str | Path, data_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """Rows of a benchmark file: a name of :data:`DATASETS` or a path to a JSONL file.

    Every row must have ``id``, ``context``, ``output`` and ``label`` (0 or 1).

    Raises:
        InputError: the file is missing or a row is malformed (the message names the line).
    """
    path = Path(name_or_path)
    if not path.suffix:
        path = Path(data_dir) if data_dir is not None else default_data_dir()
        path = path / f"{name_or_path}.jsonl"
    if not path.is_file():
        raise InputError("dataset", f"no such file: {path}")
    rows: list[dict[str, Any]] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"{path.name}:{number}", f"invalid JSON: {exc.msg}") from exc
            missing = [k for k in ("id", "context", "output", "label") if k not in row]
            if missing:
                raise InputError(f"{path.name}:{number}", f"missing field(s) {missing}")
            if row["label"] not in (0, 1):
                raise InputError(f"{path.name}:{number}", f"label must be 0 or 1, got {row['label']!r}")
            row["id"] = str(row["id"])
            if row["id"] in seen:
                raise InputError(f"{path.name}:{number}", f"duplicate id {row['id']!r}")
            seen.add(row["id"])
            rows.append(row)
    return rows



def sample_rows(dataset: str, rows: int, seed: int) -> list[dict[str, Any]]:
    """``rows`` rows of ``dataset`` drawn with ``random.Random(seed).sample`` from its ids, kept in file order (the
    draw of the timing benchmarks: ``bench_row_cost.py``, ``bench_prefix_slots.py``, ``bench_loop_stop.py``)."""
    import random

    data = load_dataset(dataset)
    picked = set(random.Random(seed).sample([r["id"] for r in data], rows))
    return [r for r in data if r["id"] in picked]

def stratified_sample(rows: Sequence[Mapping[str, Any]], n: int, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` rows drawn without replacement, stratified by label (each label keeps its share, rounded), with a
    fixed seed; returned in their original order.

    >>> rows = [{"id": str(i), "label": int(i < 20)} for i in range(100)]
    >>> sample = stratified_sample(rows, 10, seed=0)
    >>> len(sample), sum(r["label"] for r in sample)
    (10, 2)
    """
    if n >= len(rows):
        return [dict(r) for r in rows]
    rng = random.Random(seed)
    by_label: dict[int, list[int]] = {}
    for i, row in enumerate(rows):
        by_label.setdefault(int(row["label"]), []).append(i)
    labels = sorted(by_label)
    quotas = {lab: round(n * len(by_label[lab]) / len(rows)) for lab in labels}
    # Fix rounding so the quotas add up to n (adjust the largest stratum).
    largest = max(labels, key=lambda lab: len(by_label[lab]))
    quotas[largest] += n - sum(quotas.values())
    chosen: list[int] = []
    for lab in labels:
        chosen += rng.sample(by_label[lab], quotas[lab])
    return [dict(rows[i]) for i in sorted(chosen)]


def slug(text: str) -> str:
    """A file-name friendly form of a model spec.

    >>> slug("judge:local:qwen2.5-coder-0.5b")
    'judge-local-qwen2.5-coder-0.5b'
    """
    return re.sub(r"[^A-Za-z0-9.]+", "-", text).strip("-").lower()


# --------------------------------------------------------------------------------------------- metrics
def _numpy():  # type: ignore[no-untyped-def]
    return require("numpy", "dev", "benchmark metrics")


def _arrays(labels: Sequence[int], values: Sequence[Any]):  # type: ignore[no-untyped-def]
    np = _numpy()

    y = np.asarray(labels, dtype=int)
    v = np.asarray(values, dtype=float)
    if y.shape != v.shape or y.ndim != 1:
        raise ValueError("labels and values must be 1-d sequences of the same length")
    return y, v


@dataclass(frozen=True)
class LiftResult:
    """Size-weighted lift of balanced accuracy (graph − raw), in points, with a bootstrap interval."""

    lift: float
    se: float
    ci_low: float
    ci_high: float
    per_dataset: dict[str, float]
    n_boot: int
    seed: int


@dataclass(frozen=True)
class LiftInput:
    """One data set's rows for :func:`bootstrap_lift`: labels, both scores, and each score's threshold."""

    name: str
    labels: Sequence[int]
    raw: Sequence[float]
    graph: Sequence[float]
    raw_threshold: float = 0.5
    graph_threshold: float = 0.5


def _ba_points(y, raw, graph, t_raw, t_graph):  # type: ignore[no-untyped-def]
    return 100 * balanced_accuracy(y, raw > t_raw), 100 * balanced_accuracy(y, graph > t_graph)


def bootstrap_lift(sets: Sequence[LiftInput], n_boot: int = 2000, seed: int = 0) -> LiftResult:
    """Size-weighted mean over data sets of BA(graph) − BA(raw), in balanced-accuracy points.

    The interval resamples rows with replacement within each data set (thresholds held fixed), ``n_boot`` times
    with a seeded generator; ``se`` is the standard deviation of the replicates, the interval their 2.5 and 97.5
    percentiles.

    >>> r = bootstrap_lift([LiftInput("a", [1, 0, 1, 0], [0.9, 0.8, 0.2, 0.1], [0.9, 0.1, 0.8, 0.2])], n_boot=200)
    >>> r.lift
    50.0
    """
    np = _numpy()

    if not sets:
        raise ValueError("no data sets")
    data = []
    for s in sets:
        y, raw = _arrays(s.labels, s.raw)
        _, graph = _arrays(s.labels, s.graph)
        data.append((s, y, raw, graph))
    weights = np.array([len(y) for _, y, _, _ in data], dtype=float)
    weights = weights / weights.sum()
    per: dict[str, float] = {}
    point = 0.0
    for (s, y, raw, graph), w in zip(data, weights):
        b_raw, b_graph = _ba_points(y, raw, graph, s.raw_threshold, s.graph_threshold)
        per[s.name] = b_graph - b_raw
        point += w * per[s.name]
    rng = np.random.default_rng(seed)
    reps = np.zeros(n_boot)
    for (s, y, raw, graph), w in zip(data, weights):
        n = len(y)
        pred_raw = raw > s.raw_threshold
        pred_graph = graph > s.graph_threshold
        idx = rng.integers(0, n, size=(n_boot, n))
        yb = y[idx]
        pos = (yb == 1).sum(axis=1)
        neg = (yb == 0).sum(axis=1)

        def ba(pred, yb=yb, idx=idx, pos=pos, neg=neg):  # type: ignore[no-untyped-def]
            pb = pred[idx]
            with np.errstate(invalid="ignore", divide="ignore"):
                tpr = (pb & (yb == 1)).sum(axis=1) / pos
                tnr = (~pb & (yb == 0)).sum(axis=1) / neg
            return 100 * (tpr + tnr) / 2

        reps += w * (ba(pred_graph) - ba(pred_raw))
    reps = reps[~np.isnan(reps)]
    return LiftResult(
        lift=float(point),
        se=float(reps.std(ddof=1)) if len(reps) > 1 else math.nan,
        ci_low=float(np.percentile(reps, 2.5)) if len(reps) else math.nan,
        ci_high=float(np.percentile(reps, 97.5)) if len(reps) else math.nan,
        per_dataset=per,
        n_boot=n_boot,
        seed=seed,
    )


# --------------------------------------------------------------------------------------------- KG cache files
def export_kg(path: str | Path, entries: Iterable[tuple[str, str, str, CachedKG]]) -> int:
    """Append ``(llm id, prompt version, text, kg)`` entries not yet in the JSONL file at ``path``.

    Returns the number of lines added. The file is the portable, committed form of the on-disk cache.
    """
    added = 0
    with JsonlStore(path, key=_kg_key) as store:
        for llm_id, prompt_version, text, kg in entries:
            record = {"llm": llm_id, "prompt": prompt_version, "text": text, "triples": kg.triples,
                      "raw_text": kg.raw_text}
            if _kg_key(record) in store:
                continue
            store.append(record)
            added += 1
    return added


def _kg_key(entry: Mapping[str, Any]) -> str | None:
    if not all(isinstance(entry.get(k), str) for k in ("llm", "prompt", "text")):
        return None
    return json.dumps([entry["llm"], entry["prompt"], entry["text"]], ensure_ascii=False)


def seed_kg_cache(path: str | Path, cache: KGCache, prompt: KGPrompt | None = None) -> int:
    """Load a JSONL file written by :func:`export_kg` into ``cache`` (entries already there are kept).

    The file names prompts by their readable version. With ``prompt``, only its entries are loaded, under the
    key the extractor looks up (:attr:`KGPrompt.cache_id`); without, every entry under its version as written.
    Returns the number of entries written to the cache.
    """
    added = 0
    for e in read_jsonl(path):
        if prompt is not None and e["prompt"] != prompt.version:
            continue
        key = prompt.cache_id if prompt is not None else e["prompt"]
        if cache.get(e["llm"], key, e["text"]) is None:
            cache.set(e["llm"], key, e["text"], CachedKG(triples=e["triples"], raw_text=e.get("raw_text")))
            added += 1
    return added


def read_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """The JSON objects of a JSONL file (none when it is missing), in order; unreadable lines are skipped."""
    if not Path(path).exists():
        return
    for _, row, _problem in numbered_rows(path):
        if row is not None:
            yield row


def cache_only_chat_model(llm_id: str):  # type: ignore[no-untyped-def]
    """A chat model that stands for ``llm_id`` without loading it: every extraction must come from the cache
    (a call raises), so a re-run from exported knowledge graphs provably makes no LLM call."""
    from grapheval_plugins.testing import ScriptedChatModel

    def refuse(messages: Any) -> str:
        raise RuntimeError(f"cache-only run: no cached knowledge graph for this output under {llm_id!r}")

    return ScriptedChatModel(respond=refuse, model_label=llm_id)


# --------------------------------------------------------------------------------------------- results
class ResultStore(JsonlStore):
    """An append-only JSONL file of per-row results, one line per id (a :class:`~grapheval_plugins.jsonl.JsonlStore`).

    On opening, a torn last line (an interrupted write) is dropped and, with ``redo_errors``, rows that recorded an
    error do not count as done, so they are redone (the new row is appended and wins); every other id counts as done.
    """

    def __init__(self, path: str | Path, *, redo_errors: bool = True) -> None:
        super().__init__(path, redo=(lambda row: bool(row.get("error"))) if redo_errors else None)


def load_results(path: str | Path) -> list[dict[str, Any]]:
    """The rows of a result file (torn lines skipped; for an id written twice, the last one)."""
    rows: dict[str, dict[str, Any]] = {}
    for row in read_jsonl(path):
        if "id" in row:
            rows[str(row["id"])] = row
    return list(rows.values())


_RUN_KEYS = ("dataset", "llm", "scorer", "prompt", "render")  # what makes two result rows comparable


def merge_results(source: str | Path, into: str | Path) -> int:
    """Append the rows of the result file ``source`` whose ids ``into`` lacks; returns how many were added.

    Two processes can share a long run (one walks the run order from its start into the main file, the other from
    its end into a side file); merging the side file afterwards leaves one file with every row once, which a
    re-run of the main command then skips. Rows that recorded an error are not merged (a re-run redoes them).

    Raises:
        InputError: another run holds the lock on ``into``, or a row of ``source`` comes from another run (its
            data set, chat model, scorer, prompt version or rendering differs from ``into``'s rows).

    >>> import json, os, tempfile
    >>> tmp = tempfile.mkdtemp()
    >>> main, side = os.path.join(tmp, "main.jsonl"), os.path.join(tmp, "side.jsonl")
    >>> _ = open(main, "w").write(json.dumps({"id": "a", "p_graph": 0.1}) + "\\n")
    >>> _ = open(side, "w").write("".join(json.dumps({"id": i, "p_graph": 0.2}) + "\\n" for i in ("a", "b")))
    >>> merge_results(side, main), sorted(r["id"] for r in load_results(main))
    (1, ['a', 'b'])
    """
    with write_lock(into, "into"), ResultStore(into) as store:
        known = {tuple(row.get(k) for k in _RUN_KEYS) for row in store.rows.values()}
        rows = load_results(source)
        for row in rows:  # every row is checked before any is written: a refused merge leaves ``into`` as it was
            run = tuple(row.get(k) for k in _RUN_KEYS)
            if known and run not in known:
                raise InputError("source", f"row {row['id']!r} of {source} comes from another run than {into}: "
                                           f"{dict(zip(_RUN_KEYS, run))}")
        added = 0
        for row in rows:
            if str(row["id"]) not in store.rows and not row.get("error"):
                store.append(row)
                added += 1
        return added


def report_from_detection_row(
    row: Mapping[str, Any], output: str, threshold: float = 0.5, *, rule: RuleLike = "hybrid",
    weights: HybridWeights | None = None, method: RuleLike | None = None,
) -> Report:
    """GraphEval's report on ``output``, rebuilt from a detection-study result row (no model is called), decided as
    ``GraphEval(rule=rule, fidelity="off")`` would (``method``: deprecated alias of ``rule``, warns); without
    weights or ``p_raw`` where the rule needs them, the paper's rule decides. Only ``concat`` rows qualify.

    >>> row = {"id": "r1", "p_graph": 0.8, "fallback": False, "llm_calls": 1, "cached": False, "p_raw": 0.3,
    ...        "render": "concat", "triples": [["Ann", "won", "gold", 0.8], ["Ann", "is", "a swimmer", 0.1]]}
    >>> report = report_from_detection_row(row, "Ann, a swimmer, won gold.")
    >>> report.method, report.hallucinated, [c.claim for c in report.unsupported]
    ('paper', True, ['Ann won gold'])
    >>> whole = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="the whole output alone")
    >>> report = report_from_detection_row(row, "Ann, a swimmer, won gold.", weights=whole)
    >>> report.method, report.hallucinated, round(report.score, 3)
    ('hybrid', False, 0.7)

    Raises:
        InputError: the row recorded an error, has no graph score, or used another rendering.
    """
    if row.get("error") or row.get("p_graph") is None:
        raise InputError("row", f"detection row {row.get('id')!r} has no graph verdict ({row.get('error')})")
    if row.get("render", "concat") != "concat":
        raise InputError("row", f"detection row {row.get('id')!r} used render {row.get('render')!r}, not concat")
    triples = [(Triple.from_list(list(t[:3])), float(t[3])) for t in row.get("triples") or []]
    if triples:
        claims = [
            ClaimCheck(claim=t.sentence(), triple=t, p_unsupported=p, unsupported=p > threshold) for t, p in triples
        ]
    else:
        p = float(row["p_graph"])
        claims = [ClaimCheck(claim=output, p_unsupported=p, unsupported=p > threshold)]
    decider = get_rule(rule_argument(rule, method, "report_from_detection_row"))
    if decider.needs.weights:
        weights = weights or fitted_weights(row.get("scorer"), row.get("prompt"), "off")
    whole = None
    if decider.needs.whole_output and triples and row.get("p_raw") is not None:
        p_raw = float(row["p_raw"])
        whole = ClaimCheck(claim=output, p_unsupported=p_raw, unsupported=p_raw > threshold)
    if (decider.needs.weights and weights is None) or (decider.needs.whole_output and triples and whole is None):
        decider, weights, whole = PAPER, None, None
    decision = decider.decide(claims, threshold=threshold, whole_output=whole, weights=weights)
    extraction = Extraction(
        triples=[t for t, _ in triples],
        attempts=int(row.get("llm_calls") or 0),
        cached=bool(row.get("cached")),
        fallback=not triples,
    )
    return Report(
        output=output, mode="graph", method=decider.name, hallucination_threshold=threshold,
        hallucinated=decision.hallucinated,
        score=1.0 - decision.p_hallucination, decision=decision, claims=claims, whole_output=whole,
        extraction=extraction, llm=row.get("llm"), scorer=row.get("scorer"),
        id=None if row.get("id") is None else str(row["id"]),
    )


def render_sentence(triple: Triple) -> str:
    """The triple as a written sentence: its parts joined by spaces, capitalised, ending with a full stop."""
    text = triple.sentence().strip()
    text = text[:1].upper() + text[1:]
    return text if text.endswith((".", "!", "?")) else text + "."


RENDERERS: dict[str, Callable[[Triple], str]] = {"concat": Triple.sentence, "sentence": render_sentence}
"""How a triple becomes the scorer's hypothesis: the paper's ``concat`` or a written ``sentence``."""


@dataclass
class RunSummary:
    """What one :func:`run_detection` call did."""

    path: Path
    total: int
    skipped: int = 0
    done: int = 0
    errors: int = 0
    llm_calls: int = 0
    seconds: float = 0.0
    error_ids: list[str] = field(default_factory=list)


def _result_row(
    row: Mapping[str, Any], dataset: str, graph: Report, raw: Report, prompt: KGPrompt, render: str
) -> dict[str, Any]:
    errors = [f"{e.stage}: {e.type}: {e.message}" for e in (*graph.errors, *raw.errors)]
    extraction = graph.extraction
    return {
        "id": str(row["id"]),
        "dataset": dataset,
        "label": int(row["label"]),
        "p_raw": None if raw.score is None else round(1.0 - raw.score, 6),
        "p_graph": None if graph.score is None else round(1.0 - graph.score, 6),
        "triples": [[*c.triple.as_list(), round(c.p_unsupported, 6)] for c in graph.claims if c.triple is not None],
        # No triple (parsed now, or a cached empty graph): the whole output was checked as one claim.
        "fallback": bool(extraction.fallback or not extraction.triples) if extraction is not None else None,
        "llm_calls": extraction.attempts if extraction is not None else 0,
        "cached": bool(extraction.cached) if extraction is not None else False,
        "llm": graph.llm,
        "scorer": graph.scorer or raw.scorer,
        "prompt": prompt.version,
        "render": render,
        "timings": {
            "extract": round(graph.timings.get("extract", 0.0), 3),
            "check_graph": round(graph.timings.get("check", 0.0), 3),
            "check_raw": round(raw.timings.get("check", 0.0), 3),
        },
        "error": "; ".join(errors) or None,
    }


async def arun_detection(
    rows: Sequence[Mapping[str, Any]],
    out: str | Path,
    *,
    dataset: str,
    llm: Any,
    scorer: Any,
    kg_cache: KGCache | str | Path,
    kg_file: str | Path | None = None,
    prompt: KGPrompt = KG_PROMPT,
    render: str = "concat",
    max_retries: int = 2,
    show_progress: bool = True,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> RunSummary:
    """Score every row raw and with GraphEval, appending one line per row to ``out`` (see :class:`ResultStore`).

    ``llm`` and ``scorer`` are objects or specs (see :mod:`grapheval_plugins.models`); both engines share one
    scorer object so models load once. Rows already in ``out`` are skipped. For each row: extraction (one LLM
    call unless cached), the triples scored, then the whole output scored against the same context (so a judge
    that keeps the context's prefix evaluated reuses it). New extractions are appended to ``kg_file``.
    ``on_row`` is called with each result row after it is written. A lock (a file in the temporary folder named
    after ``out``'s absolute path) keeps two runs from writing the same file.

    Raises:
        InputError: an unknown ``render``, or another run holds the lock on ``out``.
    """
    if render not in RENDERERS:
        raise InputError("render", f"must be one of {sorted(RENDERERS)}, got {render!r}")
    with write_lock(out, "out"):
        return await _run_locked(rows, out, dataset=dataset, llm=llm, scorer=scorer, kg_cache=kg_cache,
                                 kg_file=kg_file, prompt=prompt, render=render, max_retries=max_retries,
                                 show_progress=show_progress, on_row=on_row)


def _export_fallbacks(kg_file: str | Path, store: ResultStore, rows: Sequence[Mapping[str, Any]]) -> None:
    """Export an empty knowledge graph for done rows whose extraction fell back (files written before fallbacks
    were exported)."""
    from grapheval_plugins.inputs import normalize_output

    by_id = {str(r["id"]): r for r in rows}
    entries = []
    for rid, result in store.rows.items():
        if result.get("fallback") and not result.get("cached") and result.get("llm") and rid in by_id:
            entries.append((result["llm"], result["prompt"], normalize_output(by_id[rid]["output"]), CachedKG([], None)))
    if entries:
        export_kg(kg_file, entries)


@contextlib.contextmanager
def write_lock(path: str | Path, argument: str) -> Iterator[None]:
    """Hold the lock on the result file ``path`` (a benchmark script's own per-row file, too) (see :func:`_lock_path`); refuse at once when another run holds
    it (InputError naming ``argument``)."""
    from filelock import FileLock, Timeout

    lock = FileLock(_lock_path(path))
    try:
        lock.acquire(timeout=0)
    except Timeout as exc:
        raise InputError(argument, f"another run is writing {path} (lock {lock.lock_file} is held)") from exc
    try:
        yield
    finally:
        lock.release()


def _lock_path(out: str | Path) -> str:
    import hashlib
    import tempfile

    digest = hashlib.sha1(str(Path(out).resolve()).encode("utf-8")).hexdigest()[:16]  # noqa: S324 - a name
    return str(Path(tempfile.gettempdir()) / f"grapheval-bench-{digest}.lock")


async def _run_locked(
    rows: Sequence[Mapping[str, Any]],
    out: str | Path,
    *,
    dataset: str,
    llm: Any,
    scorer: Any,
    kg_cache: KGCache | str | Path,
    kg_file: str | Path | None,
    prompt: KGPrompt,
    render: str,
    max_retries: int,
    show_progress: bool,
    on_row: Callable[[dict[str, Any]], None] | None,
) -> RunSummary:
    store = ResultStore(out)
    try:
        return await _run_rows(rows, store, dataset=dataset, llm=llm, scorer=scorer, kg_cache=kg_cache,
                               kg_file=kg_file, prompt=prompt, render=render, max_retries=max_retries,
                               show_progress=show_progress, on_row=on_row)
    finally:
        store.close()


async def _run_rows(
    rows: Sequence[Mapping[str, Any]],
    store: ResultStore,
    *,
    dataset: str,
    llm: Any,
    scorer: Any,
    kg_cache: KGCache | str | Path,
    kg_file: str | Path | None,
    prompt: KGPrompt,
    render: str,
    max_retries: int,
    show_progress: bool,
    on_row: Callable[[dict[str, Any]], None] | None,
) -> RunSummary:
    from tqdm.auto import tqdm

    from grapheval_plugins.models import resolve_llm, resolve_scorer
    from grapheval_plugins.pipeline import GraphEval

    done = store.done()
    todo = [r for r in rows if str(r["id"]) not in done]
    summary = RunSummary(path=store.path, total=len(rows), skipped=len(rows) - len(todo))
    if kg_file is not None:
        _export_fallbacks(kg_file, store, rows)
    if not todo:
        return summary
    cache = SQLiteKGCache(kg_cache) if isinstance(kg_cache, (str, Path)) else kg_cache
    if kg_file is not None:
        seeded = seed_kg_cache(kg_file, cache, prompt)
        if seeded:
            logger.info("seeded %d knowledge graph(s) from %s", seeded, kg_file)
    shared_scorer = resolve_scorer(scorer)
    chat = resolve_llm(llm)
    graph = GraphEval(chat, shared_scorer, mode="graph", prompt=prompt, cache=cache, max_retries=max_retries,
                      render_triple=RENDERERS[render], locate=False, show_progress=False)
    raw = GraphEval(chat, shared_scorer, mode="raw", locate=False, show_progress=False)
    llm_id = describe_llm(chat)
    t0 = time.perf_counter()
    bar = tqdm(total=len(todo), desc=f"{dataset} {render}", unit="row", disable=not show_progress)
    try:
        for row in todo:
            g = await graph.aevaluate(row["context"], row["output"], id=str(row["id"]))
            r = await raw.aevaluate(row["context"], row["output"], id=str(row["id"]))
            result = _result_row(row, dataset, g, r, prompt, render)
            store.append(result)
            summary.done += 1
            summary.llm_calls += result["llm_calls"]
            if result["error"]:
                summary.errors += 1
                summary.error_ids.append(result["id"])
            elif kg_file is not None and g.extraction is not None:
                # A fallback (nothing parsed) is exported too, with no triples: a re-run from the file then
                # checks the whole output again, exactly as the first run did, without calling the model. So is
                # a graph that came from the on-disk cache (an earlier run's, not in the file): export_kg skips
                # the entries the file already holds.
                kg = CachedKG(triples=[t.as_list() for t in g.extraction.triples], raw_text=g.extraction.raw_text)
                export_kg(kg_file, [(llm_id, prompt.version, g.output, kg)])
            if on_row is not None:
                on_row(result)
            bar.update(1)
    finally:
        bar.close()
        summary.seconds = time.perf_counter() - t0
    return summary


def run_detection(rows: Sequence[Mapping[str, Any]], out: str | Path, **kwargs: Any) -> RunSummary:
    """Synchronous :func:`arun_detection`.

    Example:
        >>> import tempfile, os
        >>> from grapheval_plugins.testing import KeywordScorer, naive_triples_chat_model
        >>> tmp = tempfile.mkdtemp()
        >>> rows = [{"id": "a", "label": 1, "context": "The cat sat on the mat.", "output": "The dog sat on the mat."}]
        >>> s = run_detection(rows, os.path.join(tmp, "out.jsonl"), dataset="toy", llm=naive_triples_chat_model(),
        ...                   scorer=KeywordScorer(), kg_cache=os.path.join(tmp, "kg.sqlite"), show_progress=False)
        >>> s.done, load_results(os.path.join(tmp, "out.jsonl"))[0]["triples"][0][:3]
        (1, ['The dog', 'sat', 'on the mat'])
    """
    return run_sync(arun_detection(rows, out, **kwargs))
