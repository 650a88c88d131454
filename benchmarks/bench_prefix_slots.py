"""Saved prefixes (``LlamaSession(prefix_slots=...)``): the judge's work in a correction, with and without them.

    nice -n 10 .venv/bin/python benchmarks/bench_prefix_slots.py --dataset qags_c --rows 4 --seed 0 --threads 1

For each of ``--rows`` rows (``random.Random(seed).sample`` of the set's ids), the local judge does what a detection
followed by ``GraphCorrect`` asks of it: the output's claim against the context (the context pass), the same claim
against the output (the extraction-fidelity pass), then a corrected claim against the context (the correction's
check). Run once with the default two slots and once with none, each in a fresh session over the same weights, in
alternating order per row. Reported: seconds a row for each, tokens evaluated and restored, and whether every
P(unsupported) is identical. Writes ``benchmarks/results/prefix-slots-<set>-<rows>.json``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness as bench  # noqa: E402

RESULTS = HERE / "results"
MODEL = "qwen2.5-coder-1.5b"
app = typer.Typer(add_completion=False)


def _steps(row: dict[str, Any]) -> list[tuple[str, str]]:
    """The (premise, claim) pairs of one row, in the order a detection and a correction score them."""
    corrected = row["output"].split(".")[0] + "."
    return [(row["context"], row["output"]), (row["output"], row["output"]), (row["context"], corrected)]


@app.command()
def main(
    dataset: Annotated[str, typer.Option(help="qags_c, qags_x or summeval.")] = "qags_c",
    rows: Annotated[int, typer.Option(help="Rows drawn from the set.")] = 4,
    seed: Annotated[int, typer.Option(help="Seed of the draw.")] = 0,
    threads: Annotated[int, typer.Option(help="llama.cpp threads.")] = 1,
) -> None:
    from grapheval_plugins.local.judge import LocalJudgeScorer
    from grapheval_plugins.local.runtime import clear_sessions, get_session
    from grapheval_plugins.local.weights import resolve_model

    chosen = bench.sample_rows(dataset, rows, seed)
    clear_sessions()
    judges = {}
    for slots in (2, 0):
        session = get_session(MODEL, lambda: resolve_model(MODEL, hub=False), role=f"judge-slots-{slots}",
                              n_threads=threads)
        session.prefix_slots = slots
        judges[slots] = LocalJudgeScorer(MODEL, session=session).load()
    seconds: dict[int, list[float]] = {2: [], 0: []}
    scores: dict[int, list[float]] = {2: [], 0: []}
    for index, row in enumerate(chosen):
        order = (2, 0) if index % 2 == 0 else (0, 2)
        for slots in order:
            judge = judges[slots]
            started = time.perf_counter()
            for premise, claim in _steps(row):
                scores[slots] += [s.p_unsupported for s in judge.check([premise], [claim])]
            seconds[slots].append(time.perf_counter() - started)
        typer.echo(f"{row['id']}: with slots {seconds[2][-1]:.1f} s, without {seconds[0][-1]:.1f} s")
    stats = {slots: judges[slots].session.stats for slots in (2, 0)}
    result = {
        "command": " ".join(["benchmarks/bench_prefix_slots.py", *sys.argv[1:]]),
        "date": date.today().isoformat(),
        "machine": f"{os.cpu_count()}-core {platform.machine()}",
        "model": MODEL,
        "threads": threads,
        "rows": [r["id"] for r in chosen],
        "seconds_a_row": {str(k): round(sum(v) / len(v), 2) for k, v in seconds.items()},
        "ratio_without_to_with": round(sum(seconds[0]) / sum(seconds[2]), 2),
        "evaluated_tokens": {str(k): s.evaluated_tokens for k, s in stats.items()},
        "restored_tokens": {str(k): s.restored_tokens for k, s in stats.items()},
        "identical_scores": scores[2] == scores[0],
    }
    out = RESULTS / f"prefix-slots-{dataset}-{rows}.json"
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    typer.echo(json.dumps(result, indent=1))


if __name__ == "__main__":
    app()
