"""The HF scorers pass ``model_kwargs`` / ``tokenizer_kwargs`` through, as sentence-transformers' ``CrossEncoder``
does (dtype, attention implementation), on tiny models built offline; there is no automatic precision."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import hf_models as H  # noqa: E402

from grapheval_plugins.check import hf  # noqa: E402

_one_thread = pytest.fixture(autouse=True, scope="module")(H.one_torch_thread)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kwargs")
    foundation = H.save_foundation(root / "flan-t5-tiny", H.t5_tokenizer())
    bert_tok = H.bert_tokenizer()
    return {
        "nli": H.save_with_tokenizer(root / "bert", H.bert_classifier({0: "entailment", 1: "neutral",
                                                                         2: "contradiction"}), bert_tok),
        "hhem": H.save_hhem(root / "hhem", H.hhem_reference_model(foundation), foundation),
    }


def test_the_default_on_a_cpu_is_float32_whatever_the_cpu(dirs: dict[str, Path]) -> None:
    scorer = hf.CrossEncoderNLIScorer(dirs["nli"], device="cpu").load()
    assert all(p.dtype == torch.float32 for p in scorer.model.parameters())


def test_model_kwargs_reach_the_model_and_their_dtype_is_the_dtype(dirs: dict[str, Path]) -> None:
    scorer = hf.CrossEncoderNLIScorer(dirs["nli"], device="cpu",
                                      model_kwargs={"dtype": torch.bfloat16, "attn_implementation": "eager"}).load()
    assert {p.dtype for p in scorer.model.parameters()} == {torch.bfloat16}
    assert scorer.model.config._attn_implementation == "eager"
    plain = hf.CrossEncoderNLIScorer(dirs["nli"], device="cpu")
    assert scorer.fingerprint() != plain.fingerprint()  # bfloat16 scores are not served as float32 ones
    [p] = scorer.predict_support(H.PAIRS[:1])
    assert 0.0 <= p <= 1.0


def test_hhem_sets_model_kwargs_on_its_t5_config(dirs: dict[str, Path]) -> None:
    scorer = hf.HHEMScorer(dirs["hhem"], device="cpu", model_kwargs={"dropout_rate": 0.25}).load()
    assert scorer.model.config.dropout_rate == 0.25


def test_tokenizer_kwargs_reach_the_tokenizer(dirs: dict[str, Path]) -> None:
    scorer = hf.CrossEncoderNLIScorer(dirs["nli"], device="cpu", tokenizer_kwargs={"model_max_length": 300})
    assert scorer.tokenizer.model_max_length == 300
