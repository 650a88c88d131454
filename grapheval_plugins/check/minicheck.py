"""MiniCheck (Tang, Laban & Durrett 2024), following the authors' ``minicheck/inference.py`` (windows and chunk
sizes: docs/scorers.md). The spec ``"minicheck"`` is ``minicheck:flan-t5-large``.

Example (needs the weights)::

    from grapheval_plugins.check.minicheck import load_minicheck

    scorer = load_minicheck("flan-t5-large")          # or "roberta-large", "deberta-v3-large", a hub id, a folder
    scorer.predict_support([("A group of students gather in the school library to study for their upcoming "
                             "final exams.", "The students are preparing for an examination.")])   # [0.9...]
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from ..exceptions import InputError
from ._hub import HubOptions, read_config_dict
from .hf import CrossEncoderNLIScorer, HFScorer, T5NLIScorer, model_kind

__all__ = ["MINICHECK_MODELS", "MiniCheckEncoderScorer", "MiniCheckT5Scorer", "load_minicheck",
    "minicheck_chunks", "split_sentences"]

MINICHECK_MODELS: dict[str, str] = {
    "flan-t5-large": "lytang/MiniCheck-Flan-T5-Large",
    "roberta-large": "lytang/MiniCheck-RoBERTa-Large",
    "deberta-v3-large": "lytang/MiniCheck-DeBERTa-v3-Large",
}
"""Short names of the MiniCheck checkpoints → hub names (each at its pinned commit unless ``revision=`` is given)."""

# Short name -> (window in tokens, chunk size in words for T5 / tokens otherwise): the reference defaults.
_SETTINGS: dict[str, tuple[int, int]] = {
    "flan-t5-large": (2048, 500),
    "roberta-large": (512, 400),
    "deberta-v3-large": (2048, 400),
}

_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (split at ``.!?`` before a capital or digit, not by NLTK's Punkt as the reference
    does: no model data to download), each line on its own, with ``"\\n"`` marking the line breaks.

    >>> split_sentences("One here. Two there!\\nThree")
    ['One here.', 'Two there!', '\\n', 'Three']
    """
    out: list[str] = []
    for line in text.split("\n"):
        out.extend(part.strip() for part in _SENTENCE_END.split(line) if part.strip())
        out.append("\n")
    return out[:-1]


def minicheck_chunks(text: str, size: int, count: Callable[[str], int]) -> list[str]:
    """MiniCheck's chunks of a document: whole sentences packed greedily while their ``count`` fits ``size``.

    >>> minicheck_chunks("A b c. D e f. G h.", 6, lambda s: len(s.split()))
    ['A b c. D e f.', 'G h.']
    """
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for sentence in split_sentences(text) or [""]:
        n = count(sentence)
        if used + n > size:
            chunks.append(" ".join(current))
            current, used = [sentence], n
        else:
            current.append(sentence)
            used += n
    chunks.append(" ".join(current))  # never empty: the loop ran at least once
    cleaned = [c.replace(" \n ", "\n").strip() for c in chunks]
    return [c for c in cleaned if c] or [text]


class MiniCheckT5Scorer(T5NLIScorer):
    """MiniCheck-Flan-T5-Large: ``"predict: " + doc + "</s>" + claim``, read as "1" (209) vs "0" (3) at step 1;
    ``chunk_size`` in whitespace words; other options as for :class:`~grapheval_plugins.check.hf.T5NLIScorer`."""

    kind = "minicheck"
    fingerprint_fields = (*T5NLIScorer.fingerprint_fields, "chunk_size")
    template = "predict: {premise}{eos}{hypothesis}"

    def __init__(self, model: str | os.PathLike[str] = MINICHECK_MODELS["flan-t5-large"], *,
                 chunk_size: int = 500, max_length: int = 2048, **kwargs: Any) -> None:
        super().__init__(model, max_length=max_length, label_tokens=("1", "0"), answer_softmax="pair", **kwargs)
        self.chunk_size = _check_chunk_size(chunk_size)

    def chunks(self, context: str) -> list[str]:
        return minicheck_chunks(context, self.chunk_size, lambda s: len(s.split()))



class MiniCheckEncoderScorer(CrossEncoderNLIScorer):
    """MiniCheck-RoBERTa-Large / -DeBERTa-v3-Large: ``doc + eos + claim`` as one text, P(supported) at class 1;
    ``chunk_size`` in tokens; other options as for :class:`~grapheval_plugins.check.hf.CrossEncoderNLIScorer`."""

    kind = "minicheck"
    fingerprint_fields = (*CrossEncoderNLIScorer.fingerprint_fields, "chunk_size")
    cap_max_length = False  # the reference runs DeBERTa-v3 (relative positions) at 2048 tokens
    template = "{premise}{eos}{hypothesis}"

    def __init__(self, model: str | os.PathLike[str], *, chunk_size: int = 400, max_length: int = 512,
                 **kwargs: Any) -> None:
        kwargs.setdefault("entailment_label", 1)
        super().__init__(model, max_length=max_length, **kwargs)
        self.chunk_size = _check_chunk_size(chunk_size)

    def chunks(self, context: str) -> list[str]:
        return minicheck_chunks(context, self.chunk_size, self.count_tokens)



def _check_chunk_size(value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 8:
        raise InputError("chunk_size", f"must be an integer >= 8, got {value!r}")
    return value


def load_minicheck(name: str | os.PathLike[str] = "flan-t5-large", **kwargs: Any) -> HFScorer:
    """A MiniCheck scorer with the reference window and chunk size: a short name of :data:`MINICHECK_MODELS`, a
    hub name or a folder (its variant read from its ``config.json``); ``kwargs`` go to the class.

    >>> load_minicheck("roberta-large").name
    'minicheck:lytang/MiniCheck-RoBERTa-Large'

    Raises ``ModelLoadError`` when the config of a model given by path or other hub name cannot be read or
    fits no variant."""
    if not isinstance(name, (str, os.PathLike)) or not os.fspath(name).strip():
        raise InputError("name", "give a MiniCheck short name, a hub name or a local folder path")
    text = os.fspath(name).strip()
    short = text.lower()
    if short not in MINICHECK_MODELS:
        short = next((k for k, v in MINICHECK_MODELS.items() if v.lower() == short), "")
    model = MINICHECK_MODELS[short] if short else text
    if not short:  # another model: its variant read from its config
        hub = HubOptions(kwargs.get("revision"), kwargs.get("local_files_only"), kwargs.get("token"),
                         kwargs.get("cache_dir"))
        config = read_config_dict(model, hub)
        deberta = "deberta" in str(config.get("model_type", "")).lower()
        short = "flan-t5-large" if model_kind(config) == "t5" else "deberta-v3-large" if deberta else "roberta-large"
    window, chunk = _SETTINGS[short]
    kwargs.setdefault("max_length", window)
    kwargs.setdefault("chunk_size", chunk)
    if short == "flan-t5-large":
        return MiniCheckT5Scorer(model, **kwargs)
    return MiniCheckEncoderScorer(model, **kwargs)
