"""Decode speed of the local model under a competing CPU load: 1 thread, every core, and the load-following policy.

    nice -n 10 .venv/bin/python benchmarks/bench_threads.py --model qwen2.5-coder-0.5b --tokens 40 --rounds 2

Scenarios, one after the other in one run: ``idle`` (nothing started beside the run), ``busy-1`` (one busy process
started beside it) and ``busy-all`` (one busy process per core). A busy process is a pure-Python spin loop
(``--load spin``, default) or a second llama.cpp decode loop on one thread (``--load llama``); each stops by itself
after ``--load-seconds`` or when this process ends. In every scenario three sessions over the same loaded model
(separate llama.cpp contexts) generate ``--tokens`` greedy tokens after the extraction prompt of a dev-set output,
in rotating order for ``--rounds`` rounds:

* ``fixed-1``: ``n_threads=1``;
* ``fixed-all``: ``n_threads`` = every core of the affinity mask (the old default);
* ``policy``: no ``n_threads`` (the cores other processes leave free when a call starts).

Reported per scenario and setting: ms per generated token (decode only: the prompt is in the KV cache before the
timed call), and the ratios to ``fixed-1``. The physical limit is the decode rate of a bare llama.cpp loop
(``eval`` of one token at a time, no sampling) on the idle machine at 1 thread and at every core. Greedy outputs of
all settings are compared (llama.cpp's output does not depend on the thread count). Writes
``benchmarks/results/threads-<model>.json``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import subprocess
import sys
import time
from datetime import date
from importlib import metadata
from pathlib import Path
from typing import Annotated, Any

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from grapheval_plugins.extract.prompts import KG_PROMPT  # noqa: E402
from grapheval_plugins.local import runtime  # noqa: E402
from grapheval_plugins.local.chat import ChatLocalLlama  # noqa: E402
from grapheval_plugins.local.runtime import (  # noqa: E402
    LlamaSession,
    allowed_cpus,
    clear_sessions,
    free_cores,
    get_session,
    set_threads,
)
from grapheval_plugins.local.weights import resolve_model_path  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
DEV_SET = Path("/work/shared/data/benchmarks/qags_c.jsonl")
app = typer.Typer(add_completion=False)

SPIN = """
import os, sys, time
deadline, parent = time.monotonic() + float(sys.argv[1]), os.getppid()
n = 0
while time.monotonic() < deadline:
    n += 1
    if n % 1000000 == 0 and os.getppid() != parent:
        break
"""

LLAMA_LOOP = """
import os, sys, time
from grapheval_plugins.local.runtime import load_llama
deadline, parent = time.monotonic() + float(sys.argv[1]), os.getppid()
llama = load_llama(sys.argv[2], n_ctx=512, n_threads=1, n_batch=64, seed=0)
llama.eval([int(llama.token_eos())])
while time.monotonic() < deadline and os.getppid() == parent:
    if llama.n_tokens >= 500:
        llama.n_tokens = 1
    llama.eval([int(llama.token_eos())])
"""


def _start_load(kind: str, count: int, seconds: float, model: Path) -> list[subprocess.Popen[bytes]]:
    code = SPIN if kind == "spin" else LLAMA_LOOP
    args = [str(seconds)] + ([] if kind == "spin" else [str(model)])
    procs = [
        subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(count)
    ]
    time.sleep(3.0 if kind == "llama" else 0.5)  # let them load / start spinning
    return procs


def _stop_load(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a stuck child
            proc.kill()


def _prompt(llm: ChatLocalLlama, row: int) -> list[int]:
    lines = [json.loads(line) for line in DEV_SET.read_text(encoding="utf-8").splitlines() if line.strip()]
    return llm.prompt_tokens(KG_PROMPT.messages(lines[row]["output"]))


def _decode(session: LlamaSession, prompt: list[int], tokens: int) -> dict[str, Any]:
    """Generate ``tokens`` greedy tokens after ``prompt`` (already cached); ms per token and the tokens."""
    with session.lock:
        session.prefill(prompt)
        session.reset_stats()
        started = time.perf_counter()
        out = list(session.generate(prompt, max_tokens=tokens))
        wall = time.perf_counter() - started
        stats = session.stats
    return {
        "ms_per_token": 1000 * stats.decode_seconds / max(1, stats.generated_tokens),
        "wall_s": wall, "generated": stats.generated_tokens, "threads_at_end": session.threads_now,
        "tokens": out,
    }


def _bare_rate(session: LlamaSession, prompt: list[int], threads: int, steps: int) -> float:
    """Tokens per second of ``eval`` one token at a time at ``threads`` threads (no sampling, no bookkeeping)."""
    with session.lock:
        session.prefill(prompt)
        llama = session.llama
        set_threads(llama, threads)
        token = prompt[-1]
        started = time.perf_counter()
        for _ in range(steps):
            llama.eval([token])
        rate = steps / (time.perf_counter() - started)
        set_threads(llama, session.threads_now)
    return rate  # the next prefill of the prompt drops the cells this loop added


@app.command()
def main(
    model: Annotated[str, typer.Option(help="Local model name.")] = "qwen2.5-coder-0.5b",
    tokens: Annotated[int, typer.Option(help="Greedy tokens generated per timed call.")] = 40,
    rounds: Annotated[int, typer.Option(help="Timed calls per setting and scenario (rotating order).")] = 2,
    load: Annotated[str, typer.Option(help="Busy process: 'spin' (pure Python) or 'llama' (a decode loop).")] = "spin",
    load_seconds: Annotated[float, typer.Option(help="Each busy process stops by itself after this long.")] = 240.0,
    row: Annotated[int, typer.Option(help="Dev-set row whose output is the extraction prompt.")] = 0,
    bare_steps: Annotated[int, typer.Option(help="Steps of the bare llama.cpp loop (physical limit).")] = 40,
) -> None:
    if load not in ("spin", "llama"):
        raise typer.BadParameter("--load must be 'spin' or 'llama'")
    cores = allowed_cpus()
    path = resolve_model_path(model, hub=False, show_progress=False)
    clear_sessions()
    sessions = {
        "fixed-1": get_session(model, path, role="bench-fixed-1", n_threads=1),
        "fixed-all": get_session(model, path, role="bench-fixed-all", n_threads=cores),
        "policy": get_session(model, path, role="bench-policy"),
    }
    llm = ChatLocalLlama.from_session(sessions["fixed-1"], model=model)
    prompt = _prompt(llm, row)
    for session in sessions.values():  # load, and put the prompt in each context's KV cache
        with session.lock:
            session.prefill(prompt)

    limit = {f"{n}_threads_tokens_per_s": round(_bare_rate(sessions["fixed-1"], prompt, n, bare_steps), 2)
             for n in sorted({1, cores})}
    scenarios: dict[str, Any] = {}
    outputs: dict[str, list[int]] = {}
    names = list(sessions)
    for scenario, busy in (("idle", 0), ("busy-1", 1), ("busy-all", cores)):
        procs = _start_load(load, busy, load_seconds, path) if busy else []
        try:
            others = runtime._others_running()
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
            for r in range(rounds):
                for name in names[r % len(names):] + names[: r % len(names)]:
                    result = _decode(sessions[name], prompt, tokens)
                    outputs.setdefault(name, result.pop("tokens"))
                    runs[name].append(result)
                    typer.echo(f"{scenario:9s} {name:10s} {result['ms_per_token']:8.1f} ms/token "
                               f"(threads at end {result['threads_at_end']})")
        finally:
            _stop_load(procs)
        ms = {name: statistics.median(run["ms_per_token"] for run in runs[name]) for name in names}
        scenarios[scenario] = {
            "busy_processes": busy,
            "load_reading": {"others_runnable": others, "free_threads": free_cores(cores)},
            "ms_per_token": {name: round(value, 1) for name, value in ms.items()},
            "ratio_to_fixed_1": {name: round(value / ms["fixed-1"], 2) for name, value in ms.items()},
            "runs": runs,
        }
    same = len({tuple(v) for v in outputs.values()}) == 1
    result = {
        "date": date.today().isoformat(), "model": model, "weights": path.name,
        "llama_cpp_python": metadata.version("llama-cpp-python"), "cpu": platform.processor(),
        "machine": platform.machine(), "cores": cores, "load": load, "tokens": tokens, "rounds": rounds,
        "prompt_tokens": len(prompt), "bare_llama_cpp_loop": limit, "scenarios": scenarios,
        "identical_outputs": same,
        "command": f"nice -n 10 .venv/bin/python benchmarks/bench_threads.py --model {model} --tokens {tokens} "
                   f"--rounds {rounds} --load {load}",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"threads-{model}-{load}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    typer.echo(json.dumps({k: v for k, v in result.items() if k != "scenarios"}, indent=2))
    typer.echo(json.dumps({k: {x: v[x] for x in ("ms_per_token", "ratio_to_fixed_1", "load_reading")}
                           for k, v in scenarios.items()}, indent=2))
    clear_sessions()


if __name__ == "__main__":
    app()
