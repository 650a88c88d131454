"""Scorer throughput: pairs per second of our HF scorer path against the way other tools run the same models.

    nice -n 0 .venv/bin/python benchmarks/scorer_throughput.py --pairs 500
    .venv/bin/python benchmarks/scorer_throughput.py --pairs 40 --deberta xsmall     # a quick look

Throughput does not depend on the weights' values, so both models are built with **random weights** of the real
architectures and loaded with the **real tokenizers** (``shared/models/tokenizers``):

* **HHEM-2.1-Open**: a ``T5ForTokenClassification`` with google/flan-t5-base's published sizes (d_model 768,
  d_ff 2048, 12 layers, 12 heads, d_kv 64, gated-gelu, vocabulary 32128), saved in HHEM's checkpoint layout
  (``t5.``-prefixed state dict, ``config.json`` with ``t5_config`` and ``prompt``) and loaded by ``HHEMScorer``.
  Compared with Ragas's ``FaithfulnesswithHHEM``, replicated on the same model object: HHEM's own ``predict``
  (its remote code: the prompt, ``padding=True``, no truncation, softmax of the first position) over the pairs in
  their order, 10 at a time, each premise the retrieved contexts joined with ``"\\n"``.
* **An MNLI DeBERTa-v3 cross-encoder** (``DebertaV2ForSequenceClassification``, deberta-v3-base sizes by default:
  hidden 768, 12 layers, 12 heads, intermediate 3072, vocabulary 128100, relative attention with 256 position
  buckets; ``--deberta xsmall``: hidden 384, 12 layers, 6 heads, intermediate 1536), loaded by
  ``CrossEncoderNLIScorer``; compared with sentence-transformers' ``CrossEncoder.predict`` on the same folder.

Ours is the public path users get: ``Scorer.check(contexts, claims)`` (contexts chunked to the model's window,
pairs sorted by length into batches of ``batch_size``). Each comparison runs in one process, on the same pairs,
in an ABBA order (first half: ours then theirs; second half: theirs then ours) so that a change of machine load
affects both sides alike. Reported: pairs/s per side and ours ÷ theirs.

Pairs: QAGS-C rows in file order; each output's claims are its knowledge-graph triples read as sentences (from
``benchmarks/results/kg-local-qwen2.5-coder-1.5b.jsonl``) or, for outputs without triples, its sentences.

Device: chosen automatically (cuda → mps → cpu); on a GPU every side runs in the same half precision (bfloat16 where
supported, else float16; T5 stays in float32 rather than float16). Writes
``benchmarks/results/scorer-throughput-<device>.json``.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Any

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
SHARED = Path(os.environ.get("GRAPHEVAL_SHARED", ROOT.parent / "shared"))
TOKENIZERS = SHARED / "models" / "tokenizers"
DATASET = SHARED / "data" / "benchmarks" / "qags_c.jsonl"
KG_FILE = RESULTS / "kg-local-qwen2.5-coder-1.5b.jsonl"
KG_PROMPT_VERSION = "kg-a/1-examples-first"
"""The knowledge graphs used: those of the shipped extraction prompt (the file also holds other prompts' runs)."""

HHEM_PROMPT = "<pad> Determine if the hypothesis is true given the premise?\n\nPremise: {text1}\n\nHypothesis: {text2}"
"""HHEM-2.1-Open's ``config.prompt`` (its remote code formats it with ``text1`` = premise, ``text2`` = hypothesis)."""
RAGAS_HHEM_BATCH = 10
"""``FaithfulnesswithHHEM.batch_size`` in Ragas."""

# google/flan-t5-base's config.json (the published sizes; HHEM-2.1-Open's foundation).
FLAN_T5_BASE = {
    "d_model": 768, "d_ff": 2048, "d_kv": 64, "num_heads": 12, "num_layers": 12, "num_decoder_layers": 12,
    "feed_forward_proj": "gated-gelu", "vocab_size": 32128, "relative_attention_num_buckets": 32,
    "relative_attention_max_distance": 128, "layer_norm_epsilon": 1e-6, "dropout_rate": 0.1,
    "tie_word_embeddings": False, "pad_token_id": 0, "eos_token_id": 1, "decoder_start_token_id": 0,
}
# microsoft/deberta-v3-base (and cross-encoder/nli-deberta-v3-base) / deberta-v3-xsmall config.json sizes.
DEBERTA_V3 = {
    "base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072},
    "xsmall": {"hidden_size": 384, "num_hidden_layers": 12, "num_attention_heads": 6, "intermediate_size": 1536},
}
DEBERTA_COMMON = {
    "vocab_size": 128100, "max_position_embeddings": 512, "relative_attention": True, "position_buckets": 256,
    "norm_rel_ebd": "layer_norm", "share_att_key": True, "pos_att_type": ["p2c", "c2p"],
    "position_biased_input": False, "type_vocab_size": 0, "layer_norm_eps": 1e-7, "max_relative_positions": -1,
    "hidden_act": "gelu", "pad_token_id": 0,
    "id2label": {0: "contradiction", 1: "entailment", 2: "neutral"},
    "label2id": {"contradiction": 0, "entailment": 1, "neutral": 2},
}

app = typer.Typer(add_completion=False)


# --------------------------------------------------------------------------- data
def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.strip().split()) >= 3]


def load_pairs(limit: int, dataset: Path = DATASET, kg_file: Path = KG_FILE) -> tuple[list[tuple[str, str]], str]:
    """``limit`` (context, claim) pairs of QAGS-C in file order, and how the claims were made."""
    kg: dict[str, list[list[str]]] = {}
    if kg_file.is_file():
        for line in kg_file.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            if row.get("triples") and row.get("prompt") == KG_PROMPT_VERSION:
                kg.setdefault(row["text"], row["triples"])
    pairs: list[tuple[str, str, str]] = []
    for line in dataset.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        triples = kg.get(row["output"]) or []
        claims = [" ".join(t) for t in triples if isinstance(t, list) and len(t) == 3]
        kind = "kg"
        if not claims:
            claims, kind = _sentences(row["output"]) or [row["output"]], "sentence"
        pairs.extend((row["context"], claim, kind) for claim in claims)
        if len(pairs) >= limit:
            break
    pairs = pairs[:limit]
    from_kg = sum(kind == "kg" for _, _, kind in pairs)
    contexts = len({c for c, _, _ in pairs})
    note = (f"{dataset.name}: {len(pairs)} pairs over {contexts} contexts (claims: {from_kg} KG triples, "
            f"{len(pairs) - from_kg} output sentences)")
    return [(c, h) for c, h, _ in pairs], note


# --------------------------------------------------------------------------- models
def device_and_dtype() -> tuple[Any, Any, Any]:
    """(device, dtype for T5, dtype for DeBERTa): half precision on a GPU, float32 on cpu."""
    from grapheval_plugins.check._runtime import resolve_dtype, select_device

    device = select_device(None)
    return device, resolve_dtype(None, device, allow_fp16=False), resolve_dtype(None, device, allow_fp16=True)


def build_hhem(folder: Path) -> None:
    """A random-weight HHEM-2.1-Open checkpoint (flan-t5-base sizes) in HHEM's own layout."""
    import torch
    from safetensors.torch import save_file
    from transformers import T5Config, T5ForTokenClassification

    torch.manual_seed(0)
    config = T5Config(**FLAN_T5_BASE, num_labels=2)
    model = T5ForTokenClassification(config)
    state = {f"t5.{k}": v.contiguous() for k, v in model.state_dict().items() if "embed_tokens" not in k}
    folder.mkdir(parents=True, exist_ok=True)
    save_file(state, str(folder / "model.safetensors"))
    t5_config = {k: v for k, v in config.to_dict().items() if k not in ("id2label", "label2id")}
    (folder / "config.json").write_text(json.dumps({
        "architectures": ["HHEMv2ForSequenceClassification"], "model_type": "HHEMv2",
        "foundation": "google/flan-t5-base", "prompt": HHEM_PROMPT, "t5_config": t5_config,
    }), encoding="utf-8")


def t5_tokenizer() -> Any:
    from transformers import T5TokenizerFast

    folder = TOKENIZERS / "t5"
    return T5TokenizerFast(vocab_file=str(folder / "spiece.model"), tokenizer_file=str(folder / "tokenizer.json"))


def deberta_tokenizer() -> Any:
    from transformers import DebertaV2Tokenizer

    return DebertaV2Tokenizer(vocab_file=str(TOKENIZERS / "deberta-v3" / "spm.model"), model_max_length=512)


def build_deberta(folder: Path, size: str) -> None:
    """A random-weight MNLI DeBERTa-v3 cross-encoder folder (config, weights, slow tokenizer)."""
    import torch
    from transformers import DebertaV2Config, DebertaV2ForSequenceClassification

    torch.manual_seed(0)
    config = DebertaV2Config(**DEBERTA_COMMON, **DEBERTA_V3[size])
    DebertaV2ForSequenceClassification(config).save_pretrained(folder)
    deberta_tokenizer().save_pretrained(folder)


# --------------------------------------------------------------------------- the sides
def ragas_hhem_predict(model: Any, tokenizer: Any, pairs: list[tuple[list[str], str]], device: Any) -> list[float]:
    """Ragas's ``FaithfulnesswithHHEM`` over HHEM's ``predict``: batches of 10 in input order, contexts joined."""
    import torch

    scores: list[float] = []
    for start in range(0, len(pairs), RAGAS_HHEM_BATCH):
        batch = pairs[start : start + RAGAS_HHEM_BATCH]
        # Ragas: pairs = [(premise, statement) ...] with premise = "\n".join(retrieved_contexts)
        text_pairs = [("\n".join(contexts), statement) for contexts, statement in batch]
        # HHEM's predict (its remote code, modeling_hhem_v2.py):
        pair_dict = [{"text1": p[0], "text2": p[1]} for p in text_pairs]
        inputs = tokenizer([HHEM_PROMPT.format(**p) for p in pair_dict], return_tensors="pt", padding=True).to(device)
        model.eval()
        with torch.no_grad():
            outputs = model(**inputs)
        logits = outputs.logits[:, 0, :]
        # Ragas: batch_scores = self.nli_classifier.predict(input_pairs).cpu().detach().round()
        scores.extend(torch.softmax(logits.float(), dim=-1)[:, 1].cpu().detach().round().tolist())
    return scores


def _timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def compare(name: str, ours: Any, theirs: Any, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """ABBA timing of two callables over ``pairs``; each callable takes a list of pairs."""
    warm = pairs[: min(4, len(pairs))]
    ours(warm)
    theirs(warm)
    half = len(pairs) // 2
    first, second = pairs[:half], pairs[half:]
    t_ours_1, _ = _timed(lambda: ours(first))
    t_theirs_1, _ = _timed(lambda: theirs(first))
    t_theirs_2, _ = _timed(lambda: theirs(second))
    t_ours_2, _ = _timed(lambda: ours(second))
    t_ours, t_theirs = t_ours_1 + t_ours_2, t_theirs_1 + t_theirs_2
    result = {
        "model": name, "pairs": len(pairs), "ours_s": round(t_ours, 3), "theirs_s": round(t_theirs, 3),
        "ours_pairs_per_s": round(len(pairs) / t_ours, 3), "theirs_pairs_per_s": round(len(pairs) / t_theirs, 3),
        "ratio_ours_over_theirs": round(t_theirs / t_ours, 3),
        "halves_s": {"ours": [round(t_ours_1, 3), round(t_ours_2, 3)], "theirs": [round(t_theirs_1, 3), round(t_theirs_2, 3)]},
    }
    print(json.dumps(result), flush=True)
    return result


def _model_inputs(scorer: Any, pairs: list[tuple[str, str]]) -> int:
    """How many (chunk, claim) inputs our path runs for ``pairs`` (more than the pairs when contexts are chunked)."""
    return len({(chunk, claim) for context, claim in set(pairs) for chunk in scorer.chunks(context)})


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()
    except OSError:
        return ""


@app.command()
def main(
    pairs: Annotated[int, typer.Option(help="(context, claim) pairs per model")] = 500,
    deberta: Annotated[str, typer.Option(help="DeBERTa-v3 sizes: base or xsmall")] = "base",
    batch_size: Annotated[int, typer.Option(help="our scorers' batch size (their default)")] = 16,
    models: Annotated[str, typer.Option(help="comma-separated: hhem, deberta")] = "hhem,deberta",
    hhem_max_length: Annotated[int | None, typer.Option(
        help="HHEMScorer max_length (default: the scorer's own); a large value scores whole premises")] = None,
    out: Annotated[Path | None, typer.Option(help="result file (default benchmarks/results/...)")] = None,
) -> None:
    import torch
    import transformers

    from grapheval_plugins.check.hf import CrossEncoderNLIScorer, HHEMScorer

    if deberta not in DEBERTA_V3:
        raise typer.BadParameter(f"--deberta must be one of {sorted(DEBERTA_V3)}")
    data, data_note = load_pairs(pairs)
    device, t5_dtype, nli_dtype = device_and_dtype()
    info: dict[str, Any] = {
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "device": str(device), "cpu": _cpu_model(), "cores": os.cpu_count(), "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__, "transformers": transformers.__version__, "data": data_note,
        "dtype": {"t5": str(t5_dtype), "deberta": str(nli_dtype)}, "batch_size_ours": batch_size,
        "uptime_before": _uptime(), "results": [],
    }
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    print(json.dumps({k: v for k, v in info.items() if k != "results"}), flush=True)
    wanted = {m.strip() for m in models.split(",") if m.strip()}
    target = out or RESULTS / f"scorer-throughput-{device.type}.json"
    target.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:
        info["uptime_after"] = _uptime()
        target.write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")

    with tempfile.TemporaryDirectory(prefix="scorer-throughput-") as tmp:
        if "hhem" in wanted:
            folder = Path(tmp) / "hhem"
            build_hhem(folder)
            tokenizer = t5_tokenizer()
            extra: dict[str, Any] = {} if hhem_max_length is None else {"max_length": hhem_max_length}
            hhem = HHEMScorer(folder, tokenizer=tokenizer, device=device, dtype=t5_dtype, batch_size=batch_size,
                              **extra).load()
            model = hhem.model

            def ours_hhem(batch: list[tuple[str, str]]) -> Any:
                return hhem.check([c for c, _ in batch], [h for _, h in batch])

            def ragas_hhem(batch: list[tuple[str, str]]) -> Any:
                return ragas_hhem_predict(model, tokenizer, [([c], h) for c, h in batch], device)

            row = compare("HHEM-2.1-Open (flan-t5-base sizes, random weights)", ours_hhem, ragas_hhem, data)
            row["theirs"] = "Ragas FaithfulnesswithHHEM (HHEM predict, batches of 10, no sorting, contexts joined)"
            row["ours"] = f"HHEMScorer.check (chunked to {hhem.max_premise_tokens} premise tokens, sorted batches of {batch_size})"
            row["ours_model_inputs"] = _model_inputs(hhem, data)
            info["results"].append(row)
            save()
            del hhem, model
        if "deberta" in wanted:
            from sentence_transformers import CrossEncoder

            folder = Path(tmp) / "deberta"
            build_deberta(folder, deberta)
            nli = CrossEncoderNLIScorer(folder, tokenizer=deberta_tokenizer(), device=device, dtype=nli_dtype,
                                        batch_size=batch_size).load()
            cross = CrossEncoder(str(folder), device=str(device), max_length=512)
            cross.model.to(nli_dtype)

            def ours_nli(batch: list[tuple[str, str]]) -> Any:
                return nli.check([c for c, _ in batch], [h for _, h in batch])

            def st_predict(batch: list[tuple[str, str]]) -> Any:
                return cross.predict(batch, show_progress_bar=False)

            row = compare(f"DeBERTa-v3-{deberta} MNLI cross-encoder (random weights)", ours_nli, st_predict, data)
            import sentence_transformers

            row["theirs"] = (f"sentence-transformers {sentence_transformers.__version__} CrossEncoder.predict "
                             "(default batch_size 32, max_length 512: truncation)")
            row["ours"] = f"CrossEncoderNLIScorer.check (chunked to {nli.max_premise_tokens} premise tokens, sorted batches of {batch_size})"
            row["ours_model_inputs"] = _model_inputs(nli, data)
            info["results"].append(row)
    save()
    print(f"wrote {target}", flush=True)


if __name__ == "__main__":
    app()
