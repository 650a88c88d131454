"""benchmarks/scorer_throughput.py compares like with like: on the same random model, our scorer path and the
reference paths (Ragas's HHEM procedure, sentence-transformers' CrossEncoder.predict) give the same scores for pairs
that fit one window. Tiny layer counts; the real tokenizers from ``../shared/models/tokenizers``."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("sentencepiece")


def _load() -> object:
    spec = importlib.util.spec_from_file_location("scorer_throughput", ROOT / "benchmarks" / "scorer_throughput.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["scorer_throughput"] = module
    spec.loader.exec_module(module)
    return module


st = _load()


@pytest.fixture
def real_tokenizers() -> None:
    """The real tokenizer files (../shared/models/tokenizers): missing, the test fails under CI, else it skips."""
    from shared_files import require

    for name in ("t5/tokenizer.json", "t5/spiece.model", "deberta-v3/spm.model"):
        require(st.TOKENIZERS / name)  # type: ignore[attr-defined]


PAIRS = [
    ("The council voted 7 to 2 on Tuesday to build a new library on Elm Street.", "The council voted 7 to 2."),
    ("The council voted 7 to 2 on Tuesday to build a new library on Elm Street.", "A stadium will be built."),
    ("Marie Curie was born in Warsaw.", "Marie Curie was born in Paris in the year 1870, the records say."),
]


def test_pairs_come_from_qags_c_with_kg_triples_or_sentences(tmp_path: Path) -> None:
    data = tmp_path / "d.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in [
        {"id": "a", "context": "ctx a", "output": "First one here. Second one here.", "label": 0},
        {"id": "b", "context": "ctx b", "output": "Out b.", "label": 1},
    ]), encoding="utf-8")
    kg = tmp_path / "kg.jsonl"
    kg.write_text("\n".join(json.dumps(r) for r in [
        {"text": "Out b.", "prompt": "other", "triples": [["x", "y", "z"]]},
        {"text": "Out b.", "prompt": st.KG_PROMPT_VERSION, "triples": [["B", "is", "out"], ["B", "has", "two"]]},  # type: ignore[attr-defined]
    ]), encoding="utf-8")
    pairs, note = st.load_pairs(3, data, kg)  # type: ignore[attr-defined]
    assert pairs == [("ctx a", "First one here."), ("ctx a", "Second one here."), ("ctx b", "B is out")]
    assert "3 pairs over 2 contexts" in note and "1 KG triples, 2 output sentences" in note


@pytest.mark.usefixtures("real_tokenizers")
def test_ragas_hhem_procedure_matches_our_hhem_scorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    from grapheval_plugins.check.hf import HHEMScorer

    monkeypatch.setitem(st.FLAN_T5_BASE, "num_layers", 2)  # type: ignore[attr-defined]
    monkeypatch.setitem(st.FLAN_T5_BASE, "d_model", 64)  # type: ignore[attr-defined]
    monkeypatch.setitem(st.FLAN_T5_BASE, "d_ff", 128)  # type: ignore[attr-defined]
    monkeypatch.setitem(st.FLAN_T5_BASE, "num_heads", 4)  # type: ignore[attr-defined]
    monkeypatch.setitem(st.FLAN_T5_BASE, "d_kv", 16)  # type: ignore[attr-defined]
    st.build_hhem(tmp_path / "hhem")  # type: ignore[attr-defined]
    tokenizer = st.t5_tokenizer()  # type: ignore[attr-defined]
    scorer = HHEMScorer(tmp_path / "hhem", tokenizer=tokenizer, device="cpu", batch_size=2)
    ours = scorer.predict_support(PAIRS)
    assert scorer.prompt == st.HHEM_PROMPT.replace("{text1}", "{premise}").replace("{text2}", "{hypothesis}")  # type: ignore[attr-defined]
    model = scorer.model
    with torch.no_grad():
        inputs = tokenizer([st.HHEM_PROMPT.format(text1=p, text2=h) for p, h in PAIRS],  # type: ignore[attr-defined]
                           return_tensors="pt", padding=True)
        theirs = torch.softmax(model(**inputs).logits[:, 0, :], dim=-1)[:, 1].tolist()
    assert ours == pytest.approx(theirs, abs=1e-5)
    rounded = st.ragas_hhem_predict(model, tokenizer, [([p], h) for p, h in PAIRS], torch.device("cpu"))  # type: ignore[attr-defined]
    assert rounded == [round(t) for t in theirs]


@pytest.mark.usefixtures("real_tokenizers")
def test_cross_encoder_predict_matches_our_nli_scorer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("sentence_transformers")
    from sentence_transformers import CrossEncoder

    from grapheval_plugins.check.hf import CrossEncoderNLIScorer

    monkeypatch.setitem(st.DEBERTA_V3, "tiny", {  # type: ignore[attr-defined]
        "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64})
    st.build_deberta(tmp_path / "nli", "tiny")  # type: ignore[attr-defined]
    ours = CrossEncoderNLIScorer(tmp_path / "nli", tokenizer=st.deberta_tokenizer(), device="cpu").predict_support(PAIRS)  # type: ignore[attr-defined]
    cross = CrossEncoder(str(tmp_path / "nli"), device="cpu", max_length=512)
    theirs = cross.predict(PAIRS, apply_softmax=True, show_progress_bar=False)[:, 1].tolist()  # label 1: entailment
    assert ours == pytest.approx(theirs, abs=1e-5)
