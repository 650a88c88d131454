"""LLM judges: the shared rubric, the :class:`LabelLogits` backend protocol (a :class:`LabelReading` per claim,
from a chat model's answer or a local model's logits), the decision :func:`p_supported`, and :class:`JudgeScorer`,
which makes any backend a :class:`~grapheval_plugins.check.Scorer`.

Example (a backend that reads labels from a lookup table):
    >>> class TableJudge:
    ...     name = "table"
    ...     def label_logprobs(self, context, claims, labels):
    ...         return [LabelReading(verdict="supported" if c in context else "unknown") for c in claims]
    >>> scorer = JudgeScorer(TableJudge())
    >>> [round(s.p_unsupported, 2) for s in scorer.check(["Paris is in France."] * 2, ["Paris", "Rome"])]
    [0.1, 0.8]
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from .._async import run_sync
from ..exceptions import InputError, ScoringError
from .base import ClaimScore, Scorer

__all__ = ["JUDGE_LABELS", "JUDGE_RUBRIC", "VERDICT_P_UNSUPPORTED", "JudgeCalibration", "JudgeScorer",
    "LabelLogits", "LabelReading", "label_distribution", "p_supported"]

JUDGE_LABELS: tuple[str, str, str] = ("supported", "contradicted", "unknown")
"""The judge's label words; the first means "supported"."""

JUDGE_RUBRIC = (
    "You are a strict fact-checker. You decide whether a claim is supported by a context, using only the "
    "context.\n"
    "- supported: every detail of the claim (who, what, numbers, dates, places, relations) is stated in the "
    "context or follows directly from it.\n"
    "- contradicted: the context states something that conflicts with the claim.\n"
    "- unknown: the context does not state the claim. A claim that is true in the real world but not stated in "
    "the context is unknown: world knowledge does not count."
)

VERDICT_P_UNSUPPORTED: Mapping[str, float] = {"supported": 0.1, "unknown": 0.8, "contradicted": 0.9}
"""P(unsupported) of a bare verdict (no log-probabilities, no stated probability): fixed, not fitted, on the
decided side of the default threshold of 0.5."""


@dataclass(frozen=True)
class JudgeCalibration:
    """A logistic recalibration of the judge's P(supported): ``σ(slope · logit(p) + intercept)``.

    >>> JudgeCalibration().apply(0.3)
    0.3
    >>> round(JudgeCalibration.from_threshold(0.2).apply(0.8), 6)  # raw P(unsupported) 0.2 -> 0.5
    0.5
    """

    slope: float = 1.0
    intercept: float = 0.0
    source: str = "identity (not fitted)"

    @property
    def is_identity(self) -> bool:
        return self.slope == 1.0 and self.intercept == 0.0

    def apply(self, p_supported: float) -> float:
        if self.is_identity:
            return p_supported
        p = min(max(p_supported, 1e-7), 1 - 1e-7)
        z = self.slope * math.log(p / (1 - p)) + self.intercept
        return 1.0 / (1.0 + math.exp(-z))

    @classmethod
    def from_threshold(cls, p_unsupported: float, source: str = "threshold") -> JudgeCalibration:
        """The calibration under which a raw P(unsupported) of ``p_unsupported`` reads as 0.5."""
        if not 0.0 < p_unsupported < 1.0:
            raise InputError("p_unsupported", f"must be in (0, 1), got {p_unsupported!r}")
        p_sup = 1.0 - p_unsupported
        return cls(slope=1.0, intercept=-math.log(p_sup / (1 - p_sup)), source=source)


@dataclass(frozen=True)
class LabelReading:
    """What a judge backend read for one claim: label log-probabilities (a missing label: probability 0), the
    verdict, the P(supported) the model ``stated``, what the reader could not use (``notes``), or an ``error``;
    or the readings of several sampled answers (``samples``: their P(supported) is averaged)."""

    logprobs: Mapping[str, float] | None = None
    verdict: str | None = None
    error: str | None = None
    notes: tuple[str, ...] = field(default=())
    stated: float | None = None
    samples: tuple[LabelReading, ...] = field(default=())

    @property
    def ok(self) -> bool:
        usable = self.logprobs is not None and any(math.isfinite(v) for v in self.logprobs.values())
        return self.error is None and (usable or self.stated is not None or self.verdict is not None
                                       or any(s.ok for s in self.samples))


@runtime_checkable
class LabelLogits(Protocol):
    """A judge backend: one :class:`LabelReading` per claim of a context (raising fails them all). Optional:
    ``async alabel_logprobs``, and ``count_tokens`` / ``max_context_tokens`` to have long contexts chunked."""

    name: str

    def label_logprobs(self, context: str, claims: Sequence[str], labels: Sequence[str]) -> list[LabelReading]: ...


def label_distribution(logprobs: Mapping[str, float], labels: Sequence[str]) -> list[float]:
    """The softmax over ``labels`` of their log-probabilities (labels not in ``logprobs`` get 0).

    >>> [round(p, 3) for p in label_distribution({"supported": -0.1, "unknown": -2.4}, JUDGE_LABELS)]
    [0.909, 0.0, 0.091]
    """
    values = [logprobs.get(label, -math.inf) for label in labels]
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        raise ValueError("no label has a finite log-probability")
    top = max(finite)
    weights = [math.exp(v - top) if math.isfinite(v) else 0.0 for v in values]
    total = sum(weights)
    return [w / total for w in weights]


def p_supported(reading: LabelReading, labels: Sequence[str] = JUDGE_LABELS,
        calibration: JudgeCalibration | None = None,
        verdict_p_unsupported: Mapping[str, float] = VERDICT_P_UNSUPPORTED) -> float:
    """P(supported) of one reading: the (calibrated) softmax over the label log-probabilities; else the stated
    probability (above 1/2 beside a label other than the first: the confidence in that label); else the verdict's
    fixed probability; for sampled answers, the mean of theirs.

    >>> p_supported(LabelReading(logprobs={"supported": 0.0, "contradicted": -math.inf, "unknown": -math.inf}))
    1.0
    >>> p_supported(LabelReading(verdict="supported", stated=0.7)), p_supported(LabelReading(verdict="unknown", stated=0.2))
    (0.7, 0.2)
    >>> p_supported(LabelReading(verdict="contradicted", stated=0.75))  # read as its confidence in "contradicted"
    0.25
    >>> p_supported(LabelReading(verdict="unknown"))
    0.19999999999999996
    >>> p_supported(LabelReading(samples=(LabelReading(verdict="supported", stated=0.9),
    ...                                   LabelReading(verdict="unknown", stated=0.3))))
    0.6

    Raises ``ValueError`` when the reading has no usable log-probabilities and no known verdict."""
    if reading.error is not None:
        raise ValueError(reading.error)
    usable = [s for s in reading.samples if s.ok]
    if usable:
        return sum(p_supported(s, labels, calibration, verdict_p_unsupported) for s in usable) / len(usable)
    logprobs = reading.logprobs
    if logprobs is not None and any(math.isfinite(logprobs.get(label, -math.inf)) for label in labels):
        return (calibration or JudgeCalibration()).apply(label_distribution(logprobs, labels)[0])
    if reading.stated is not None and 0.0 <= reading.stated <= 1.0:
        stated = float(reading.stated)
        # "contradicted 75": a figure on the other side of 1/2 from its label is the model's confidence in the label.
        return 1.0 - stated if reading.verdict in labels[1:] and stated > 0.5 else stated
    if reading.verdict is not None and reading.verdict in verdict_p_unsupported:
        return 1.0 - float(verdict_p_unsupported[reading.verdict])
    raise ValueError(f"no usable log-probabilities and no known verdict (verdict {reading.verdict!r})")


def _error_score(message: str) -> ClaimScore:
    return ClaimScore(p_unsupported=math.nan, chunk_index=-1, chunk="", error=message)


class JudgeScorer(Scorer):
    """A :class:`~grapheval_plugins.check.Scorer` over any :class:`LabelLogits` backend: one call per context
    chunk with all its claims, ``retries`` more for the claims without a verdict (one per call once an answer judged
    some), then a per-claim ``error``
    (never one for the whole batch); a claim's score is its best chunk's. The first of ``labels`` means
    "supported"; ``calibration`` applies to log-probabilities; ``max_concurrency`` bounds :meth:`acheck`'s calls.
    """

    def __init__(self, backend: LabelLogits, *, labels: Sequence[str] = JUDGE_LABELS,
            calibration: JudgeCalibration | None = None,
            verdict_p_unsupported: Mapping[str, float] = VERDICT_P_UNSUPPORTED, retries: int = 1,
            max_concurrency: int = 4, name: str | None = None) -> None:
        super().__init__()
        if not callable(getattr(backend, "label_logprobs", None)):
            raise InputError("backend", f"{type(backend).__name__} has no label_logprobs(context, claims, labels)")
        labels = tuple(labels)
        if len(labels) < 2 or len(set(labels)) != len(labels) or not all(isinstance(x, str) and x for x in labels):
            raise InputError("labels", f"need two or more distinct non-empty label words, got {labels!r}")
        for key, value in verdict_p_unsupported.items():
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise InputError("verdict_p_unsupported", f"{key!r}: must be a probability, got {value!r}")
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise InputError("retries", f"must be an integer >= 0, got {retries!r}")
        if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
            raise InputError("max_concurrency", f"must be an integer >= 1, got {max_concurrency!r}")
        self.backend = backend
        self.labels = labels
        self.calibration = calibration or JudgeCalibration()
        self.verdict_p_unsupported = dict(verdict_p_unsupported)
        self.retries = retries
        self.max_concurrency = max_concurrency
        self.name = name or str(getattr(backend, "name", None) or type(backend).__name__)

    # ------------------------------------------------------------------ chunking
    @property
    def max_premise_tokens(self) -> int | None:  # type: ignore[override]
        value = getattr(self.backend, "max_context_tokens", None)
        return value if isinstance(value, int) else None

    def count_tokens(self, text: str) -> int:
        counter = getattr(self.backend, "count_tokens", None)
        return int(counter(text)) if callable(counter) else super().count_tokens(text)

    # ------------------------------------------------------------------ scoring
    def _plan(self, contexts: Sequence[str | Sequence[str]], claims: Sequence[str]) -> tuple[
        list[str], dict[str, list[str]], dict[str, str], list[tuple[str, list[str]]]
    ]:
        """The contexts as texts, their chunks, the chunking errors, and each chunk's calls."""
        if len(contexts) != len(claims):
            raise ValueError("contexts and claims must have the same length")
        texts = [c if isinstance(c, str) else "\n\n".join(c) for c in contexts]
        chunked: dict[str, list[str]] = {}
        grouped: dict[str, list[str]] = {}
        failed: dict[str, str] = {}
        for context, claim in zip(texts, claims):
            if context not in chunked and context not in failed:
                try:
                    chunked[context] = self.chunks(context)
                except Exception as exc:  # noqa: BLE001 - one context failing to chunk fails its own claims
                    failed[context] = f"could not chunk the context: {exc}"
            bucket = grouped.setdefault(context, [])
            if claim not in bucket:
                bucket.append(claim)
        jobs = [(chunk, grouped[context]) for context, chunks in chunked.items() for chunk in chunks]
        return texts, chunked, failed, jobs

    def _decide(self, reading: LabelReading) -> float | str:
        """P(supported) of a reading, or the reason there is none."""
        if not reading.ok:
            return reading.error or "the judge gave no verdict"
        try:
            p = p_supported(reading, self.labels, self.calibration, self.verdict_p_unsupported)
        except ValueError as exc:
            return str(exc)
        if math.isnan(p) or not 0.0 <= p <= 1.0 + 1e-9:
            return f"invalid probability {p!r}"
        return min(1.0, p)

    async def _call(self, chunk: str, claims: Sequence[str], semaphore: asyncio.Semaphore,
            sync: bool) -> list[float | str]:
        """P(supported) or why there is none, per claim (``alabel_logprobs`` if any, unless ``sync``)."""
        method = getattr(self.backend, "alabel_logprobs", None)
        async with semaphore:
            try:
                if not sync and method is not None and inspect.iscoroutinefunction(method):
                    result: Any = await method(chunk, list(claims), self.labels)
                else:
                    result = await asyncio.to_thread(self.backend.label_logprobs, chunk, list(claims), self.labels)
            except Exception as exc:  # noqa: BLE001 - per-claim errors, never the whole batch
                return [f"{type(exc).__name__}: {exc}"] * len(claims)
        if not isinstance(result, list) or len(result) != len(claims):
            got = len(result) if isinstance(result, list) else type(result).__name__
            return [f"the backend returned {got} readings for {len(claims)} claims"] * len(claims)
        return [self._decide(r) if isinstance(r, LabelReading) else f"not a LabelReading: {r!r}" for r in result]

    async def _judge(self, contexts: Sequence[str | Sequence[str]], claims: Sequence[str], concurrency: int,
            sync: bool = False) -> list[ClaimScore]:
        """Every claim judged, ``concurrency`` calls in flight; a claim's score is its best chunk's."""
        texts, chunked, failed, jobs = self._plan(contexts, claims)
        outcome: dict[tuple[str, str], float | str] = {}
        semaphore = asyncio.Semaphore(concurrency)

        async def ask(chunk: str, group: list[str]) -> list[str]:
            """One call for ``group``; the claims it left without a verdict."""
            values = await self._call(chunk, group, semaphore, sync)
            outcome.update(((chunk, claim), value) for claim, value in zip(group, values))
            return [claim for claim, value in zip(group, values) if isinstance(value, str)]

        async def judge(chunk: str, group: list[str]) -> None:
            missing = await ask(chunk, group)
            alone = len(missing) < len(group)  # the answer judged some claims: ask each of the others alone
            for _ in range(self.retries):
                if missing and alone:  # at once, as many as the semaphore lets through
                    missing = [c for left in await asyncio.gather(*(ask(chunk, [one]) for one in missing)) for c in left]
                elif missing:
                    missing = await ask(chunk, missing)

        if concurrency == 1:
            for chunk, group in jobs:
                await judge(chunk, group)
        else:
            await asyncio.gather(*(judge(chunk, group) for chunk, group in jobs))
        results: list[ClaimScore] = []
        for context, claim in zip(texts, claims):
            if context in failed:
                results.append(_error_score(failed[context]))
                continue
            chunks = chunked[context]
            values = [outcome[(chunk, claim)] for chunk in chunks]
            errors = [(i, v) for i, v in enumerate(values) if isinstance(v, str)]
            if errors:
                where = "" if len(chunks) == 1 else f" (chunk {errors[0][0]} of {len(chunks)})"
                results.append(_error_score(f"no verdict from {self.name}{where}: {errors[0][1]}"))
                continue
            best, index = max(((float(v), -i) for i, v in enumerate(values)))
            results.append(ClaimScore(p_unsupported=min(1.0, max(0.0, 1.0 - best)), chunk_index=-index,
                                      chunk=chunks[-index]))
        return results

    def check(self, contexts: Sequence[str | Sequence[str]], claims: Sequence[str]) -> list[ClaimScore]:
        """Judge ``claims[i]`` against ``contexts[i]`` (passages read as one text), one ``label_logprobs`` call
        after the other; a bad answer or a failed call gives those claims an ``error``, never an exception."""
        with self.lock:
            return run_sync(self._judge(contexts, claims, 1, sync=True))

    async def acheck(self, contexts: Sequence[str | Sequence[str]], claims: Sequence[str]) -> list[ClaimScore]:
        """:meth:`check` with up to ``max_concurrency`` backend calls in flight."""
        return await self._judge(contexts, claims, self.max_concurrency)

    def predict_support(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """P(supported) per ``(context, claim)`` pair, through :meth:`check`.

        Raises ``ScoringError`` when some claim got no verdict after the retries."""
        scores = self.check([p for p, _ in pairs], [h for _, h in pairs]) if pairs else []
        bad = [s.error for s in scores if s.error is not None]
        if bad:
            raise ScoringError(f"scorer {self.name!r}: {len(bad)} of {len(scores)} claim(s) got no verdict: {bad[0]}")
        return [1.0 - s.p_unsupported for s in scores]

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"
