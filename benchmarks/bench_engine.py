"""Cost of the engine's plumbing: the sync path's event loop, and the scorer-pass cap under many concurrent calls.

    .venv/bin/python benchmarks/bench_engine.py
    .venv/bin/python benchmarks/bench_engine.py --calls 400 --concurrent 100 --pair-ms 2

Two measurements, each side by side in one run (fakes only: a scripted chat model and a scorer whose cost is a
fixed time per (premise, hypothesis) pair, so only the plumbing differs):

* **Sync calls**: ``GraphEval.evaluate`` called ``--calls`` times in a row, through the persistent background
  loop (``run_sync`` today) and through a fresh loop per call (``asyncio.run``, what ``run_sync`` did before);
  calls per second and their ratio.
* **Concurrent calls**: ``--concurrent`` ``aevaluate`` calls gathered at once (DeepEval's ``a_measure`` runs up to
  100 cases this way), with ``max_batch_claims`` unbounded and at its default; the time until the first report is
  ready, the median, and until the last.

Each side runs ``--repeats`` times (alternated for the concurrent calls) and the medians are reported. Writes
``benchmarks/results/engine.json``.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from grapheval_plugins import GraphEval
from grapheval_plugins.testing import KeywordScorer, naive_triples_chat_model

RESULTS = Path(__file__).resolve().parent / "results"

app = typer.Typer(add_completion=False)


class PairCostScorer(KeywordScorer):
    """The keyword scorer, plus a fixed cost per pair (what an NLI model's inference time is, to first order)."""

    def __init__(self, pair_ms: float) -> None:
        super().__init__()
        self.pair_s = pair_ms / 1000

    def predict_support(self, pairs: Any) -> list[float]:
        time.sleep(self.pair_s * len(pairs))
        return super().predict_support(pairs)


def _rows(n: int) -> list[tuple[str, str]]:
    out = []
    for i in range(n):
        facts = [f"Item {i} was made in Paris.", f"It weighs {i} kilograms.", "It is blue.", "It has four legs.",
                 f"It cost {10 * i} euros.", "It was sold in Lyon.", "Its maker was Anne Roux.", "It is still in use."]
        context = " ".join(facts)
        facts[1] = f"It weighs {i + i % 2} kilograms."  # every other output has one unsupported claim
        output = " ".join(facts)
        out.append((context, output))
    return out


def sync_calls(calls: int) -> dict[str, float]:
    rows = _rows(calls)
    engine = GraphEval(llm=naive_triples_chat_model(), scorer=KeywordScorer(), cache=False, show_progress=False)
    engine.evaluate(*rows[0])  # warm: models resolved, loop started
    t0 = time.perf_counter()
    for context, output in rows:
        engine.evaluate(context, output)
    persistent = time.perf_counter() - t0
    t0 = time.perf_counter()
    for context, output in rows:
        asyncio.run(engine.aevaluate(context, output))
    per_call = time.perf_counter() - t0
    return {
        "calls": calls,
        "persistent_loop_calls_per_s": calls / persistent,
        "loop_per_call_calls_per_s": calls / per_call,
        "ratio_persistent_over_per_call": per_call / persistent,
    }


def concurrent_calls(n: int, pair_ms: float, cap: int | None) -> dict[str, float]:
    rows = _rows(n)
    options: dict[str, Any] = {} if cap is None else {"max_batch_claims": cap}
    engine = GraphEval(llm=naive_triples_chat_model(), scorer=PairCostScorer(pair_ms), cache=False,
                       show_progress=False, **options)

    async def run() -> list[float]:
        t0 = time.perf_counter()
        ready: list[float] = []

        async def one(context: str, output: str) -> None:
            report = await engine.aevaluate(context, output)
            assert report.ok, report.errors
            ready.append(time.perf_counter() - t0)

        await asyncio.gather(*(one(c, o) for c, o in rows))
        return sorted(ready)

    ready = asyncio.run(run())
    return {"first_s": ready[0], "median_s": statistics.median(ready), "last_s": ready[-1],
            "passes": float(len(engine.scorer.batches))}  # type: ignore[attr-defined]


def _median(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: statistics.median(run[key] for run in runs) for key in runs[0]}


@app.command()
def main(
    calls: Annotated[int, typer.Option(help="Sync evaluate calls in a row.")] = 300,
    concurrent: Annotated[int, typer.Option(help="aevaluate calls gathered at once.")] = 100,
    pair_ms: Annotated[float, typer.Option(help="Scorer cost per (premise, hypothesis) pair, in ms.")] = 2.0,
    repeats: Annotated[int, typer.Option(help="Runs of each side; medians are reported.")] = 3,
) -> None:
    """Run both measurements and print (and write) the figures."""
    concurrent_calls(min(concurrent, 10), pair_ms, cap=None)  # warm: imports, threads
    sync_runs = [sync_calls(calls) for _ in range(repeats)]
    unbounded_runs, capped_runs = [], []
    for _ in range(repeats):  # alternated, so both sides see the same machine load
        unbounded_runs.append(concurrent_calls(concurrent, pair_ms, cap=10**9))
        capped_runs.append(concurrent_calls(concurrent, pair_ms, cap=None))
    sync = _median(sync_runs)
    unbounded, capped = _median(unbounded_runs), _median(capped_runs)
    result = {
        "machine": {"cpu": platform.processor() or platform.machine(), "cores": os.cpu_count(),
                    "python": platform.python_version()},
        "sync": sync,
        "repeats": repeats,
        "concurrent": {"calls": concurrent, "pair_ms": pair_ms, "unbounded": unbounded,
                       "default_cap": capped, "default_cap_value": GraphEval().max_batch_claims},
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "engine.json").write_text(json.dumps(result, indent=2) + "\n")
    typer.echo(json.dumps(result, indent=2))


if __name__ == "__main__":
    app()
