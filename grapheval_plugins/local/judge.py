"""An LLM-judge scorer over a local llama.cpp model, reading the label words' next-token logits (see docs/offline.md,
"How it works").

Example (downloads nothing: the weights come from the pinned ``weights-*`` packages)::

    from grapheval_plugins.local.judge import load_judge_scorer

    judge = load_judge_scorer("local:qwen2.5-coder-1.5b")
    context = "The city council of Riverton voted 7 to 2 on Tuesday to build a new library."
    [s.p_unsupported for s in judge.check([context] * 2, ["The council voted 7 to 2", "The council voted 9 to 0"])]
    # low for the first claim, close to 1 for the second
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from .._imports import require
from .._progress import progress_bar
from .._template import fill
from ..check.base import Scorer
from ..check.judge import JUDGE_RUBRIC, JudgeCalibration, LabelReading, p_supported
from ..exceptions import InputError, ModelLoadError
from .chatml import tokenize_segments
from .runtime import ContextOverflowError, LlamaSession, get_session
from .weights import (
    KNOWN_MODELS,
    HubFetcher,
    canonical_name,
    env_path,
    resolve_model,
    strip_spec_prefix,
    validate_reference,
)

__all__ = ["JUDGE_CALIBRATIONS", "JUDGE_PROMPT", "JUDGE_PROMPTS", "QUESTION_FIRST_PROMPT", "JudgeCalibration",
    "JudgePrompt", "LocalJudgeScorer", "load_judge_scorer", "weights_identity"]

_SYSTEM = JUDGE_RUBRIC + "\nAnswer with one word: supported, contradicted or unknown."


@dataclass(frozen=True)
class JudgePrompt:
    """The judge's wording (``{context}``, ``{claim}``); the first tokens of ``labels`` after ``answer_prefix``
    must differ."""

    system: str = _SYSTEM
    context_template: str = "Context:\n{context}\n\n"
    claim_template: str = (
        "Claim: {claim}\n\nIs the claim supported by the context? Answer with one word: supported, contradicted "
        "or unknown."
    )
    answer_prefix: str = ""
    labels: tuple[str, str, str] = ("supported", "contradicted", "unknown")

    def prefix_segments(self, context: str) -> list[tuple[str, bool]]:
        return [
            ("<|im_start|>system\n", True), (self.system, False), ("<|im_end|>\n", True),
            ("<|im_start|>user\n", True), (fill(self.context_template, context=context), False),
        ]

    def claim_segments(self, claim: str) -> list[tuple[str, bool]]:
        return [
            (fill(self.claim_template, claim=claim), False), ("<|im_end|>\n", True),
            ("<|im_start|>assistant\n", True), (self.answer_prefix, False),
        ]


JUDGE_PROMPT = JudgePrompt()
"""The judge's general wording: the question after each claim."""

QUESTION_FIRST_PROMPT = JudgePrompt(
    context_template=("Is the claim below supported by the context? Answer with one word: supported, contradicted or "
                      "unknown.\n\nContext:\n{context}\n\n"),
    claim_template="Claim: {claim}",
)
"""The question before the context, so each claim adds only ``Claim: …`` and the start of the answer.

>>> "".join(text for text, _ in QUESTION_FIRST_PROMPT.claim_segments("Anna won"))
'Claim: Anna won<|im_end|>\\n<|im_start|>assistant\\n'
"""

JUDGE_PROMPTS: dict[str, JudgePrompt] = {
    "qwen2.5-coder-1.5b": QUESTION_FIRST_PROMPT,
}
"""Per-model wording, others get :data:`JUDGE_PROMPT` (``docs/benchmarks.md``, "The judge's wording")."""


JUDGE_CALIBRATIONS: dict[str, JudgeCalibration] = {
    "qwen2.5-coder-1.5b": JudgeCalibration(),
    "qwen2.5-coder-0.5b": JudgeCalibration(),
}
"""Per-model calibration of the judge's P(supported) (the identity until fitted)."""


class LocalJudgeScorer(Scorer):
    """A :class:`~grapheval_plugins.check.Scorer` that asks a local llama.cpp model, reading 3-way label logits;
    also a :class:`~grapheval_plugins.check.judge.LabelLogits` backend. Options: docs/offline.md, "Load options".

    Args:
        prompt: default :data:`JUDGE_PROMPTS` for known models.
        session: an explicit :class:`~grapheval_plugins.local.runtime.LlamaSession` (tests, custom runtimes).
    """

    fingerprint_fields = ("session.n_ctx",)
    overlaps_extraction = True  # a local chat model and this judge split the cores (local/runtime.py)

    def __init__(self, model: str = "qwen2.5-coder-1.5b", *, n_ctx: int = 4096, n_threads: int | None = None,
            claim_budget_tokens: int = 320, prompt: JudgePrompt | None = None,
            calibration: JudgeCalibration | None = None, hub: HubFetcher | bool | None = True,
            cache_dir: str | Path | None = None, session: LlamaSession | None = None,
            show_progress: bool = False) -> None:
        super().__init__()
        if claim_budget_tokens < 16 or claim_budget_tokens >= n_ctx // 2:
            raise InputError("claim_budget_tokens", f"must be in [16, n_ctx/2), got {claim_budget_tokens}")
        if isinstance(model, str):
            model = strip_spec_prefix(model)  # "local:<name>" and "judge:local:<name>" specs name the model too
        self.model = model
        self.model_key = canonical_name(model) or model
        self.name = f"judge:local:{self.model_key}"
        self.prompt = prompt or JUDGE_PROMPTS.get(self.model_key, JUDGE_PROMPT)
        self.calibration = calibration or JUDGE_CALIBRATIONS.get(self.model_key, JudgeCalibration())
        self.claim_budget_tokens = claim_budget_tokens
        self.show_progress = show_progress
        self.session = session or get_session(self.model_key, partial(resolve_model, model, cache=cache_dir, hub=hub),
                                              role="judge", n_ctx=n_ctx, n_threads=n_threads)
        self._label_ids: tuple[int, int, int] | None = None
        self._frame_tokens: int | None = None

    def fingerprint(self) -> str:
        """The scorer's fingerprint with the GGUF file it reads (:func:`weights_identity`) in place of its name."""
        return self._fingerprint(model=weights_identity(self.model, self.session))

    # ------------------------------------------------------------------ setup
    def load(self) -> LocalJudgeScorer:
        """Resolve the weights and load the model now (otherwise done on first use)."""
        self.session.load()
        self._label_ids = self._first_tokens(self.prompt.labels)
        frame = self.prompt.prefix_segments("") + self.prompt.claim_segments("")
        self._frame_tokens = len(tokenize_segments(frame, self._tokenize))
        return self

    def _tokenize(self, text: str, special: bool) -> list[int]:
        return self.session.tokenize(text, special=special)

    def _first_tokens(self, labels: Sequence[str]) -> tuple[int, int, int]:
        ids = []
        for label in labels:
            # Tokenize in place after the answer prefix, so a leading space merges the way the model would emit it.
            prefix = self._tokenize(self.prompt.answer_prefix, False) if self.prompt.answer_prefix else []
            full = self._tokenize(self.prompt.answer_prefix + label, False)
            if full[: len(prefix)] != prefix or len(full) == len(prefix):
                raise ModelLoadError(f"judge label {label!r} does not tokenize after the answer prefix")
            ids.append(full[len(prefix)])
        if len(set(ids)) != 3:
            raise ModelLoadError(f"judge labels {list(labels)} share a first token: {ids}")
        return ids[0], ids[1], ids[2]

    @property
    def label_ids(self) -> tuple[int, int, int]:
        if self._label_ids is None:
            self.load()
        return self._label_ids  # type: ignore[return-value]

    @property
    def max_premise_tokens(self) -> int:  # type: ignore[override]
        frame = self._frame_tokens if self._frame_tokens is not None else 200
        return self.session.n_ctx - frame - self.claim_budget_tokens

    def chunks(self, context: str) -> list[str]:
        if self._frame_tokens is None:
            self.load()
        return super().chunks(context)

    def count_tokens(self, text: str) -> int:
        if self._frame_tokens is None:
            self.load()
        return len(self._tokenize(text, False))

    # ------------------------------------------------------------------ scoring
    def label_logprobs(self, context: str, claims: Sequence[str], labels: Sequence[str]) -> list[LabelReading]:
        """Per claim, the log-softmax over the first-token logits of this judge's ``prompt.labels``."""
        if tuple(labels) != tuple(self.prompt.labels):
            raise InputError("labels", f"this judge reads {list(self.prompt.labels)}, not {list(labels)}")
        rows = self._label_logprobs([(context, claim) for claim in claims], overflow="record")
        return [
            LabelReading(error=row) if isinstance(row, str) else LabelReading(logprobs=dict(zip(self.prompt.labels, row)))
            for row in rows
        ]

    def _label_logprobs(
        self, pairs: Sequence[tuple[str, str]], overflow: str = "raise"
    ) -> list[Any]:
        """Log-softmax over the three label logits per pair; ``overflow="record"`` puts the error in its place."""
        import numpy as np

        if not pairs:
            return []
        labels = list(self.label_ids)
        groups: dict[str, list[int]] = {}
        for index, (premise, _) in enumerate(pairs):
            groups.setdefault(premise, []).append(index)
        out: list[tuple[float, float, float] | str | None] = [None] * len(pairs)
        bar = progress_bar(len(pairs), "judge", unit="claim", enabled=self.show_progress and len(pairs) >= 2)
        try:
            with self.session.lock, self.session.busy():  # one span: the cores stay split while a chat model decodes
                for premise, indices in groups.items():
                    prefix = tokenize_segments(self.prompt.prefix_segments(premise), self._tokenize)
                    if len(prefix) < self.session.n_ctx:  # the context alone first: saved whole, to return to
                        self.session.prefill(prefix, what="context", logits=False)
                    for index in indices:
                        claim = pairs[index][1]
                        suffix = tokenize_segments(self.prompt.claim_segments(claim), self._tokenize)
                        if len(prefix) + len(suffix) > self.session.n_ctx:
                            error = ContextOverflowError(
                                "claim",
                                f"context ({len(prefix)} tokens) + claim ({len(suffix)} tokens) exceed the judge's "
                                f"window of {self.session.n_ctx} tokens",
                            )
                            if overflow != "record":
                                raise error
                            out[index] = str(error)
                        else:
                            self.session.prefill(prefix + suffix, what="claim")
                            logits = self.session.logits()[labels].astype(np.float64)
                            shifted = logits - logits.max()
                            logp = shifted - math.log(float(np.exp(shifted).sum()))
                            out[index] = (float(logp[0]), float(logp[1]), float(logp[2]))
                        bar.update(1)
        finally:
            bar.close()
        return [p for p in out if p is not None]

    def predict_support(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Calibrated P(supported) per pair (:func:`~grapheval_plugins.check.judge.p_supported`)."""
        labels = self.prompt.labels
        return [
            p_supported(LabelReading(logprobs=dict(zip(labels, row))), labels, self.calibration)
            for row in self._label_logprobs(pairs)
        ]


def weights_identity(model: str, session: LlamaSession | None = None) -> str:
    """The GGUF file a judge of ``model`` reads: ``sha256:<digest>`` of pinned weights, ``file:<path>:<size>:<mtime>``
    of a file used as given, else ``ref:<model>``. Reads no file.

    >>> weights_identity("Qwen2.5-Coder-1.5B-Instruct") == weights_identity("qwen2.5-coder-1.5b")
    True
    """
    resolved = getattr(session, "weights", None)
    if resolved is not None and resolved.sha256:
        return f"sha256:{resolved.sha256}"
    path = getattr(session, "path", None)
    if path is not None and (resolved is None or resolved.source in ("path", "env")):
        return _file_stamp(Path(path))
    name = canonical_name(model)
    if path is None and name is not None:
        known = KNOWN_MODELS[name]
        given = env_path(known)
        return _file_stamp(given[1]) if given else f"sha256:{known.sha256}"
    if path is None and Path(model).expanduser().is_file():
        return _file_stamp(Path(model).expanduser())
    return f"ref:{model}"


def _file_stamp(path: Path) -> str:
    try:
        stat = path.stat()
    except OSError:
        return f"file:{path}"
    return f"file:{path.resolve()}:{stat.st_size}:{stat.st_mtime_ns}"


def load_judge_scorer(spec: str, **options: Any) -> LocalJudgeScorer:
    """The factory behind ``judge:local:<name or path>`` specs (a bare name or path too)."""
    if canonical_name(spec) is not None:  # an embedded model: the weights packages are needed too
        require("llama_cpp", "offline", "the offline default judge; or give your own model as scorer=, e.g. "
                "scorer='judge:openai:gpt-4o-mini' with the 'openai' extra", package="llama-cpp-python")
    require("llama_cpp", "local", "the local LLM judge", package="llama-cpp-python")
    target = strip_spec_prefix(spec)
    prefix, sep, _ = target.partition(":")
    if sep and len(prefix) > 1 and canonical_name(target) is None and not Path(target).expanduser().is_file():
        raise ModelLoadError(
            f"judge spec {spec!r}: only local llama.cpp models load here (judge:local:<name or path>); for another "
            "chat model use the spec 'judge:<provider>:<model>' or LLMJudge(chat_model) from "
            "grapheval_plugins.check.llm_judge"
        )
    return LocalJudgeScorer(validate_reference(target), **options)


