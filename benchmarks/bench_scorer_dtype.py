"""The HF scorers on CPU in float32, under bfloat16 autocast, and with bfloat16 weights, side by side in one run.

    nice -n 10 .venv/bin/python benchmarks/bench_scorer_dtype.py --pairs 200 --models hhem,deberta

The models are ``benchmarks/scorer_throughput.py``'s: random weights of the real architectures (HHEM-2.1-Open at
flan-t5-base sizes, an MNLI DeBERTa-v3 cross-encoder) with the real tokenizers: no real NLI / hallucination
cross-encoder is installable offline, so the differences below measure how bfloat16 arithmetic moves these
architectures' outputs, not the verdicts of the trained checkpoints. For each model, one scorer loaded in float32
scores the same ``--pairs`` QAGS-C (context, claim) pairs three ways, in the order f32, autocast, bf16 and then in
reverse (times summed):

* ``float32``: ``Scorer.check`` as shipped on CPU;
* ``autocast-bf16``: the same float32 model inside ``torch.autocast("cpu", dtype=torch.bfloat16)``;
* ``bf16-weights``: a second scorer loaded with ``dtype="bf16"`` (the existing option).

Reported: seconds, pairs/s, speed over float32, and max / mean |Δ P(supported)| against float32. Writes
``benchmarks/results/scorer-dtype-cpu.json``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
app = typer.Typer(add_completion=False)


def _throughput_module() -> Any:
    spec = importlib.util.spec_from_file_location("scorer_throughput_for_dtype", HERE / "scorer_throughput.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def _autocast(enabled: bool) -> Iterator[None]:
    import torch

    if not enabled:
        yield
        return
    with torch.autocast("cpu", dtype=torch.bfloat16):
        yield


def _score(scorer: Any, pairs: list[tuple[str, str]], autocast: bool) -> tuple[float, list[float]]:
    started = time.perf_counter()
    with _autocast(autocast):
        scores = scorer.check([c for c, _ in pairs], [h for _, h in pairs])
    return time.perf_counter() - started, [1.0 - float(s.p_unsupported) for s in scores]


def _compare(name: str, make: Callable[[Any], Any], pairs: list[tuple[str, str]]) -> dict[str, Any]:
    import torch

    f32, bf16 = make(torch.float32), make(torch.bfloat16)
    sides = {"float32": (f32, False), "autocast-bf16": (f32, True), "bf16-weights": (bf16, False)}
    for scorer, autocast in sides.values():  # warm-up
        _score(scorer, pairs[:4], autocast)
    seconds = dict.fromkeys(sides, 0.0)
    probs: dict[str, list[float]] = {}
    for order in (list(sides), list(reversed(sides))):
        for side in order:
            took, p = _score(sides[side][0], pairs, sides[side][1])
            seconds[side] += took
            probs.setdefault(side, p)
    reference = probs["float32"]
    result: dict[str, Any] = {"model": name, "pairs": len(pairs), "sides": {}}
    for side in sides:
        deltas = [abs(a - b) for a, b in zip(probs[side], reference)]
        result["sides"][side] = {
            "seconds": round(seconds[side], 2), "pairs_per_s": round(2 * len(pairs) / seconds[side], 2),
            "speed_vs_float32": round(seconds["float32"] / seconds[side], 2),
            "max_abs_delta_p_supported": round(max(deltas), 4), "mean_abs_delta_p_supported": round(sum(deltas) / len(deltas), 4),
        }
    result["p_supported_float32_range"] = [round(min(reference), 4), round(max(reference), 4)]
    typer.echo(json.dumps(result))
    return result


@app.command()
def main(
    pairs: Annotated[int, typer.Option(help="(context, claim) pairs per model.")] = 200,
    models: Annotated[str, typer.Option(help="Comma-separated: hhem, deberta.")] = "hhem,deberta",
    deberta: Annotated[str, typer.Option(help="DeBERTa-v3 sizes: base or xsmall.")] = "base",
    batch_size: Annotated[int, typer.Option(help="The scorers' batch size.")] = 16,
) -> None:
    import torch
    import transformers

    from grapheval_plugins.check.hf import CrossEncoderNLIScorer, HHEMScorer
    from grapheval_plugins.local.cpu import cpu_features

    st = _throughput_module()
    data, note = st.load_pairs(pairs)
    wanted = {m.strip() for m in models.split(",") if m.strip()}
    results = []
    with tempfile.TemporaryDirectory(prefix="scorer-dtype-") as tmp:
        if "hhem" in wanted:
            folder = Path(tmp) / "hhem"
            st.build_hhem(folder)
            tokenizer = st.t5_tokenizer()
            results.append(_compare(
                "HHEM-2.1-Open (flan-t5-base sizes, random weights)",
                lambda dtype: HHEMScorer(folder, tokenizer=tokenizer, device="cpu", dtype=dtype,
                                         batch_size=batch_size).load(),
                data,
            ))
        if "deberta" in wanted:
            folder = Path(tmp) / "deberta"
            st.build_deberta(folder, deberta)
            results.append(_compare(
                f"DeBERTa-v3-{deberta} MNLI cross-encoder (random weights)",
                lambda dtype: CrossEncoderNLIScorer(folder, tokenizer=st.deberta_tokenizer(), device="cpu",
                                                    dtype=dtype, batch_size=batch_size).load(),
                data,
            ))
    cpu = cpu_features()
    info = {
        "date": date.today().isoformat(), "cpu": cpu.model, "cpu_features": cpu.summary(),
        "machine": platform.machine(), "torch": torch.__version__, "transformers": transformers.__version__,
        "torch_threads": torch.get_num_threads(), "data": note, "batch_size": batch_size, "results": results,
        "command": f"nice -n 10 .venv/bin/python benchmarks/bench_scorer_dtype.py --pairs {pairs} --models {models}"
                   f" --deberta {deberta}",
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scorer-dtype-cpu.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    app()
