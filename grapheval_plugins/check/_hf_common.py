"""The base of the HuggingFace scorers: lazy loading, sorted batching, token budget, truncation (hub I/O in
:mod:`._hub`, the torch runtime in :mod:`._runtime`; no torch import at module import)."""

from __future__ import annotations

import hashlib
import os
import threading
from abc import abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict, cast

from .._progress import progress_bar
from .._template import fill
from ..exceptions import GraphEvalError, InputError, ModelLoadError
from ._hub import HubOptions, load_error, looks_like_path, pinned_revision
from ._runtime import (
    DeviceLike,
    DTypeLike,
    Features,
    _is_oom,
    _torch,
    _transformers,
    logger,
    resolve_dtype,
    select_device,
)
from .base import Scorer

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedTokenizerBase

__all__ = ["HFScorer", "HFScorerOptions"]


class HFScorerOptions(TypedDict, total=False):
    """The options every HuggingFace scorer takes (:class:`HFScorer`), passed through by the subclasses."""

    revision: str | None
    tokenizer: str | os.PathLike[str] | PreTrainedTokenizerBase | None
    device: DeviceLike
    dtype: DTypeLike
    model_kwargs: Mapping[str, Any] | None
    tokenizer_kwargs: Mapping[str, Any] | None
    batch_size: int
    max_length: int
    hypothesis_tokens: int
    local_files_only: bool | None
    token: str | bool | None
    cache_dir: str | os.PathLike[str] | None
    show_progress: bool


class HFScorer(Scorer):
    """Base of the HuggingFace scorers: lazy loading, device and dtype, sorted batching, token budget.

    Args:
        model: hub name or folder; a built-in hub model loads its pinned ``revision`` unless one is given.
        tokenizer: a tokenizer, a hub name or a folder (default: the model's own).
        device: ``None`` picks cuda → mps → cpu.
        dtype: default half precision on a GPU (bfloat16 where it has it), float32 on a CPU.
        model_kwargs, tokenizer_kwargs: passed to ``from_pretrained`` as sentence-transformers' ``CrossEncoder``
            takes them (a ``dtype`` / ``torch_dtype`` in ``model_kwargs`` is the ``dtype``).
        max_length, hypothesis_tokens: the token window; the premise gets what the hypothesis room leaves.
        local_files_only, token, cache_dir: hub settings.
    """

    kind: str = "hf"  # the spec prefix; the scorer's name is "<kind>:<model>"
    template: str | None = None  # one text per pair, filled with {premise}, {hypothesis}, {eos}; None: a text pair
    allow_fp16: bool = True
    fingerprint_fields: ClassVar[tuple[str, ...]] = ("hub.revision", "tokenizer_source", "max_length", "hypothesis_tokens")

    def __init__(self, model: str | os.PathLike[str], *, revision: str | None = None,
            tokenizer: str | os.PathLike[str] | PreTrainedTokenizerBase | None = None,
            device: DeviceLike = None, dtype: DTypeLike = None, model_kwargs: Mapping[str, Any] | None = None,
            tokenizer_kwargs: Mapping[str, Any] | None = None, batch_size: int = 16, max_length: int = 512,
            hypothesis_tokens: int = 64, local_files_only: bool | None = None,
            token: str | bool | None = None, cache_dir: str | os.PathLike[str] | None = None,
            show_progress: bool = False) -> None:
        super().__init__()
        if not isinstance(model, (str, os.PathLike)) or not os.fspath(model).strip():
            raise InputError("model", "give a hub name or a local folder path")
        for field, value, least in (("batch_size", batch_size, 1), ("max_length", max_length, 32),
                                    ("hypothesis_tokens", hypothesis_tokens, 1)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise InputError(field, f"must be an integer >= {least}, got {value!r}")
        if hypothesis_tokens > max_length // 2:
            raise InputError("hypothesis_tokens", f"must be at most half of max_length ({max_length // 2})")
        self.model_name = os.fspath(model).strip()
        if revision is None and not looks_like_path(self.model_name):
            revision = pinned_revision(self.model_name)  # a built-in hub model loads its recorded commit
        self.hub = HubOptions(revision, local_files_only, token, cache_dir)
        self.tokenizer_source = tokenizer
        self.batch_size = batch_size
        self.max_length = max_length
        self.hypothesis_tokens = hypothesis_tokens
        self.show_progress = show_progress
        self.name = f"{self.kind}:{self.model_name}"
        self._device_arg = device
        self.model_kwargs = dict(model_kwargs or {})
        self.tokenizer_kwargs = dict(tokenizer_kwargs or {})
        self._dtype_arg = self.model_kwargs.pop("dtype", self.model_kwargs.pop("torch_dtype", dtype))
        self._model: Any = None
        self._tokenizer: Any = None
        self._device: Any = None
        self._premise_budget: int | None = None
        self._premise_budget_override: int | None = None
        # A fast tokenizer may not run in two threads at once; token counting runs outside the model lock.
        self._tokenizer_lock = threading.RLock()

    def fingerprint(self) -> str:
        """:meth:`Scorer.fingerprint` with the ``dtype`` asked for, the device kind and the ``model_kwargs``."""
        device = "cpu" if self._device_arg is None else str(self._device_arg).split(":")[0]
        extra = f"dtype={self._dtype_arg!r}\x00device={device}\x00model_kwargs={sorted(self.model_kwargs.items())!r}"
        return hashlib.sha256(f"{super().fingerprint()}\x00{extra}".encode()).hexdigest()[:16]

    # ----------------------------------------------------------------- loading
    def _load_tokenizer(self) -> PreTrainedTokenizerBase:
        """The tokenizer (called once, under the lock): ``tokenizer=`` or the model's own."""
        source: Any = self.tokenizer_source if self.tokenizer_source is not None else self.model_name
        same = isinstance(source, (str, os.PathLike)) and os.fspath(source) == self.model_name
        return self._tokenizer_from(source, self.hub if same else replace(self.hub, revision=None))

    @abstractmethod
    def _load_model(self, dtype: torch.dtype) -> torch.nn.Module:
        """Load the model on cpu in ``dtype`` (called once, under the lock, after the tokenizer)."""

    def _tokenizer_from(self, source: Any, hub: HubOptions) -> PreTrainedTokenizerBase:
        """A tokenizer object as is, or ``AutoTokenizer.from_pretrained(source)`` with the ``hub`` settings."""
        transformers = _transformers()
        if isinstance(source, transformers.PreTrainedTokenizerBase):
            return cast("PreTrainedTokenizerBase", source)
        name = os.fspath(source)
        try:
            return cast("PreTrainedTokenizerBase", transformers.AutoTokenizer.from_pretrained(
                name, **{**self.tokenizer_kwargs, **hub.kwargs()}))
        except GraphEvalError:
            raise
        except Exception as exc:  # noqa: BLE001 - hub / IO errors translated with their cause
            raise load_error("the tokenizer", name, hub, exc) from exc

    def _ensure_tokenizer(self) -> PreTrainedTokenizerBase:
        tokenizer: PreTrainedTokenizerBase | None = self._tokenizer
        if tokenizer is not None:
            return tokenizer
        with self.lock:
            if self._tokenizer is None:
                tokenizer = self._load_tokenizer()
                if tokenizer.pad_token_id is None:
                    raise ModelLoadError(f"the tokenizer of {self.model_name!r} has no padding token")
                overhead = len(self._tokenize_many(tokenizer, [("", "")])[0]["input_ids"])
                budget = self.max_length - overhead - self.hypothesis_tokens
                if budget < 16:
                    raise InputError(
                        "max_length",
                        f"{self.max_length} leaves {budget} tokens for the premise after the template "
                        f"({overhead}) and the hypothesis room ({self.hypothesis_tokens}); raise max_length "
                        "or lower hypothesis_tokens",
                    )
                self._premise_budget = budget
                self._tokenizer = tokenizer
            return cast("PreTrainedTokenizerBase", self._tokenizer)

    def load(self) -> HFScorer:
        """Load tokenizer and model now (else on first use); :class:`ModelLoadError` if they cannot load."""
        if self._model is not None:
            return self
        with self.lock:
            if self._model is not None:
                return self
            self._ensure_tokenizer()
            device = select_device(self._device_arg)
            dtype = resolve_dtype(self._dtype_arg, device, allow_fp16=self.allow_fp16)
            try:
                model = self._load_model(dtype)
                model = model.to(device=device, dtype=dtype)
            except (GraphEvalError, MemoryError):
                raise
            except Exception as exc:  # noqa: BLE001 - hub / IO / torch errors translated with their cause
                raise load_error("model", self.model_name, self.hub, exc) from exc
            model.eval()
            self._device = device
            logger.info("%s loaded on %s in %s", self.name, device, dtype)
            self._model = model
        return self

    @property
    def model(self) -> torch.nn.Module:
        """The loaded torch model (loads it on first access)."""
        return cast("torch.nn.Module", self.load()._model)

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase:
        """The tokenizer (loads it, not the model, on first access)."""
        return self._ensure_tokenizer()

    @property
    def device(self) -> torch.device:
        """The device the model runs on (loads the model on first access)."""
        return cast("torch.device", self.load()._device)

    # ----------------------------------------------------------------- token budget
    @property
    def max_premise_tokens(self) -> int:
        """Largest premise, in tokens, beside the template and ``hypothesis_tokens``; settable, to chunk finer."""
        self._ensure_tokenizer()
        budget = int(self._premise_budget or 0)
        override = self._premise_budget_override
        return budget if override is None else min(override, budget)

    @max_premise_tokens.setter
    def max_premise_tokens(self, value: int | None) -> None:
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 8):
            raise InputError("max_premise_tokens", f"must be an integer >= 8 or None, got {value!r}")
        self._premise_budget_override = value

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` by the model's own tokenizer (no special tokens)."""
        tokenizer = self._ensure_tokenizer()
        with self._tokenizer_lock:
            return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    # ----------------------------------------------------------------- encoding
    def _tokenize_many(self, tokenizer: PreTrainedTokenizerBase, pairs: Sequence[tuple[str, str]]) -> list[Features]:
        """Token features of each ``(premise, hypothesis)`` (with special tokens, no padding, no truncation)."""
        if self.template is None:
            texts: tuple[list[str], ...] = ([p for p, _ in pairs], [h for _, h in pairs])
        else:
            eos = str(tokenizer.eos_token)
            texts = ([fill(self.template, premise=p, hypothesis=h, eos=eos) for p, h in pairs],)
        encoded = tokenizer(*texts, add_special_tokens=True)
        return [{key: list(values[i]) for key, values in encoded.items()} for i in range(len(pairs))]

    def _encode(self, pairs: Sequence[tuple[str, str]]) -> list[Features]:
        """Token features of every pair, at most ``max_length`` tokens: a longer pair loses the end of its premise."""
        tokenizer = self._ensure_tokenizer()
        with self._tokenizer_lock:
            features = self._tokenize_many(tokenizer, pairs)
            long = [i for i, feature in enumerate(features) if len(feature["input_ids"]) > self.max_length]
            for i in long:
                features[i] = self._fit(tokenizer, pairs[i], features[i])
        if long:
            logger.warning("%s: %d pair(s) exceeded max_length=%d tokens; their premise was cut",
                           self.name, len(long), self.max_length)
        return features

    def _fit(self, tokenizer: PreTrainedTokenizerBase, pair: tuple[str, str], feature: Features) -> Features:
        premise, hypothesis = pair
        premise_ids = tokenizer(premise, add_special_tokens=False)["input_ids"]
        length = len(feature["input_ids"])
        for _ in range(4):
            keep = len(premise_ids) - (length - self.max_length) - 2
            if keep <= 0:
                break
            premise_ids = premise_ids[:keep]
            short = str(tokenizer.decode(premise_ids, skip_special_tokens=True))
            feature = self._tokenize_many(tokenizer, [(short, hypothesis)])[0]
            length = len(feature["input_ids"])
            if length <= self.max_length:
                return feature
        # The hypothesis alone does not fit: keep the head of the sequence and its final (special) token.
        return {key: values[: self.max_length - 1] + values[-1:] for key, values in feature.items()}

    # ----------------------------------------------------------------- inference
    @abstractmethod
    def _support(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
        """P(supported), shape ``(batch,)``, for one padded batch already on the model's device."""

    def _run_batch(self, features: Sequence[Features]) -> list[float]:
        """P(supported) of each feature row; a batch that runs out of memory is retried in halves."""
        scores: list[float] = []
        pending: list[Sequence[Features]] = [features]
        while pending:
            chunk = pending.pop()
            padded = self._tokenizer.pad(list(chunk), padding_side="right", return_tensors="pt")
            batch = {key: values.to(self._device) for key, values in padded.items()}
            try:
                probs = self._support(self._model, batch)
            except Exception as exc:
                if not (len(chunk) > 1 and _is_oom(exc)):
                    raise
                probs = None  # leave the handler: the exception and its frames are dropped with it
            del batch
            if probs is not None:
                scores += [float(p) for p in probs.float().cpu().tolist()]
                continue
            logger.warning("%s: out of memory on a batch of %d, retrying in halves", self.name, len(chunk))
            if self._device.type == "cuda":
                _torch().cuda.empty_cache()
            half = len(chunk) // 2
            pending += [chunk[half:], chunk[:half]]  # the first half is popped, and so scored, first
        return scores

    def predict_support(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """P(supported) for each ``(premise, hypothesis)`` pair, scored ``batch_size`` at a time by token length."""
        pairs = list(pairs)
        for i, pair in enumerate(pairs):
            if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(isinstance(t, str) for t in pair)):
                raise InputError(f"pairs[{i}]", "must be a (premise, hypothesis) pair of strings")
        if not pairs:
            return []
        torch = _torch()
        with self.lock:
            self.load()
            features = self._encode(pairs)
            order = sorted(range(len(pairs)), key=lambda i: len(features[i]["input_ids"]), reverse=True)
            scores = [0.0] * len(pairs)
            starts = range(0, len(order), self.batch_size)
            with torch.inference_mode():
                bar = progress_bar(len(starts), self.name, unit="batch", enabled=self.show_progress, iterable=starts)
                for start in bar:
                    indices = order[start : start + self.batch_size]
                    for index, score in zip(indices, self._run_batch([features[i] for i in indices])):
                        scores[index] = score
        return scores

    def __repr__(self) -> str:
        state = "loaded" if self._model is not None else "not loaded"
        return f"{type(self).__name__}({self.model_name!r}, {state})"
