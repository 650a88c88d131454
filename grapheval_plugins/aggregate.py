"""Stage 3: pure decision rules over the claims' P(unsupported).

Two rules, each giving a row's P(hallucination); the output is a hallucination iff it exceeds the *hallucination
threshold* (0.5): the one threshold concept of the core, ``GraphEval(hallucination_threshold=...)``.

- ``method="paper"``: the largest P(unsupported) over the triples' claims (the paper's rule).
- ``method="hybrid"`` (the default): a logistic combination of the whole output's P(unsupported) and the largest
  over its triples, ``σ(bias + whole · logit(p_whole) + claims · logit(max p_claim))``, with weights fitted per
  scorer (:data:`HYBRID_WEIGHTS`; fitted by ``benchmarks/detection.py fit-hybrid``). A scorer without fitted weights
  is decided by the paper's rule.

The score reported to host frameworks (1 = faithful) is ``1 − P(hallucination)``; a host whose threshold is a
minimum score (DeepEval) is translated with :func:`threshold_for_min_score`, so that ``score >= min_score`` is
exactly "not a hallucination" at the translated threshold.

>>> any_above([0.1, 0.7], 0.5)
True
>>> faithfulness_score([0.1, 0.7])
0.30000000000000004
>>> mean = HybridWeights(whole=0.5, claims=0.5, bias=0.0, fitted_on="the mean of the two log-odds")
>>> round(mean.probability(0.2, [0.1, 0.8]), 3)
0.5
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from .exceptions import InputError

__all__ = [
    "FIDELITY_THRESHOLD",
    "HYBRID_WEIGHTS",
    "HYBRID_WEIGHTS_FIDELITY",
    "Fidelity",
    "HybridWeights",
    "any_above",
    "check_threshold",
    "faithful_to_output",
    "faithfulness_score",
    "hybrid_weights",
    "logit",
    "max_unsupported",
    "p_hallucination",
    "sigmoid",
    "threshold_for_min_score",
]

DEFAULT_THRESHOLD = 0.5
"""The paper's hallucination threshold."""


def max_unsupported(p_unsupported: Sequence[float]) -> float:
    """The largest P(unsupported); 0.0 for no claims."""
    return max(p_unsupported, default=0.0)


def any_above(p_unsupported: Sequence[float], threshold: float = 0.5) -> bool:
    """The paper's rule: True iff some claim's P(unsupported) is strictly above ``threshold``."""
    return any(p > threshold for p in p_unsupported)


def faithfulness_score(p_unsupported: Sequence[float]) -> float:
    """``1 − max P(unsupported)``: 1 = every claim supported, 0 = some claim certainly unsupported."""
    return 1.0 - max_unsupported(p_unsupported)


def check_threshold(value: object, field: str = "hallucination_threshold") -> float:
    """A hallucination threshold as a float in [0, 1], or :class:`~grapheval_plugins.InputError` naming ``field``.

    >>> check_threshold(1)
    1.0
    >>> check_threshold(1.5, "threshold")
    Traceback (most recent call last):
    ...
    grapheval_plugins.exceptions.InputError: threshold: must be a number in [0, 1], got 1.5
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        raise InputError(field, f"must be a number in [0, 1], got {value!r}")
    return float(value)


def threshold_for_min_score(min_score: float) -> float:
    """The hallucination threshold at which "not a hallucination" is exactly ``score >= min_score``.

    ``score = 1 − max P(unsupported)``, so the threshold is ``1 − min_score``, rounded to 12 decimals so that the
    boundary case agrees in floating point too (a claim at P(unsupported) = 0.2 passes a minimum score of 0.8).

    >>> threshold_for_min_score(0.8)
    0.2
    >>> score = faithfulness_score([0.2])
    >>> score >= 0.8, any_above([0.2], threshold_for_min_score(0.8))
    (True, False)
    """
    return round(1.0 - check_threshold(min_score, "threshold"), 12)


_EPS = 1e-4  # probabilities are clipped to [_EPS, 1 - _EPS] before their log-odds are taken


def logit(p: float) -> float:
    """``log(p / (1 - p))`` with ``p`` clipped to [1e-4, 1 − 1e-4], so 0 and 1 stay finite.

    >>> round(logit(0.5), 6), round(logit(1.0), 2)
    (0.0, 9.21)
    """
    p = min(max(float(p), _EPS), 1.0 - _EPS)
    return math.log(p / (1.0 - p))


def sigmoid(x: float) -> float:
    """The logistic function, inverse of :func:`logit` (stable for large ``|x|``)."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


@dataclass(frozen=True)
class HybridWeights:
    """The ``hybrid`` rule's weights: ``P = σ(bias + whole · logit(p_whole) + claims · logit(max p_claim))``.

    ``p_whole`` is the scorer's P(unsupported) for the whole output read as one claim, ``max p_claim`` the largest
    over the output's triples (``p_whole`` again when no triple was extracted). ``fitted_on`` says where the
    weights come from (data sets and command), so a report can name its calibration.

    >>> w = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="the whole output alone")
    >>> round(w.probability(0.3, [0.9]), 6)
    0.3
    """

    whole: float
    claims: float
    bias: float
    fitted_on: str

    def probability(self, p_whole: float, p_claims: Sequence[float]) -> float:
        """P(hallucination) of one output from its whole-output and per-triple P(unsupported)."""
        p_max = max(p_claims) if len(p_claims) else p_whole
        return sigmoid(self.bias + self.whole * logit(p_whole) + self.claims * logit(p_max))


HYBRID_WEIGHTS: dict[str, HybridWeights] = {
    "judge:local:qwen2.5-coder-1.5b": HybridWeights(
        whole=0.5862, claims=0.1684, bias=0.7111,
        fitted_on="summeval+qags_c+qags_x (874 rows, examples-first+pairs per-row files): benchmarks/detection.py "
                  "fit-hybrid --llm local:qwen2.5-coder-1.5b --scorer judge:local:qwen2.5-coder-1.5b",
    ),
}
"""Fitted ``hybrid`` weights per scorer name (:attr:`Scorer.name <grapheval_plugins.check.Scorer.name>`). A scorer
without an entry (and no ``GraphEval(hybrid_weights=...)``) is decided by the paper's rule."""


HYBRID_WEIGHTS_FIDELITY: dict[str, HybridWeights] = {
    "judge:local:qwen2.5-coder-1.5b": HybridWeights(
        whole=0.4917, claims=0.3224, bias=0.6320,
        fitted_on="summeval+qags_c+qags_x (874 rows, examples-first+pairs per-row files, triples the output does not "
                  "support dropped): benchmarks/detection.py fit-hybrid --llm local:qwen2.5-coder-1.5b --scorer "
                  "judge:local:qwen2.5-coder-1.5b --fidelity",
    ),
}
"""Fitted ``hybrid`` weights per scorer name for ``GraphEval(fidelity="drop")``: the kept triples carry more signal,
so their term weighs more than in :data:`HYBRID_WEIGHTS`."""


def hybrid_weights(scorer_name: str | None, fidelity: Fidelity = "off") -> HybridWeights | None:
    """The fitted weights of this scorer (for this extraction-fidelity setting), or ``None`` (then the paper's rule
    decides).

    >>> hybrid_weights("some-other-scorer") is None
    True
    >>> hybrid_weights("judge:local:qwen2.5-coder-1.5b", "drop").claims
    0.3224
    """
    table = HYBRID_WEIGHTS_FIDELITY if fidelity == "drop" else HYBRID_WEIGHTS
    return table.get(scorer_name or "")


def p_hallucination(p_triples: Sequence[float], p_whole: float | None, weights: HybridWeights | None) -> float:
    """A row's P(hallucination): the hybrid rule when ``weights`` and the whole output's ``p_whole`` are given,
    else the paper's rule (the largest of ``p_triples``).

    >>> p_hallucination([0.1, 0.7], None, None)
    0.7
    >>> w = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="the whole output alone")
    >>> round(p_hallucination([0.1, 0.7], 0.2, w), 6)
    0.2
    """
    if weights is None or p_whole is None:
        return max_unsupported(p_triples)
    return weights.probability(p_whole, p_triples)


Fidelity = Literal["off", "drop"]
"""Extraction fidelity (``GraphEval(fidelity=...)``): ``"drop"`` scores each triple against the output it was
extracted from and leaves out of the decision the triples the output does not support; ``"off"`` keeps them all."""

FIDELITY_THRESHOLD = 0.5
"""A triple whose P(unsupported), scored against its own output, is above this is not a faithful extraction."""


def faithful_to_output(p_unsupported_by_output: float | None) -> bool:
    """The fidelity rule: a triple stays unless its own output does not support it (P(unsupported) above
    :data:`FIDELITY_THRESHOLD`); a triple the scorer could not judge against the output (``None``) stays.

    >>> faithful_to_output(0.2), faithful_to_output(0.9), faithful_to_output(None)
    (True, False, True)
    """
    return p_unsupported_by_output is None or p_unsupported_by_output <= FIDELITY_THRESHOLD
