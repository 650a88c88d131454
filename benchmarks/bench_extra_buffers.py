"""Speed of llama.cpp's extra weight buffer types (``use_extra_bufts``) on and off, side by side in one run.

    nice -n 10 .venv/bin/python benchmarks/bench_extra_buffers.py --model qwen2.5-coder-0.5b --rows 3

Both settings are loaded in the same process (two copies of the model: with and without llama.cpp's repacked
extra buffers). For each bundled demo row, in alternating order (off-on, then on-off), it times:

* **extraction**: one ``ChatLocalLlama.invoke`` on prompt A for the row's output, after a warm-up call so the
  few-shot prefix is already in the KV cache (the steady state of a batch);
* **judging**: ``LocalJudgeScorer.check`` of the row's output sentences against its context, from an empty KV
  cache.

Reported per setting: total seconds, tokens evaluated / generated, and the ratio on ÷ off (below 1: the extra
buffers are faster). Whether both settings produced the same text and the same judge probabilities is reported
too. Writes ``benchmarks/results/extra-buffers-<model>.json``. The CPU model and flags come from
``/proc/cpuinfo`` (:func:`grapheval_plugins.local.cpu.cpu_features`).
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
from datetime import date
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from grapheval_plugins.extract.prompts import KG_PROMPT  # noqa: E402
from grapheval_plugins.local.chat import ChatLocalLlama  # noqa: E402
from grapheval_plugins.local.cpu import cpu_features  # noqa: E402
from grapheval_plugins.local.judge import LocalJudgeScorer  # noqa: E402
from grapheval_plugins.local.llamacpp import llama_cpp_version  # noqa: E402
from grapheval_plugins.local.weights import resolve_model_path  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
app = typer.Typer(add_completion=False)


def _rows(n: int) -> list[dict[str, Any]]:
    text = files("grapheval_plugins").joinpath("data", "demo.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()][:n]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


@app.command()
def main(
    model: Annotated[str, typer.Option(help="Local model name.")] = "qwen2.5-coder-0.5b",
    rows: Annotated[int, typer.Option(help="Demo rows to time (each: one extraction, one judging).")] = 3,
    max_tokens: Annotated[int, typer.Option(help="Most tokens generated per extraction.")] = 160,
    threads: Annotated[int, typer.Option(help="CPU threads (0: all available).")] = 0,
) -> None:
    path = resolve_model_path(model, hub=False, show_progress=False)
    data = _rows(rows)
    settings = {"off": False, "on": True}
    llms: dict[str, ChatLocalLlama] = {}
    judges: dict[str, LocalJudgeScorer] = {}
    load_s: dict[str, float] = {}
    for name, enabled in settings.items():
        started = time.perf_counter()
        llms[name] = ChatLocalLlama(model=str(path), max_tokens=max_tokens, n_threads=threads or None,
                                    extra_buffers=enabled).load()
        judges[name] = LocalJudgeScorer(str(path), n_threads=threads or None, extra_buffers=enabled).load()
        load_s[name] = round(time.perf_counter() - started, 2)
        # warm-up: prompt A's prefix into the chat KV cache, first judge call
        llms[name].invoke(KG_PROMPT.messages("Paris is the capital of France."), max_tokens=4)

    totals = {n: {"extraction_s": 0.0, "judging_s": 0.0, "generated": 0, "evaluated": 0, "claims": 0}
              for n in settings}
    texts: dict[str, list[str]] = {n: [] for n in settings}
    probs: dict[str, list[float]] = {n: [] for n in settings}
    for index, row in enumerate(data):
        order = list(settings) if index % 2 == 0 else list(reversed(settings))
        for name in order:
            started = time.perf_counter()
            answer = llms[name].invoke(KG_PROMPT.messages(row["output"]))
            totals[name]["extraction_s"] += time.perf_counter() - started
            usage = answer.usage_metadata or {}
            totals[name]["generated"] += int(usage.get("output_tokens", 0))
            totals[name]["evaluated"] += int(answer.response_metadata.get("prompt_tokens_evaluated", 0))
            texts[name].append(str(answer.content))
        claims = _sentences(row["output"])
        for name in order:
            judges[name].session.reset()
            started = time.perf_counter()
            scores = judges[name].check([row["context"]] * len(claims), claims)
            totals[name]["judging_s"] += time.perf_counter() - started
            totals[name]["claims"] += len(claims)
            probs[name] += [round(s.p_unsupported, 4) for s in scores]

    cpu = cpu_features()
    result = {
        "date": date.today().isoformat(),
        "command": f"python benchmarks/bench_extra_buffers.py --model {model} --rows {rows} --max-tokens {max_tokens}"
                   + (f" --threads {threads}" if threads else ""),
        "cpu": cpu.model, "cpu_features": cpu.summary(), "machine": platform.machine(),
        "threads": llms["off"].session.n_threads, "llama_cpp_python": llama_cpp_version(), "model": model,
        "rows": len(data), "load_s": load_s,
        "totals": {n: {k: round(v, 3) if isinstance(v, float) else v for k, v in t.items()} for n, t in totals.items()},
        "ratio_on_over_off": {
            "extraction": round(totals["on"]["extraction_s"] / totals["off"]["extraction_s"], 3),
            "judging": round(totals["on"]["judging_s"] / totals["off"]["judging_s"], 3),
        },
        "same_extraction_text": texts["on"] == texts["off"],
        "max_judge_probability_difference": max(
            (abs(a - b) for a, b in zip(probs["on"], probs["off"])), default=0.0
        ),
    }
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"extra-buffers-{model}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    typer.echo(json.dumps(result, indent=2))
    typer.echo(f"written to {out}")


if __name__ == "__main__":
    app()
