"""Prompt-lookup decoding on and off for the extraction of dev-set outputs, side by side in one run.

    nice -n 10 .venv/bin/python benchmarks/bench_prompt_lookup.py --model qwen2.5-coder-0.5b --rows 6 --threads 1

For each of the first ``--rows`` outputs of the dev set (``qags_c.jsonl``), one session generates the extraction
answer (prompt A, greedy, up to ``--max-tokens``) with prompt lookup off and with each ``--variants`` setting
(``max_ngram:draft_tokens[:min_ngram]``), in rotating order. Every run starts from the same KV-cache state (the
cache is reset and the prompt evaluated before the timed call), so the answers are compared under the same
prompt evaluation. Reported per setting: generated tokens, decode steps, drafted / accepted tokens, seconds per row
(decode only), the ratio to off, and whether every answer is byte-identical to off's.

It also times one batched evaluation of ``k`` tokens with every token's logits (``k`` = 1 … 11), which is what a
verification step costs, and the decode rate of a bare llama.cpp loop (the physical limit). Writes
``benchmarks/results/prompt-lookup-<model>.json``.
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import time
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness as bench  # noqa: E402

from grapheval_plugins.extract.prompts import KG_PROMPT  # noqa: E402
from grapheval_plugins.local.chat import ChatLocalLlama  # noqa: E402
from grapheval_plugins.local.cpu import cpu_features  # noqa: E402
from grapheval_plugins.local.llamacpp import eval_logits, llama_cpp_version  # noqa: E402
from grapheval_plugins.local.runtime import LlamaSession  # noqa: E402
from grapheval_plugins.local.weights import resolve_model_path  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
DEV_SET = "qags_c"  # the first rows of this set (found as harness.load_dataset finds it)
app = typer.Typer(add_completion=False)


def _variant(spec: str) -> tuple[int, int, int]:
    parts = [int(p) for p in spec.split(":")]
    if len(parts) not in (2, 3) or min(parts) < 1:
        raise typer.BadParameter(f"variant {spec!r}: expected max_ngram:draft_tokens[:min_ngram]")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else 1


def _run(session: LlamaSession, prompt: list[int], max_tokens: int, variant: tuple[int, int, int] | None) -> dict[str, Any]:
    with session.lock:
        session.reset()
        session.prefill(prompt)  # the same cache state for every setting: the prompt evaluated from scratch
        if variant is not None:
            session.lookup_ngram, session.lookup_tokens, session.lookup_min_ngram = variant
        session.reset_stats()
        started = time.perf_counter()
        tokens = list(session.generate(prompt, max_tokens=max_tokens, prompt_lookup=variant is not None))
        wall = time.perf_counter() - started
        stats = session.stats
    return {"tokens": tokens, "generated": stats.generated_tokens, "decode_steps": stats.decode_steps,
            "drafted": stats.drafted_tokens, "accepted": stats.accepted_tokens,
            "decode_s": stats.decode_seconds, "wall_s": wall}


def _batch_costs(session: LlamaSession, prompt: list[int], repeats: int) -> dict[str, float]:
    """Milliseconds of one :func:`eval_logits` of ``k`` tokens after the prompt, for ``k`` = 1 … 11."""
    costs: dict[str, float] = {}
    with session.lock:
        session.prefill(prompt)
        llama, base = session.llama, len(prompt)
        for k in (1, 2, 3, 4, 6, 8, 11):
            times = []
            for _ in range(repeats):
                llama.n_tokens = base
                started = time.perf_counter()
                eval_logits(llama, prompt[-k:])
                times.append(time.perf_counter() - started)
            costs[str(k)] = round(1000 * statistics.median(times), 1)
        llama.n_tokens = base
    return costs


def _bare_rate(session: LlamaSession, prompt: list[int], steps: int) -> float:
    with session.lock:
        session.prefill(prompt)
        llama, token = session.llama, prompt[-1]
        started = time.perf_counter()
        for _ in range(steps):
            llama.eval([token])
        return steps / (time.perf_counter() - started)


@app.command()
def main(
    model: Annotated[str, typer.Option(help="Local model name.")] = "qwen2.5-coder-0.5b",
    rows: Annotated[int, typer.Option(help="Dev-set outputs to extract.")] = 6,
    max_tokens: Annotated[int, typer.Option(help="Most tokens generated per extraction.")] = 512,
    threads: Annotated[int, typer.Option(help="CPU threads, fixed for stable timings (0: all available).")] = 1,
    variants: Annotated[str, typer.Option(help="Comma-separated max_ngram:draft_tokens[:min_ngram].")] = "3:10",
    repeats: Annotated[int, typer.Option(help="Repeats of each batch-cost timing.")] = 3,
    extra_buffers: Annotated[bool, typer.Option(help="Let llama.cpp repack the weights (extra buffer types).")] = False,
    tag: Annotated[str, typer.Option(help="Appended to the result file's name.")] = "",
) -> None:
    settings: dict[str, tuple[int, int, int] | None] = {"off": None}
    settings.update({f"on-{spec}": _variant(spec) for spec in variants.split(",") if spec})
    path = resolve_model_path(model, hub=False, show_progress=False)
    session = LlamaSession(path, n_threads=threads or None, extra_buffers=extra_buffers)
    llm = ChatLocalLlama.from_session(session, model=model)
    lines = bench.load_dataset(DEV_SET)[:rows]
    prompts = [llm.prompt_tokens(KG_PROMPT.messages(row["output"])) for row in lines]

    names = list(settings)
    per_row: list[dict[str, Any]] = []
    for i, prompt in enumerate(prompts):
        order = names[i % len(names):] + names[: i % len(names)]
        results = {name: _run(session, prompt, max_tokens, settings[name]) for name in order}
        reference = results["off"]["tokens"]
        row: dict[str, Any] = {"id": lines[i]["id"], "prompt_tokens": len(prompt)}
        for name in names:
            result = results[name]
            result["identical"] = result.pop("tokens") == reference
            row[name] = result
        per_row.append(row)
        typer.echo(f"{row['id']}: " + "  ".join(
            f"{n} {row[n]['generated']} tok {row[n]['decode_steps']} steps {row[n]['decode_s']:.2f} s"
            + ("" if n == "off" else f" same={row[n]['identical']}") for n in names))

    summary: dict[str, Any] = {}
    for name in names:
        seconds = sum(r[name]["decode_s"] for r in per_row)
        summary[name] = {
            "tokens": sum(r[name]["generated"] for r in per_row),
            "decode_steps": sum(r[name]["decode_steps"] for r in per_row),
            "drafted": sum(r[name]["drafted"] for r in per_row),
            "accepted": sum(r[name]["accepted"] for r in per_row),
            "s_per_row": round(seconds / len(per_row), 2),
            "identical_rows": sum(bool(r[name]["identical"]) for r in per_row),
        }
    off_s = summary["off"]["s_per_row"]
    for values in summary.values():
        values["speed_ratio_vs_off"] = round(off_s / values["s_per_row"], 2) if values["s_per_row"] else None
    cpu = cpu_features()
    result = {
        "date": date.today().isoformat(), "model": model, "weights": path.name,
        "llama_cpp_python": llama_cpp_version(), "cpu": cpu.model, "cpu_features": cpu.summary(),
        "machine": platform.machine(), "threads": session.n_threads, "extra_buffers": extra_buffers,
        "rows": len(per_row), "max_tokens": max_tokens,
        "summary": summary,
        "batch_eval_ms": _batch_costs(session, prompts[0], repeats),
        "bare_llama_cpp_loop_tokens_per_s": round(_bare_rate(session, prompts[0], 40), 2),
        "per_row": per_row,
        "command": f"nice -n 10 .venv/bin/python benchmarks/bench_prompt_lookup.py --model {model} --rows {rows} "
                   f"--threads {threads} --variants {variants}" + (" --extra-buffers" if extra_buffers else "")
                   + (f" --tag {tag}" if tag else ""),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"prompt-lookup-{model}{'-' + tag if tag else ''}.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    typer.echo(json.dumps({k: v for k, v in result.items() if k != "per_row"}, indent=2))


if __name__ == "__main__":
    app()
