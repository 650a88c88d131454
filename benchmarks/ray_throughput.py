"""Throughput of the Ray engine against the single-process path, on the same rows and models.

    .venv/bin/python benchmarks/ray_throughput.py fake            # 200 QAGS-C rows, fake models of fixed latency
    .venv/bin/python benchmarks/ray_throughput.py local --rows 20 # the local 0.5B pair (llama.cpp), 20 rows

``fake``: a chat model that answers prompt A with crude triples after ``--llm-latency`` seconds (an async sleep,
as a provider's API call: concurrent calls overlap) and a scorer whose every batch costs ``--batch-latency`` +
``--pair-latency`` x pairs seconds (a GPU-like shape: a fixed cost per pass, a small one per pair). The single
process runs ``GraphEval.evaluate_many`` (``max_concurrency`` calls in flight, ``check_batch_rows`` rows per scorer
pass); the Ray runs use a local Ray of ``--num-cpus`` CPUs with 1, 2 and 4 extraction actors and one scoring actor.
Every run's reports are compared with the single-process ones (all fields but the wall times).

``local``: the offline models (``local:qwen2.5-coder-0.5b`` + ``judge:local:qwen2.5-coder-0.5b`` by default), loaded
once per process: the single process holds both, the Ray run one extraction actor and one scoring actor (each
loads its own copy). Time to load the models is reported apart from the rows' time.

Results go to ``benchmarks/results/ray-throughput-<what>.json``; the machine's load average is recorded
before and after each run, since the 2 cores are shared.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from grapheval_plugins import GraphEval, Report
from grapheval_plugins.testing import FunctionScorer, keyword_support, naive_triples_chat_model

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
DATA = ROOT.parent / "shared" / "data" / "benchmarks"

app = typer.Typer(add_completion=False, no_args_is_help=True)


class LatencyScorer(FunctionScorer):
    """Word overlap (:func:`~grapheval_plugins.testing.keyword_support`) at a fixed cost per batch and per pair."""

    def __init__(self, batch_latency: float, pair_latency: float) -> None:
        super().__init__(keyword_support, name="keyword-overlap")
        self.batch_latency = batch_latency
        self.pair_latency = pair_latency

    def predict_support(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        time.sleep(self.batch_latency + self.pair_latency * len(pairs))
        return [float(keyword_support(p, h)) for p, h in pairs]


def load_rows(name: str, n: int) -> list[dict[str, Any]]:
    path = Path(name) if Path(name).suffix else DATA / f"{name}.jsonl"
    rows = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                row = json.loads(line)
                rows.append({"id": str(row["id"]), "context": row["context"], "output": row["output"]})
            if len(rows) == n:
                break
    return rows


def _strip(report: Report) -> dict[str, Any]:
    return report.model_dump(mode="json", exclude={"timings"})


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def _run(label: str, fn: Any, rows: list[dict[str, Any]], reference: list[Report] | None) -> dict[str, Any]:
    load_before = _load()
    t0 = time.perf_counter()
    reports = fn()
    seconds = time.perf_counter() - t0
    entry: dict[str, Any] = {
        "run": label, "rows": len(rows), "seconds": round(seconds, 2), "rows_per_s": round(len(rows) / seconds, 3),
        "load_before": load_before, "load_after": _load(),
    }
    if reference is not None:
        entry["identical_to_single_process"] = [_strip(r) for r in reports] == [_strip(r) for r in reference]
    entry["reports"] = reports
    typer.echo(f"{label:<42} {seconds:8.2f} s  {entry['rows_per_s']:7.2f} rows/s  load {load_before} -> {entry['load_after']}")
    return entry


def _init_ray(num_cpus: int) -> float:
    import ray

    t0 = time.perf_counter()
    ray.init(num_cpus=num_cpus, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    return time.perf_counter() - t0


def _save(name: str, payload: dict[str, Any]) -> None:
    for entry in payload["runs"]:
        entry.pop("reports", None)
    base = payload["runs"][0]["seconds"]
    for entry in payload["runs"]:
        entry["speed_vs_single_process"] = round(base / entry["seconds"], 3)
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"ray-throughput-{name}.json"
    out.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    typer.echo(f"written {out}")


def _machine() -> dict[str, Any]:
    import ray

    return {
        "python": platform.python_version(), "ray": ray.__version__, "cpus": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }


@app.command()
def fake(
    rows: Annotated[int, typer.Option(help="Rows of the data set.")] = 200,
    data: Annotated[str, typer.Option(help="Data set name (under ../shared/data/benchmarks) or JSONL path.")] = "qags_c",
    llm_latency: Annotated[float, typer.Option(help="Seconds per chat-model call.")] = 0.2,
    batch_latency: Annotated[float, typer.Option(help="Seconds per scorer pass.")] = 0.05,
    pair_latency: Annotated[float, typer.Option(help="Seconds per scored pair.")] = 0.001,
    concurrency: Annotated[int, typer.Option(help="Chat-model calls in flight per process / actor.")] = 4,
    check_batch_rows: Annotated[int, typer.Option(help="Rows per scorer pass.")] = 32,
    num_cpus: Annotated[int, typer.Option(help="CPUs of the local Ray.")] = 2,
    actors: Annotated[str, typer.Option(help="Extraction actor counts to run, comma-separated.")] = "1,2,4",
) -> None:
    """Fake models of fixed latency: the overhead of Ray and how extraction concurrency scales with actors."""
    import ray

    data_rows = load_rows(data, rows)
    llm = functools.partial(naive_triples_chat_model, latency_s=llm_latency)
    scorer = functools.partial(LatencyScorer, batch_latency, pair_latency)
    single = GraphEval(llm=llm(), scorer=scorer(), max_concurrency=concurrency, check_batch_rows=check_batch_rows,
                       show_progress=False)
    runs = [_run(f"single process (concurrency {concurrency})", lambda: single.evaluate_many(data_rows), data_rows, None)]
    reference = runs[0]["reports"]
    init_s = _init_ray(num_cpus)
    from grapheval_plugins.integrations.ray import evaluate_dataset

    try:
        for n in [int(a) for a in actors.split(",")]:
            options = {
                "llm": llm, "scorer": scorer, "extract_actors": n, "extract_concurrency": concurrency,
                "extract_num_cpus": 0.25, "check_actors": 1, "check_num_cpus": 0.5,
                "check_batch_rows": check_batch_rows, "extract_batch_rows": 16,
            }
            # The fixed cost of one pipeline run (actor start-up, model building, scheduling): the same run on
            # 4 rows; the marginal time per row is (T(all rows) - T(4 rows)) / (rows - 4).
            few = _run(f"ray: {n} extraction actor(s), 4 rows", lambda o=options: evaluate_dataset(data_rows[:4], **o),
                       data_rows[:4], None)
            entry = _run(f"ray: {n} extraction actor(s) x {concurrency}",
                         lambda o=options: evaluate_dataset(data_rows, **o), data_rows, reference)
            entry["fixed_s"] = few["seconds"]
            entry["marginal_rows_per_s"] = round((len(data_rows) - 4) / max(1e-9, entry["seconds"] - few["seconds"]), 3)
            runs.append(entry)
        machine = _machine()
    finally:
        ray.shutdown()
    _save("fake", {
        "command": " ".join(sys.argv), "machine": machine, "ray_init_s": round(init_s, 2),
        "settings": {"rows": rows, "data": data, "llm_latency_s": llm_latency, "batch_latency_s": batch_latency,
                     "pair_latency_s": pair_latency, "concurrency": concurrency, "check_batch_rows": check_batch_rows,
                     "num_cpus": num_cpus},
        "runs": runs,
    })


@app.command()
def local(
    rows: Annotated[int, typer.Option(help="Rows of the data set.")] = 20,
    data: Annotated[str, typer.Option(help="Data set name (under ../shared/data/benchmarks) or JSONL path.")] = "qags_c",
    llm: Annotated[str, typer.Option(help="Chat model spec.")] = "local:qwen2.5-coder-0.5b",
    scorer: Annotated[str, typer.Option(help="Scorer spec.")] = "judge:local:qwen2.5-coder-0.5b",
    num_cpus: Annotated[int, typer.Option(help="CPUs of the local Ray.")] = 2,
) -> None:
    """The offline local models: one process holding both vs one Ray extraction actor + one scoring actor."""
    import ray

    data_rows = load_rows(data, rows)
    single = GraphEval(llm=llm, scorer=scorer, show_progress=False)
    t0 = time.perf_counter()
    single.llm.load() if callable(getattr(single.llm, "load", None)) else None
    single.scorer  # noqa: B018 - loaded before timing the rows
    load_s = time.perf_counter() - t0
    runs = [_run("single process", lambda: single.evaluate_many(data_rows), data_rows, None)]
    runs[0]["model_load_s"] = round(load_s, 2)
    reference = runs[0]["reports"]
    init_s = _init_ray(num_cpus)
    from grapheval_plugins.integrations.ray import evaluate_dataset

    try:
        options = {"llm": llm, "scorer": scorer, "extract_actors": 1, "extract_num_cpus": 1, "check_actors": 1,
                   "check_num_cpus": 1, "extract_batch_rows": 4, "check_batch_rows": 4}
        # Models load in the actors' constructors, inside the timed run (each actor loads its own copy).
        runs.append(_run("ray: 1 extraction actor + 1 scoring actor", lambda: evaluate_dataset(data_rows, **options),
                         data_rows, reference))
        machine = _machine()
    finally:
        ray.shutdown()
    _save(f"local-{llm.split(':')[-1]}", {
        "command": " ".join(sys.argv), "machine": machine, "ray_init_s": round(init_s, 2),
        "settings": {"rows": rows, "data": data, "llm": llm, "scorer": scorer, "num_cpus": num_cpus},
        "runs": runs,
    })


if __name__ == "__main__":
    app()
