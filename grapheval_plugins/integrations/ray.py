"""GraphEval's :meth:`~grapheval_plugins.GraphEval.evaluate_many` on a Ray cluster (how it runs: ``docs/ray.md``).

Example (a local Ray is started, and stopped, when none is running)::

    from grapheval_plugins.integrations.ray import evaluate_dataset, evaluate_to_file
    reports = evaluate_dataset("rows.jsonl", llm="bedrock:<model id>", scorer="hhem", cache="kg.sqlite")
    evaluate_to_file("rows.parquet", "reports.jsonl", llm="local:qwen2.5-coder-0.5b", scorer="hhem",
                     extract_actors=8, requests_per_minute=600, tokens_per_minute=400_000)
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from .._imports import require
from ..aggregate import RuleLike, rule_argument
from ..exceptions import InputError, renamed
from ..extract.prompts import KG_PROMPT, KGPrompt
from ..pipeline import GraphEval
from ..types import ExtractedRow, Mode, Report, StageUsage, Triple, total_usage

__all__ = ["EngineSpec", "RayEvalSummary", "build_dataset", "evaluate_dataset", "evaluate_to_file",
    "iter_report_json", "read_reports", "report_record", "report_schema"]

_PURPOSE = "to run GraphEval on Ray"
_POSITION = "__grapheval_position__"


def _ray() -> Any:
    return require("ray", "ray", _PURPOSE)


# --------------------------------------------------------------------------------------------- engine settings
@dataclass(frozen=True)
class EngineSpec:
    """What an actor needs to build its own :class:`~grapheval_plugins.GraphEval`: ``llm`` and ``scorer`` are spec
    strings or picklable zero-argument factories."""

    llm: Any = None
    scorer: Any = None
    hallucination_threshold: float = 0.5
    mode: Mode = "graph"
    rule: RuleLike = "hybrid"
    prompt: KGPrompt = KG_PROMPT
    max_retries: int = 2
    cache: str | None = None
    render_triple: Callable[[Triple], str] = Triple.sentence
    locate: bool = True

    def _model(self, spec: Any, resolve: Callable[[Any], Any]) -> Any:
        if callable(spec) and not hasattr(spec, "ainvoke") and not hasattr(spec, "predict_support"):
            spec = spec()
        return resolve(spec)

    def build_llm(self) -> Any:
        from ..models import resolve_llm

        return self._model(self.llm, resolve_llm)

    def build_scorer(self) -> Any:
        """``scorer``, else a judge over ``llm``, else the default (:func:`~grapheval_plugins.models.scorer_for`)."""
        from ..models import resolve_scorer, scorer_for

        return self._model(scorer_for(self.llm, self.scorer), resolve_scorer)

    def engine(self, **options: Any) -> GraphEval:
        settings = {f.name: getattr(self, f.name) for f in fields(self)}
        cache = self.cache if self.cache is not None else True
        settings.update(llm=None, scorer=None, cache=cache, show_progress=False)
        return GraphEval(**{**settings, **options})


# --------------------------------------------------------------------------------------------- the two actors
def _report_json(report: Report) -> str:
    """One report as a line of ``grapheval evaluate``'s JSONL output."""
    return json.dumps(report.model_dump(mode="json"), ensure_ascii=False)


class _ExtractStage:
    """Actor: one chat model, rate-limited; rows → ``(id, kind, payload)`` (a final report, or the pending row)."""

    def __init__(self, spec: EngineSpec, keys: dict[str, Any], limits: dict[str, Any], concurrency: int) -> None:
        llm: Any = None
        if spec.mode == "graph":
            llm = spec.build_llm()
            if limits["requests_per_minute"] or limits["tokens_per_minute"]:
                from ..ratelimit import RateLimitedChatModel

                llm = RateLimitedChatModel(llm, **limits)
        self.engine = spec.engine(llm=llm, max_concurrency=concurrency)
        self.keys = keys

    def __call__(self, batch: Any) -> dict[str, list[str | None]]:
        rows = batch.to_pylist()
        positions = [row.pop(_POSITION) for row in rows] if _POSITION in batch.column_names else None
        results = self.engine.extract_rows(rows, positions=positions, **self.keys)
        return {
            "id": [r.id for r in results],
            "kind": ["report" if isinstance(r, Report) else "pending" for r in results],
            "payload": [_report_json(r) if isinstance(r, Report) else r.model_dump_json() for r in results],
        }


class _CheckStage:
    """Actor: one loaded scorer; pending rows → reports (rows already final pass through)."""

    def __init__(self, spec: EngineSpec, check_batch_rows: int) -> None:
        self.engine = spec.engine(scorer=spec.build_scorer(), check_batch_rows=check_batch_rows)
        self.engine.scorer  # noqa: B018 - load before the first batch

    def __call__(self, batch: Any) -> dict[str, list[str | None]]:
        kinds = batch.column("kind").to_pylist()
        payloads = batch.column("payload").to_pylist()
        pending = [ExtractedRow.model_validate_json(p) for k, p in zip(kinds, payloads) if k == "pending"]
        checked = iter(self.engine.check_rows(pending))
        reports = [p if k == "report" else _report_json(next(checked)) for k, p in zip(kinds, payloads)]
        return {"id": batch.column("id").to_pylist(), "report": reports}


# --------------------------------------------------------------------------------------------- the pipeline
def _read(source: Any, parallelism: int | None, num_cpus: float) -> Any:
    """A ``ray.data.Dataset`` from paths (JSONL / JSON / Parquet, by suffix), rows, or a dataset."""
    ray = _ray()
    if isinstance(source, ray.data.Dataset):
        return source
    if isinstance(source, (str, Path)):
        source = [source]
    items = list(source)
    if items and all(isinstance(s, (str, Path)) for s in items):
        paths = [str(p) for p in items]
        suffixes = {Path(p).suffix.lower() for p in paths}
        kwargs = {"num_cpus": num_cpus, "override_num_blocks": parallelism}
        if suffixes <= {".parquet", ".pq"}:
            return ray.data.read_parquet(paths, **kwargs)
        if suffixes <= {".jsonl", ".json", ".ndjson"}:
            return ray.data.read_json(paths, lines=True, **kwargs)
        raise InputError("source", f"read JSONL (.jsonl/.json) or Parquet (.parquet) files, got {sorted(suffixes)}")
    if not all(isinstance(r, Mapping) for r in items):
        raise InputError("source", "rows must be mappings (dicts) with the context / output / id fields")
    # In-memory rows carry their position, so an input error names the row as evaluate_many does.
    rows = [{**r, _POSITION: i} for i, r in enumerate(items)]
    return ray.data.from_items(rows, override_num_blocks=parallelism)


def build_dataset(
    source: Any,
    *,
    llm: Any = None,
    scorer: Any = None,
    hallucination_threshold: float | None = None,
    threshold: float | None = None,
    mode: Mode = "graph",
    rule: RuleLike = "hybrid",
    method: RuleLike | None = None,
    prompt: KGPrompt = KG_PROMPT,
    max_retries: int = 2,
    cache: str | Path | None = None,
    context_key: str = "context",
    output_key: str = "output",
    id_key: str = "id",
    extract_actors: int = 2,
    extract_concurrency: int = 4,
    extract_batch_rows: int = 16,
    extract_num_cpus: float = 0.25,
    requests_per_minute: float | None = None,
    tokens_per_minute: float | None = None,
    expected_completion_tokens: int = 256,
    check_actors: int = 1,
    check_batch_rows: int = 256,
    check_num_cpus: float = 0.5,
    check_num_gpus: float | None = None,
    max_restarts: int = -1,
    max_task_retries: int = -1,
    parallelism: int | None = None,
    read_num_cpus: float = 0.25,
    render_triple: Callable[[Triple], str] = Triple.sentence,
    locate: bool = True,
) -> Any:
    """The lazy Ray Data pipeline (run once consumed, with Ray initialised): a ``ray.data.Dataset`` of ``{"id",
    "report"}`` rows, ``report`` one JSON line.

    Args:
        source: JSONL / Parquet path(s), a list of row dicts, or a ``ray.data.Dataset``.
        hallucination_threshold, mode, rule, prompt, max_retries, render_triple, locate: as
            :class:`~grapheval_plugins.GraphEval`'s; ``threshold`` and ``method`` are deprecated names.
        cache: an SQLite knowledge-graph cache on storage every worker reaches (``None``: in memory per actor).
        requests_per_minute, tokens_per_minute: the account's limits, shared out between the extraction actors.
        check_num_gpus: GPUs per scorer (``None``: 1 if the cluster has any).
        parallelism: input blocks (leave a CPU free for Ray Data's file listing: ``docs/ray.md``).
    """
    ray = _ray()
    if extract_actors < 1 or check_actors < 1 or extract_concurrency < 1:
        raise InputError("extract_actors", "extract_actors, check_actors and extract_concurrency must be >= 1")
    hallucination_threshold = renamed("build_dataset", "threshold", threshold, "hallucination_threshold",
                                      hallucination_threshold)
    spec = EngineSpec(
        llm=llm, scorer=scorer, hallucination_threshold=0.5 if hallucination_threshold is None else hallucination_threshold,
        mode=mode, rule=rule_argument(rule, method, "build_pipeline") or "hybrid", prompt=prompt, max_retries=max_retries,
        cache=None if cache is None else str(Path(cache).resolve()), render_triple=render_triple, locate=locate,
    )
    limits = {
        "requests_per_minute": None if requests_per_minute is None else requests_per_minute / extract_actors,
        "tokens_per_minute": None if tokens_per_minute is None else tokens_per_minute / extract_actors,
        "expected_completion_tokens": expected_completion_tokens,
    }
    # Ray Data's actor pools restart dead actors and retry their tasks without bound by default; pass only changes.
    retries = {k: v for k, v in (("max_restarts", max_restarts), ("max_task_retries", max_task_retries)) if v != -1}

    def stage(ds: Any, actor: type, kwargs: dict[str, Any], rows: int, actors: int, **resources: Any) -> Any:
        return ds.map_batches(actor, fn_constructor_kwargs=kwargs, batch_size=rows, batch_format="pyarrow",
                              compute=ray.data.ActorPoolStrategy(size=actors), **resources, **retries)

    keys = {"context_key": context_key, "output_key": output_key, "id_key": id_key}
    ds = stage(_read(source, parallelism, read_num_cpus), _ExtractStage,
               {"spec": spec, "keys": keys, "limits": limits, "concurrency": extract_concurrency},
               extract_batch_rows, extract_actors, num_cpus=extract_num_cpus)
    gpus = check_num_gpus if check_num_gpus is not None else float(ray.cluster_resources().get("GPU", 0) > 0)
    ds = stage(ds, _CheckStage, {"spec": spec, "check_batch_rows": check_batch_rows}, check_batch_rows,
               check_actors, num_cpus=check_num_cpus, num_gpus=gpus)
    assert isinstance(ds, ray.data.Dataset)
    return ds


def iter_report_json(dataset: Any, batch_rows: int = 256) -> Iterator[str]:
    """The JSON lines of a :func:`build_dataset` pipeline, streamed to this process as they are ready."""
    for batch in dataset.iter_batches(batch_size=batch_rows, batch_format="pyarrow"):
        yield from batch.column("report").to_pylist()


@contextlib.contextmanager
def _ray_session(
    address: str | None, num_cpus: int | None, init: Mapping[str, Any] | None, preserve_order: bool, show_progress: bool
) -> Iterator[None]:
    """Use the running Ray, or connect to ``address``, or start a local one (stopped again on exit)."""
    ray = _ray()
    started = not ray.is_initialized()
    if started:
        options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING, **(init or {})}
        if address is not None:
            options["address"] = address
        elif num_cpus is not None:
            options.setdefault("num_cpus", num_cpus)
        ray.init(**options)
    ctx = ray.data.DataContext.get_current()
    saved = (ctx.execution_options.preserve_order, ctx.enable_progress_bars)
    ctx.execution_options.preserve_order = preserve_order
    ctx.enable_progress_bars = show_progress
    try:
        yield
    finally:
        ctx.execution_options.preserve_order, ctx.enable_progress_bars = saved
        if started:
            ray.shutdown()


def evaluate_dataset(
    source: Any,
    *,
    address: str | None = None,
    num_cpus: int | None = None,
    ray_init: Mapping[str, Any] | None = None,
    preserve_order: bool = True,
    show_progress: bool = False,
    **options: Any,
) -> list[Report]:
    """The reports of every row of ``source``, in order, checked on Ray with the options of :func:`build_dataset`;
    with no Ray running, connects to ``address`` or starts a local one with ``num_cpus`` CPUs."""
    with _ray_session(address, num_cpus, ray_init, preserve_order, show_progress):
        ds = build_dataset(source, **options)
        return [Report.model_validate_json(line) for line in iter_report_json(ds)]


@dataclass
class RayEvalSummary:
    """What :func:`evaluate_to_file` wrote: rows by verdict, the problems met, the chat-model usage."""

    path: Path
    rows: int = 0
    flagged: int = 0
    faithful: int = 0
    errors: int = 0
    problems: list[str] = field(default_factory=list)
    usage: StageUsage = field(default_factory=StageUsage)

    def add(self, report: Report) -> None:
        self.rows += 1
        self.usage = self.usage + total_usage([report.usage])
        if not report.ok:
            self.errors += 1
            self.problems.append(f"row {report.id}: " + "; ".join(e.message for e in report.errors))
        elif report.hallucinated:
            self.flagged += 1
        else:
            self.faithful += 1


def evaluate_to_file(
    source: Any,
    output: str | Path,
    *,
    append: bool = False,
    address: str | None = None,
    num_cpus: int | None = None,
    ray_init: Mapping[str, Any] | None = None,
    preserve_order: bool = False,
    show_progress: bool = False,
    on_report: Callable[[Report], None] | None = None,
    **options: Any,
) -> RayEvalSummary:
    """Check every row of ``source`` on Ray (as :func:`evaluate_dataset`), writing each report to ``output`` (JSONL,
    or Parquet for ``.parquet``) as it comes; ``append=True`` resumes a JSONL file (``docs/ray.md``)."""
    from ..jsonl import JsonlStore

    path = Path(output)
    summary = RayEvalSummary(path=path)
    parquet = path.suffix.lower() in (".parquet", ".pq")
    if parquet and append:
        raise InputError("append", "appending is supported for JSONL output only")
    path.parent.mkdir(parents=True, exist_ok=True)

    def reports(lines: Iterable[str]) -> Iterator[tuple[str, Report]]:
        for line in lines:
            report = Report.model_validate_json(line)
            summary.add(report)
            if on_report is not None:
                on_report(report)
            yield line, report

    unnamed = itertools.count()

    def key(row: Mapping[str, Any]) -> str | None:  # a report (one without an id too); anything else: no key
        if "id" not in row or "hallucinated" not in row:
            return None
        return f"\0{next(unnamed)}" if row["id"] is None else str(row["id"])

    store = None if parquet else JsonlStore(path, key=key, replace=not append, keep_rows=False)  # checked first
    with _ray_session(address, num_cpus, ray_init, preserve_order, show_progress):
        lines = iter_report_json(build_dataset(source, **options))
        if store is None:
            _write_parquet(path, (r for _, r in reports(lines)))
            return summary
        with store:
            for line, report in reports(lines):
                if report.id is not None and report.id in store:
                    summary.problems.append(f"row {report.id}: repeated id, its report is not written twice")
                    continue
                store.append(json.loads(line))
    return summary


# --------------------------------------------------------------------------------------------- Parquet
def report_schema() -> Any:
    """The Arrow schema of a report row in Parquet output, read from the ``Report`` model."""
    pa = require("pyarrow", "ray", _PURPOSE)
    return pa.schema(list(_arrow_type(pa, Report)))


def _arrow_type(pa: Any, annotation: Any) -> Any:
    """A field's Arrow type: models as structs, lists and tuples as lists, dicts as maps (every column nullable)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return _arrow_type(pa, next(a for a in args if a is not type(None)))
    if origin is typing.Literal:
        return pa.string()
    if origin in (list, tuple):
        return pa.list_(_arrow_type(pa, args[0]))
    if origin is dict:
        return pa.map_(pa.string(), _arrow_type(pa, args[1]))
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        members = [(name, f.annotation) for name, f in annotation.model_fields.items()]
        members += [(name, f.return_type) for name, f in annotation.model_computed_fields.items()]
        return pa.struct([(name, _arrow_type(pa, a)) for name, a in members])
    return {str: pa.string(), float: pa.float64(), int: pa.int64(), bool: pa.bool_()}[annotation]


def report_record(report: Report) -> dict[str, Any]:
    """A report as a row of :func:`report_schema` (``timings`` and ``usage`` as key/value pairs)."""
    data = report.model_dump(mode="json")
    data["timings"] = list(data["timings"].items())
    data["usage"] = list(data["usage"].items())
    return data


def _write_parquet(path: Path, reports: Iterable[Report], rows_per_group: int = 4096) -> None:
    """Write ``reports`` beside ``path``, renamed over it only once every report is written."""
    pa = require("pyarrow", "ray", _PURPOSE)
    pq = require("pyarrow.parquet", "ray", _PURPOSE)
    schema = report_schema()
    partial = path.with_name(f".{path.name}.partial")
    try:
        with pq.ParquetWriter(str(partial), schema) as writer:
            records = map(report_record, reports)
            while chunk := list(itertools.islice(records, rows_per_group)):
                writer.write_table(pa.Table.from_pylist(chunk, schema=schema))
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    os.replace(partial, path)


def read_reports(path: str | Path) -> list[Report]:
    """Read back reports written by :func:`evaluate_to_file` (JSONL or Parquet) or ``grapheval evaluate``."""
    path = Path(path)
    if path.suffix.lower() in (".parquet", ".pq"):
        pq = require("pyarrow.parquet", "ray", _PURPOSE)
        return [
            Report.model_validate({**row, "timings": dict(row["timings"] or []),
                                   "usage": dict(row.get("usage") or [])})
            for row in pq.read_table(str(path)).to_pylist()
        ]
    with path.open(encoding="utf-8") as fh:
        return [Report.model_validate_json(line) for line in fh if line.strip()]
