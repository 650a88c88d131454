"""The HF scorers' numeric paths (float32, bf16 autocast, dynamic int8, auto) on tiny models built offline.

The choice follows recorded CPU flags (no real CPU needed); each reduced path stays within
``MAX_DELTA_P`` of float32 on the tiny models; the automatic choice is checked at load and falls back to float32
when it moves P(supported) too much. No timing is asserted.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from grapheval_plugins.check import _precision as P  # noqa: E402
from grapheval_plugins.local.cpu import parse_cpuinfo  # noqa: E402

SAPPHIRE_RAPIDS = ("model name\t: Intel(R) Xeon(R) Platinum 8488C\nflags\t\t: avx2 avx512f avx512bw avx512_bf16 "
                   "amx_bf16 amx_tile amx_int8\n")
EPYC_GENOA = "model name\t: AMD EPYC 9R14\nflags\t\t: avx2 avx512f avx512bw avx512_vnni avx512_bf16\n"
ICELAKE = "model name\t: Intel(R) Xeon(R) Platinum 8375C\nflags\t\t: avx2 avx512f avx512bw avx512_vnni\n"
ZEN3 = "model name\t: AMD EPYC 7R13 Processor\nflags\t\t: sse2 avx avx2 fma\n"
GRAVITON = "processor\t: 0\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics\n"


def flags_of(text: str) -> frozenset[str]:
    return parse_cpuinfo(text, machine="x86_64").flags


# --------------------------------------------------------------------------- the choice (no torch)
@pytest.mark.parametrize(
    ("cpuinfo", "path"),
    [(SAPPHIRE_RAPIDS, "bf16-autocast"), (EPYC_GENOA, "bf16-autocast"), (ICELAKE, "float32"), (ZEN3, "float32"),
     (GRAVITON, "float32")],
)
def test_auto_follows_the_cpu_features(cpuinfo: str, path: str) -> None:
    choice = P.choose_precision(None, flags=flags_of(cpuinfo), env={})
    assert choice.name == path
    assert choice.guarded == (path != "float32")
    assert choice.reason.startswith("auto")
    assert P.choose_precision("auto", flags=flags_of(cpuinfo), env={}) == choice


def test_the_two_checkers_of_cpu_flags_agree() -> None:
    for text in (SAPPHIRE_RAPIDS, EPYC_GENOA, ICELAKE, ZEN3):
        assert P.read_cpu_flags(lambda t=text: t) == flags_of(text)  # type: ignore[misc]
    assert P.read_cpu_flags(lambda: None) == frozenset()


@pytest.mark.parametrize(
    ("requested", "path"),
    [("float32", "float32"), ("fp32", "float32"), ("bf16-autocast", "bf16-autocast"), ("autocast", "bf16-autocast"),
     ("int8", "int8"), ("bf16", "bfloat16"), ("fp16", "float16")],
)
def test_an_explicit_dtype_wins_over_cpu_and_environment(requested: str, path: str) -> None:
    choice = P.choose_precision(requested, flags=flags_of(SAPPHIRE_RAPIDS), env={P.PRECISION_ENV: "float32"})
    assert (choice.name, choice.guarded) == (path, False)
    assert choice.reason == f"dtype={requested!r}"


def test_the_environment_overrides_auto() -> None:
    choice = P.choose_precision(None, flags=flags_of(SAPPHIRE_RAPIDS), env={P.PRECISION_ENV: "float32"})
    assert (choice.name, choice.reason, choice.guarded) == ("float32", "GRAPHEVAL_HF_DTYPE=float32", False)
    assert P.choose_precision(None, flags=flags_of(ICELAKE), env={P.PRECISION_ENV: "int8"}).name == "int8"
    assert P.choose_precision(None, flags=flags_of(ICELAKE), env={P.PRECISION_ENV: " "}).name == "float32"
    with pytest.raises(ValueError, match="GRAPHEVAL_HF_DTYPE"):
        P.choose_precision(None, flags=set(), env={P.PRECISION_ENV: "int4"})


def test_cpu_only_paths_are_refused_on_a_gpu_and_auto_keeps_the_gpu_default() -> None:
    with pytest.raises(ValueError, match="CPU only"):
        P.choose_precision("int8", device_type="cuda", env={})
    with pytest.raises(ValueError, match="CPU only"):
        P.choose_precision("bf16-autocast", device_type="mps", env={})
    assert P.choose_precision(None, device_type="cuda", flags=set(), env={}).name == "device-default"


def test_unknown_names_and_types() -> None:
    with pytest.raises(ValueError, match="unknown dtype"):
        P.choose_precision("int3", env={})
    with pytest.raises(TypeError):
        P.choose_precision(8, env={})


# --------------------------------------------------------------------------- tiny models
torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

import hf_models as H  # noqa: E402

from grapheval_plugins.check import _hf_common, hf  # noqa: E402

PAIRS = H.PAIRS


_one_thread = pytest.fixture(autouse=True, scope="module")(H.one_torch_thread)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(P.PRECISION_ENV, raising=False)


@pytest.fixture(scope="module")
def dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("precision")
    t5_tok = H.t5_tokenizer()
    foundation = H.save_foundation(root / "flan-t5-tiny", t5_tok)
    bert_tok = H.bert_tokenizer()
    bert = spread_head(H.bert_classifier({0: "entailment", 1: "neutral", 2: "contradiction"}), bert_tok)
    return {
        "nli": H.save_with_tokenizer(root / "bert", bert, bert_tok),
        "hhem": H.save_hhem(root / "hhem", H.hhem_reference_model(foundation), foundation),
        "t5": H.save_t5_seq2seq(root / "t5", t5_tok)[0],
    }


def spread_head(model, tokenizer):  # type: ignore[no-untyped-def]
    """The classifier re-aimed at the direction the pooled outputs of PAIRS vary most along, scaled so that the
    entailment logit spreads by a few units: P(supported) over 0…1, where rounding moves it most (a random tiny
    BERT's pooled outputs barely differ between inputs, so its own head gives ~1/3 for everything)."""
    with torch.no_grad():
        enc = tokenizer([p for p, _ in PAIRS], [h for _, h in PAIRS], padding=True, return_tensors="pt")
        pooled = model.bert(**enc).pooler_output
        centered = pooled - pooled.mean(dim=0)
        direction = centered[int(centered.norm(dim=1).argmax())]
        margins = centered @ direction
        model.classifier.weight.zero_()
        scale = 3.0 / float(margins.std())
        model.classifier.weight[0] = direction * scale
        model.classifier.bias.zero_()
        model.classifier.bias[0] = -float(pooled.mean(dim=0) @ direction) * scale
    return model


def make(kind: str, folder: Path, dtype: object) -> hf.HFScorer:
    cls: type[hf.HFScorer] = {"nli": hf.CrossEncoderNLIScorer, "hhem": hf.HHEMScorer, "t5": hf.T5NLIScorer}[kind]
    extra = {"answer_softmax": "pair"} if kind == "t5" else {}
    return cls(folder, device="cpu", dtype=dtype, batch_size=2, **extra).load()  # type: ignore[arg-type]


def fake_cpu(monkeypatch: pytest.MonkeyPatch, cpuinfo: str) -> None:
    monkeypatch.setattr(P, "read_cpu_flags", lambda: flags_of(cpuinfo))


@pytest.mark.parametrize("kind", ["nli", "hhem", "t5"])
@pytest.mark.parametrize(("path", "bound"), [("bf16-autocast", P.MAX_DELTA_P), ("int8", 0.05)])
def test_reduced_paths_stay_near_float32(kind: str, path: str, bound: float, dirs: dict[str, Path]) -> None:
    """bf16 autocast (the automatic path on CPUs with native bfloat16) within the bound; dynamic int8 (on request
    only: it is not guaranteed the bound, and a tiny random T5 misses it) near it."""
    reference = make(kind, dirs[kind], "float32")
    reduced = make(kind, dirs[kind], path)
    assert reference.precision is not None and reference.precision.name == "float32"
    assert reduced.precision is not None and reduced.precision.name == path and not reduced.precision.guarded
    want, got = reference.predict_support(PAIRS), reduced.predict_support(PAIRS)
    assert max(abs(a - b) for a, b in zip(want, got)) <= bound
    assert want != got  # the path did change the arithmetic
    if kind == "nli":
        assert max(want) - min(want) > 0.3  # the probabilities do spread: the bound is not met trivially


def test_autocast_keeps_the_heads_in_float32(dirs: dict[str, Path]) -> None:
    scorer = make("nli", dirs["nli"], "bf16-autocast")
    model = scorer.model
    assert getattr(model.classifier, "_grapheval_float32", False)
    assert getattr(model.bert.pooler, "_grapheval_float32", False)
    layer = model.bert.encoder.layer[0]
    assert layer.attention.self.query.weight.dtype == torch.bfloat16  # stored as autocast would round it
    assert layer.output.LayerNorm.weight.dtype == torch.float32
    assert model.bert.embeddings.word_embeddings.weight.dtype == torch.float32
    assert all(p.dtype == torch.float32 for p in [*model.classifier.parameters(), *model.bert.pooler.parameters()])
    seen: dict[str, torch.dtype] = {}
    def spy(name: str):  # type: ignore[no-untyped-def]
        def hook(_module, _inputs, out) -> None:  # type: ignore[no-untyped-def]
            seen.setdefault(name, out.dtype)
        return hook

    model.classifier.register_forward_hook(spy("logits"))
    model.bert.encoder.layer[0].attention.self.query.register_forward_hook(spy("encoder"))
    scorer.predict_support(PAIRS[:2])
    assert seen == {"logits": torch.float32, "encoder": torch.bfloat16}


def test_int8_quantizes_the_encoder_not_the_head(dirs: dict[str, Path]) -> None:
    model = make("nli", dirs["nli"], "int8").model
    quantized = torch.ao.nn.quantized.dynamic.Linear
    assert isinstance(model.bert.encoder.layer[0].attention.self.query, quantized)
    assert type(model.classifier) is torch.nn.Linear
    assert type(model.bert.pooler.dense) is torch.nn.Linear


@pytest.mark.parametrize("kind", ["nli", "hhem"])
def test_auto_on_a_bf16_cpu_is_checked_at_load_and_stays_within_the_bound(
        kind: str, dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cpu(monkeypatch, SAPPHIRE_RAPIDS)
    scorer = make(kind, dirs[kind], None)
    assert scorer.precision is not None and scorer.precision.name == "bf16-autocast"
    assert scorer.precision.guarded and "load check: max |ΔP(supported)|" in scorer.precision.reason
    want = make(kind, dirs[kind], "float32").predict_support(PAIRS)
    got = scorer.predict_support(PAIRS)
    assert max(abs(a - b) for a, b in zip(want, got)) <= P.MAX_DELTA_P


def test_auto_without_native_bf16_is_float32(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cpu(monkeypatch, ICELAKE)
    scorer = make("nli", dirs["nli"], "auto")
    assert scorer.precision is not None and scorer.precision.name == "float32"
    assert not getattr(scorer.model.classifier, "_grapheval_float32", False)  # nothing was changed


def test_auto_falls_back_to_float32_when_the_load_check_fails(
        dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    fake_cpu(monkeypatch, SAPPHIRE_RAPIDS)
    monkeypatch.setattr(_hf_common, "MAX_DELTA_P", -1.0)  # any change at all fails the check
    scorer = make("nli", dirs["nli"], None)
    assert scorer.precision is not None and scorer.precision.name == "float32"
    assert "moved P(supported)" in scorer.precision.reason
    assert "using float32" in caplog.text
    want = make("nli", dirs["nli"], "float32").predict_support(PAIRS)
    assert scorer.predict_support(PAIRS) == want  # exactly float32: no autocast left on


def test_the_environment_variable_reaches_the_scorer(dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    fake_cpu(monkeypatch, SAPPHIRE_RAPIDS)
    monkeypatch.setenv(P.PRECISION_ENV, "int8")
    scorer = make("nli", dirs["nli"], None)
    assert scorer.precision is not None and scorer.precision.name == "int8"
    assert scorer.precision.reason == "GRAPHEVAL_HF_DTYPE=int8"


def test_the_claim_score_cache_key_holds_the_planned_numeric_path(
        dirs: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    def key(dtype: object = None) -> str:
        return hf.CrossEncoderNLIScorer(dirs["nli"], device="cpu", dtype=dtype).fingerprint()  # type: ignore[arg-type]

    fake_cpu(monkeypatch, SAPPHIRE_RAPIDS)
    auto = key()
    assert auto == key("bf16-autocast") and auto != key("float32") and key("int8") not in (auto, key("float32"))
    loaded = hf.CrossEncoderNLIScorer(dirs["nli"], device="cpu").load()
    assert loaded.fingerprint() == auto  # the same before and after the load
    monkeypatch.setenv(P.PRECISION_ENV, "float32")
    assert key() == key("float32")
    monkeypatch.delenv(P.PRECISION_ENV)
    fake_cpu(monkeypatch, ICELAKE)  # no native bfloat16: auto is float32, and so is its key
    assert key() == key("float32") != auto
