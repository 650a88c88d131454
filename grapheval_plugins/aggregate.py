"""Stage 3: the decision rules over the claims' P(unsupported), named and registered (docs/concepts.md).

>>> mean = HybridWeights(whole=0.5, claims=0.5, bias=0.0, fitted_on="the mean of the two log-odds")
>>> round(mean.probability(0.2, [0.1, 0.8]), 3)
0.5
"""

from __future__ import annotations

import dataclasses
import functools
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeAlias

from typing_extensions import deprecated

from .exceptions import InputError, renamed
from .types import ClaimCheck, Decision

__all__ = ["FIDELITY_THRESHOLD", "FITTED_WEIGHTS", "HYBRID", "PAPER", "RULES", "DecisionRule", "Fidelity",
    "FidelityOption", "HybridRule", "HybridWeights", "Needs", "PaperRule", "RuleLike", "check_threshold",
    "faithful_to_output", "fidelity_to_check", "fitted_weights", "get_rule", "hybrid_weights", "logit",
    "register_rule", "rule_argument", "sigmoid", "threshold_for_min_score"]

DEFAULT_THRESHOLD = 0.5
"""The paper's hallucination threshold."""


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
    """The hallucination threshold at which "not a hallucination" is exactly ``score >= min_score``: ``1 − min_score``,
    rounded to 12 decimals so that the boundary agrees in floating point too.

    >>> threshold_for_min_score(0.8), 1.0 - 0.2 >= 0.8
    (0.2, True)
    """
    return round(1.0 - check_threshold(min_score, "threshold"), 12)


def logit(p: float) -> float:
    """``log(p / (1 - p))`` with ``p`` clipped to [1e-4, 1 − 1e-4], so 0 and 1 stay finite.

    >>> round(logit(0.5), 6), round(logit(1.0), 2)
    (0.0, 9.21)
    """
    p = min(max(float(p), 1e-4), 1.0 - 1e-4)
    return math.log(p / (1.0 - p))


def sigmoid(x: float) -> float:
    """The logistic function, inverse of :func:`logit` (stable for large ``|x|``)."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


Fidelity = Literal["off", "drop"]
"""Extraction fidelity in force: ``"drop"`` leaves out the triples their own output does not support; ``"off"``."""

FidelityOption = Literal["auto", "off", "drop"]
"""``GraphEval(fidelity=...)``: a :data:`Fidelity`, or ``"auto"`` (the default; see ``GraphEval.fidelity_in_force``)."""


@dataclasses.dataclass(frozen=True)
class HybridWeights:
    """The ``hybrid`` rule's weights and the setting they were fitted for (``None``: any; ``fingerprint``: the
    scorer's :meth:`~grapheval_plugins.check.Scorer.fingerprint`).

    >>> w = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="the whole output alone")
    >>> round(w.probability(0.3, [0.9]), 6)
    0.3
    """

    whole: float
    claims: float
    bias: float
    fitted_on: str
    scorer: str | None = None
    prompt: str | None = None
    fidelity: Fidelity | None = None
    fingerprint: str | None = None

    def probability(self, p_whole: float, p_claims: Sequence[float]) -> float:
        """P(hallucination) of one output from its whole-output and per-triple P(unsupported)."""
        p_max = max(p_claims) if len(p_claims) else p_whole
        return sigmoid(self.bias + self.whole * logit(p_whole) + self.claims * logit(p_max))


_FITTED_WITH = ("summeval+qags_c+qags_x (728 rows: summeval 254, qags_c 235, qags_x 239; "
                "judge wording question-first, {}): "
                "benchmarks/bench_judge_prompt.py fit --variant question-first")

_FITTED_JUDGE = "48ed8ef2b2073f46"
"""The fingerprint of the judge the shipped entries were fitted with (the 1.5B's weights, wording and window)."""

FITTED_WEIGHTS: list[HybridWeights] = [
    HybridWeights(
        whole=0.5734, claims=0.1321, bias=0.9423, fitted_on=_FITTED_WITH.format("every triple"),
        scorer="judge:local:qwen2.5-coder-1.5b", prompt="kg-a/1-examples-first", fidelity="off",
        fingerprint=_FITTED_JUDGE,
    ),
    HybridWeights(
        whole=0.4928, claims=0.2501, bias=0.8905,
        fitted_on=_FITTED_WITH.format("triples the output does not support dropped"),
        scorer="judge:local:qwen2.5-coder-1.5b", prompt="kg-a/1-examples-first", fidelity="drop",
        fingerprint=_FITTED_JUDGE,
    ),
]
"""The ``hybrid`` rule's fitted weights, each for one (scorer, prompt version, fidelity, fingerprint) setting; append
an entry for your own setting (``None`` fields match any)."""


def fitted_weights(scorer: str | None, prompt: str | None, fidelity: Fidelity = "off",
                   fingerprint: str | Callable[[], str | None] | None = None) -> HybridWeights | None:
    """The weights fitted for this scorer name, prompt version and fidelity, or ``None``. ``fingerprint`` (or a
    function giving it, called only when needed) passes over entries fitted with another scorer of the same name.

    >>> fitted_weights("judge:local:qwen2.5-coder-1.5b", "kg-a/1-examples-first", "drop").claims
    0.2501
    >>> fitted_weights("judge:local:qwen2.5-coder-1.5b", "my-prompt/1") is None
    True
    >>> fitted_weights("judge:local:qwen2.5-coder-1.5b", "kg-a/1-examples-first", "off", "0123456789abcdef") is None
    True
    """
    given = functools.cache(fingerprint if callable(fingerprint) else lambda: fingerprint)
    for wanted in (prompt, None):  # fitted for this prompt, else for any
        for w in FITTED_WEIGHTS:
            if (w.scorer, w.prompt, w.fidelity) == (scorer, wanted, fidelity) and (
                    w.fingerprint is None or fingerprint is None or given() in (None, w.fingerprint)):
                return w
    return None


class _ByScorer(dict[str, HybridWeights]):
    """Deprecated: :data:`FITTED_WEIGHTS` of one fidelity by scorer (setting one replaces that scorer's)."""

    def __init__(self, fidelity: Fidelity) -> None:
        super().__init__()
        self.fidelity: Fidelity = fidelity
        for w in FITTED_WEIGHTS:
            if w.scorer is not None and w.fidelity == fidelity:
                super().setdefault(w.scorer, w)

    def __setitem__(self, scorer: str, weights: HybridWeights) -> None:
        weights = dataclasses.replace(weights, scorer=scorer, prompt=None, fidelity=self.fidelity)
        FITTED_WEIGHTS[:] = [w for w in FITTED_WEIGHTS if (w.scorer, w.fidelity) != (scorer, self.fidelity)]
        FITTED_WEIGHTS.append(weights)
        super().__setitem__(scorer, weights)


_DEPRECATED: dict[str, Fidelity] = {"HYBRID_WEIGHTS": "off", "HYBRID_WEIGHTS_FIDELITY": "drop"}


def __getattr__(name: str) -> Any:
    """Deprecated aliases: ``HYBRID_WEIGHTS`` and ``HYBRID_WEIGHTS_FIDELITY``, per scorer name (warn)."""
    if name in _DEPRECATED:
        warnings.warn(f"aggregate.{name} is deprecated: use FITTED_WEIGHTS (keyed by scorer, prompt version and "
                      "fidelity) and fitted_weights()", DeprecationWarning, stacklevel=2)
        return _ByScorer(_DEPRECATED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@deprecated("aggregate.hybrid_weights is deprecated: use fitted_weights(scorer, prompt version, fidelity)")
def hybrid_weights(scorer_name: str | None, fidelity: Fidelity = "off") -> HybridWeights | None:
    """Deprecated: :func:`fitted_weights`. The weights fitted for this scorer and fidelity, any prompt.

    >>> hybrid_weights("some-other-scorer") is None
    True
    """
    return _ByScorer(fidelity).get(scorer_name or "")


# --------------------------------------------------------------------- decision rules, named and registered
@dataclasses.dataclass(frozen=True)
class Needs:
    """What a decision rule needs: the whole output scored as one more claim, and fitted weights."""

    whole_output: bool = False
    weights: bool = False


class DecisionRule:
    """A named decision rule: a row's claims in, its :class:`~grapheval_plugins.types.Decision` out (adding one:
    docs/architecture.md)."""

    name: ClassVar[str] = ""
    needs: ClassVar[Needs] = Needs()

    def decide(self, claims: list[ClaimCheck], *, threshold: float, whole_output: ClaimCheck | None = None,
               weights: HybridWeights | None = None) -> Decision:
        """The verdict on one row; ``whole_output`` and ``weights`` are given when :attr:`needs` asks for them."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


class PaperRule(DecisionRule):
    """The paper's rule: P(hallucination) is the largest P(unsupported) over the claims.

    >>> d = PAPER.decide([ClaimCheck(claim="a", p_unsupported=0.3, unsupported=False)], threshold=0.5)
    >>> d.p_hallucination, d.case
    (0.3, 'faithful')
    """

    name = "paper"

    def decide(self, claims: list[ClaimCheck], *, threshold: float, whole_output: ClaimCheck | None = None,
               weights: HybridWeights | None = None) -> Decision:
        p = max((c.p_unsupported for c in claims), default=0.0)
        return Decision.of(self.name, p, claims, threshold)


class HybridRule(DecisionRule):
    """The hybrid rule: :meth:`HybridWeights.probability`; with nothing extracted the whole output stands for
    both terms, and without weights or a whole-output score the largest claim's decides.

    >>> w = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="the whole output alone")
    >>> claim = ClaimCheck(claim="a b", p_unsupported=0.9, unsupported=True)
    >>> whole = ClaimCheck(claim="A b.", p_unsupported=0.2, unsupported=False)
    >>> d = HYBRID.decide([claim], threshold=0.5, whole_output=whole, weights=w)
    >>> round(d.p_hallucination, 6), d.case, d.why
    (0.2, 'outweighed', "the whole output's score")
    """

    name = "hybrid"
    needs = Needs(whole_output=True, weights=True)

    def decide(self, claims: list[ClaimCheck], *, threshold: float, whole_output: ClaimCheck | None = None,
               weights: HybridWeights | None = None) -> Decision:
        ps = [c.p_unsupported for c in claims]
        p_whole = whole_output.p_unsupported if whole_output is not None else (
            ps[0] if claims and claims[0].triple is None else None)
        p = max(ps, default=0.0) if weights is None or p_whole is None else weights.probability(p_whole, ps)
        return Decision.of(self.name, p, claims, threshold, why="the whole output's score")


PAPER = PaperRule()
HYBRID = HybridRule()

RULES: dict[str, DecisionRule] = {PAPER.name: PAPER, HYBRID.name: HYBRID}
"""The registered decision rules by name (``GraphEval(rule=name)``); :func:`register_rule` adds one."""

RuleLike: TypeAlias = str | DecisionRule
"""A decision rule, or the name of a registered one."""


def register_rule(rule: DecisionRule, *, replace: bool = False) -> DecisionRule:
    """Register ``rule`` under its name for ``GraphEval(rule=name)`` and return it; a name taken by another rule
    is refused unless ``replace=True``.

    >>> class Mean(DecisionRule):
    ...     name = "doc-mean"
    ...     def decide(self, claims, *, threshold, whole_output=None, weights=None):
    ...         p = sum(c.p_unsupported for c in claims) / len(claims) if claims else 0.0
    ...         return Decision.of(self.name, p, claims, threshold, why="the mean over the claims")
    >>> mean = register_rule(Mean())
    >>> get_rule("doc-mean") is mean
    True
    >>> del RULES["doc-mean"]
    """
    if not isinstance(rule, DecisionRule) or not isinstance(rule.name, str) or not rule.name:
        raise InputError("rule", f"a decision rule is a DecisionRule with a name, got {rule!r}", reason="type")
    if not replace and RULES.get(rule.name, rule) is not rule:
        raise InputError("rule", f"a rule named {rule.name!r} is registered already (replace=True replaces it)")
    RULES[rule.name] = rule
    return rule


def get_rule(rule: object, field: str = "rule") -> DecisionRule:
    """The decision rule ``rule`` names (a registered name), or ``rule`` itself when it is a
    :class:`DecisionRule`; else :class:`~grapheval_plugins.InputError` naming ``field``.

    >>> get_rule("paper") is PAPER
    True
    >>> get_rule("vote")
    Traceback (most recent call last):
    ...
    grapheval_plugins.exceptions.InputError: rule: must be a registered decision rule ('hybrid', 'paper'), got 'vote'
    """
    if isinstance(rule, DecisionRule):
        return rule
    found = RULES.get(rule) if isinstance(rule, str) else None
    if found is None:
        names = ", ".join(repr(n) for n in sorted(RULES))
        raise InputError(field, f"must be a registered decision rule ({names}), got {rule!r}")
    return found


def rule_argument(rule: RuleLike | None, method: RuleLike | None, owner: str, *, default: RuleLike | None = "hybrid",
                  stacklevel: int = 3) -> RuleLike | None:
    """The decision rule given to ``owner`` as ``rule=``, or as ``method=``, its deprecated old name (warns);
    ``default`` when neither. ``rule`` equal to ``default`` counts as not given.

    >>> rule_argument("paper", None, "GraphEval")
    'paper'
    >>> rule_argument("paper", "hybrid", "GraphEval")
    Traceback (most recent call last):
    ...
    grapheval_plugins.exceptions.InputError: method: give rule= (method= is its deprecated old name), not both
    """
    chosen = renamed(owner, "method", method, "rule", None if rule == default else rule,
                     note=", the decision rule (GraphCorrect's correction strategy is strategy=...)",
                     same=lambda old, new: get_rule(old, "method").name == get_rule(new).name, stacklevel=stacklevel + 1)
    if method is not None:
        get_rule(method, "method")
    return default if chosen is None else chosen


FIDELITY_THRESHOLD = 0.5
"""A triple whose P(unsupported), scored against its own output, is above this is not a faithful extraction."""


def faithful_to_output(p_unsupported_by_output: float | None) -> bool:
    """The fidelity rule: a triple stays unless its own output does not support it (P(unsupported) above
    :data:`FIDELITY_THRESHOLD`); a triple the scorer could not judge against the output (``None``) stays.

    >>> faithful_to_output(0.2), faithful_to_output(0.9), faithful_to_output(None)
    (True, False, True)
    """
    return p_unsupported_by_output is None or p_unsupported_by_output <= FIDELITY_THRESHOLD


def fidelity_to_check(
    p_context: Sequence[float | None], p_output: Mapping[int, float | None], threshold: float
) -> list[int]:
    """Which triples to score against their own output next (``[]``: settled), deciding as scoring them all: those
    above ``threshold`` at once, then one at a time in decreasing ``p_context`` until one is kept (``p_output``).

    >>> fidelity_to_check([0.9, 0.2, 0.1, None], {}, 0.5)       # the triple above the threshold first
    [0]
    >>> fidelity_to_check([0.9, 0.2, 0.1, None], {0: 0.8}, 0.5)  # dropped: the next one down
    [1]
    >>> fidelity_to_check([0.9, 0.2, 0.1, None], {0: 0.8, 1: 0.1}, 0.5)  # kept: settled, the third is not needed
    []
    """
    order = sorted((i for i, p in enumerate(p_context) if p is not None), key=lambda i: -(p_context[i] or 0.0))
    above = [i for i in order if (p_context[i] or 0.0) > threshold and i not in p_output]
    if above:
        return above
    for i in order:
        if i not in p_output:
            return [i]
        if faithful_to_output(p_output[i]):
            return []
    return []
