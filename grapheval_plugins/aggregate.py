"""Stage 3: the decision rules over the claims' P(unsupported), named and registered.

A decision rule is a :class:`DecisionRule`: it declares what it needs (:class:`Needs`: the whole output scored as
one more claim, fitted weights) and gives a row's :class:`~grapheval_plugins.types.Decision`: its P(hallucination)
and its own account of the verdict (the claim that decided; whether another term outweighed a claim above the
threshold, or flagged the output with none above), from which every host's explanation is built. The output is a
hallucination iff P(hallucination) exceeds the *hallucination threshold* (0.5): the one threshold concept of the
core, ``GraphEval(hallucination_threshold=...)``. Rules are looked up by name in :data:`RULES`
(``GraphEval(rule="paper")``); :func:`register_rule` adds one.

- ``"paper"`` (:class:`PaperRule`): the largest P(unsupported) over the triples' claims (the paper's rule).
- ``"hybrid"`` (:class:`HybridRule`, the default): a logistic combination of the whole output's P(unsupported) and
  the largest over its triples, ``σ(bias + whole · logit(p_whole) + claims · logit(max p_claim))``, with weights
  fitted for one scorer (its name and :meth:`~grapheval_plugins.check.Scorer.fingerprint`: wording, calibration,
  weights file …), extraction prompt and fidelity setting (:data:`FITTED_WEIGHTS`, looked up by
  :func:`fitted_weights`; fitted by ``benchmarks/detection.py fit-hybrid``). An engine with no weights fitted for
  its setting is decided by the paper's rule.

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

import dataclasses
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Literal, TypeAlias

from .exceptions import InputError
from .types import ClaimCheck, Decision

__all__ = [
    "FIDELITY_THRESHOLD",
    "FITTED_WEIGHTS",
    "HYBRID",
    "PAPER",
    "RULES",
    "DecisionRule",
    "Fidelity",
    "FidelityOption",
    "HybridRule",
    "HybridWeights",
    "Needs",
    "PaperRule",
    "RuleLike",
    "any_above",
    "check_threshold",
    "faithful_to_output",
    "faithfulness_score",
    "fidelity_to_check",
    "fitted_weights",
    "get_rule",
    "hybrid_weights",
    "logit",
    "max_unsupported",
    "p_hallucination",
    "register_rule",
    "rule_argument",
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


Fidelity = Literal["off", "drop"]
"""Extraction fidelity in force: ``"drop"`` scores triples against the output they were extracted from and leaves
out of the decision the triples the output does not support; ``"off"`` keeps them all. Fitted weights are keyed by
it (:attr:`HybridWeights.fidelity`)."""

FidelityOption = Literal["auto", "off", "drop"]
"""``GraphEval(fidelity=...)``: a :data:`Fidelity`, or ``"auto"`` (the default): ``"drop"`` where weights fitted with
it exist for the engine's setting (:data:`FITTED_WEIGHTS`; the offline default judge has them), else ``"off"``."""


@dataclasses.dataclass(frozen=True)
class HybridWeights:
    """The ``hybrid`` rule's weights: ``P = σ(bias + whole · logit(p_whole) + claims · logit(max p_claim))``.

    ``p_whole`` is the scorer's P(unsupported) for the whole output read as one claim, ``max p_claim`` the largest
    over the output's triples (``p_whole`` again when no triple was extracted). ``fitted_on`` says where the
    weights come from (data sets and command), so a report can name its calibration; ``scorer``, ``prompt`` (the
    extraction prompt's :attr:`~grapheval_plugins.KGPrompt.version`), ``fidelity`` and ``fingerprint`` (the
    scorer's :meth:`~grapheval_plugins.check.Scorer.fingerprint` when fitted: its wording, calibration, window,
    weights file …) say for which setting they were fitted (:data:`FITTED_WEIGHTS` is looked up by them; ``None``
    for weights given to one engine, or a setting not recorded: any).

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
"""The fingerprint of the judge the shipped entries were fitted with (recorded in every row of their files): the
1.5B's pinned weights, its question-first wording, identity calibration and a 4096-token window."""

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
"""The ``hybrid`` rule's fitted weights, each for one (scorer, extraction prompt version, fidelity) setting. The
prompt is the engine's ``prompt.version`` (``KG_PROMPT``'s, ``"kg-a/1-examples-first"``: the benchmark files' tag
``examples-first+pairs`` is that prompt's graphs read with pairs, as the parser reads them). Under
``fidelity="drop"`` the kept triples carry more signal, so their term weighs more. The scorer's entries were
fitted with its own judge wording (the 1.5B's: ``local.judge.QUESTION_FIRST_PROMPT``, from ``JUDGE_PROMPTS``),
weights file and window, which their ``fingerprint`` records: a judge of that name with another wording, file or
window gets none of them (the paper's rule decides). Append an entry for your own setting (``prompt=None``: fitted
without one recorded, for any prompt; ``fingerprint=None``: for any scorer of that name)."""


def fitted_weights(scorer: str | None, prompt: str | None, fidelity: Fidelity = "off",
                   fingerprint: str | Callable[[], str | None] | None = None) -> HybridWeights | None:
    """The weights fitted for this scorer name, extraction prompt version and fidelity setting, or ``None`` (then
    the hybrid rule leaves the decision to the paper's rule).

    ``fingerprint`` is the scorer's :meth:`~grapheval_plugins.check.Scorer.fingerprint` (or a function giving it,
    called only when an entry records one): an entry fitted with another scorer of the same name (another judge
    wording, weights file or window) is passed over. ``None`` (or a function giving ``None``): not checked, what
    was fitted for the name.

    >>> fitted_weights("judge:local:qwen2.5-coder-1.5b", "kg-a/1-examples-first", "drop").claims
    0.2501
    >>> fitted_weights("judge:local:qwen2.5-coder-1.5b", "my-prompt/1") is None
    True
    >>> fitted_weights("judge:local:qwen2.5-coder-1.5b", "kg-a/1-examples-first", "off", "0123456789abcdef") is None
    True
    """
    known: list[str | None] = []

    def matches(w: HybridWeights) -> bool:
        if w.fingerprint is None or fingerprint is None:
            return True
        if not known:
            known.append(fingerprint() if callable(fingerprint) else fingerprint)
        return known[0] is None or w.fingerprint == known[0]

    for wanted in (prompt, None):  # fitted for this prompt, else for any
        for w in FITTED_WEIGHTS:
            if (w.scorer, w.prompt, w.fidelity) == (scorer, wanted, fidelity) and matches(w):
                return w
    return None


class _ByScorer(dict[str, HybridWeights]):
    """The deprecated per-scorer tables: a view of :data:`FITTED_WEIGHTS` for one fidelity setting; an entry set
    here replaces that scorer's entries there, for any prompt (as setting it in the old table did)."""

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


def hybrid_weights(scorer_name: str | None, fidelity: Fidelity = "off") -> HybridWeights | None:
    """Deprecated: :func:`fitted_weights`, which also takes the extraction prompt version. The weights fitted for
    this scorer and fidelity setting, whatever the prompt.

    >>> hybrid_weights("some-other-scorer") is None
    True
    """
    warnings.warn("aggregate.hybrid_weights is deprecated: use fitted_weights(scorer, prompt version, fidelity)",
                  DeprecationWarning, stacklevel=2)
    return _ByScorer(fidelity).get(scorer_name or "")


def p_hallucination(p_triples: Sequence[float], p_whole: float | None, weights: HybridWeights | None) -> float:
    """A row's P(hallucination): the hybrid rule when ``weights`` and the whole output's ``p_whole`` are given,
    else the paper's rule (the largest of ``p_triples``). The arithmetic of :class:`HybridRule` and
    :class:`PaperRule`.

    >>> p_hallucination([0.1, 0.7], None, None)
    0.7
    >>> w = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="the whole output alone")
    >>> round(p_hallucination([0.1, 0.7], 0.2, w), 6)
    0.2
    """
    if weights is None or p_whole is None:
        return max_unsupported(p_triples)
    return weights.probability(p_whole, p_triples)


# --------------------------------------------------------------------- decision rules, named and registered
@dataclasses.dataclass(frozen=True)
class Needs:
    """What a decision rule needs from the engine.

    ``whole_output``: the whole output scored as one more claim against the context (given to
    :meth:`DecisionRule.decide` as ``whole_output``). ``weights``: weights fitted for the engine's (scorer,
    extraction prompt version, fidelity) setting (:func:`fitted_weights`, or the engine's own ``hybrid_weights``);
    an engine without them is decided by the paper's rule.
    """

    whole_output: bool = False
    weights: bool = False


class DecisionRule:
    """A named decision rule: a row's claims in, its :class:`~grapheval_plugins.types.Decision` out.

    Subclass it, set :attr:`name` (and :attr:`needs`), implement :meth:`decide`, and :func:`register_rule` an
    instance; ``GraphEval(rule=name)`` then decides by it. ``decide`` gets the row's claims (the triples' claims,
    or the whole output as the one claim when nothing was extracted), each with its P(unsupported), and returns
    :meth:`Decision.of <grapheval_plugins.types.Decision.of>` of its P(hallucination), so the explanation every
    host shows is built from it; ``why`` names, in the rule's words, what outweighs or combines the claims.

    Under extraction fidelity (``GraphEval(fidelity="drop")``, or ``"auto"`` where weights fitted with it exist)
    the claims are the triples kept after a round trip scored as far as a rule over the *largest* P(unsupported)
    needs it (:func:`fidelity_to_check`): a triple below the first kept one is passed on unchecked. Both shipped
    rules read the largest; a rule that reads every triple (a mean, a count) should be used with ``fidelity="off"``.
    """

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
        p = max_unsupported([c.p_unsupported for c in claims])
        return Decision.of(self.name, p, claims, threshold)


class HybridRule(DecisionRule):
    """The hybrid rule: a logistic combination of the whole output's P(unsupported) and the largest claim's, with
    weights fitted for the engine's setting (:data:`FITTED_WEIGHTS`).

    With nothing extracted, the one claim is the whole output and stands for both terms; when the whole output's
    own claim went unjudged, the largest claim's P(unsupported) decides (and only a positive verdict stands).

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
        return Decision.of(self.name, p_hallucination(ps, p_whole, weights), claims, threshold,
                           why="the whole output's score")


PAPER = PaperRule()
HYBRID = HybridRule()

RULES: dict[str, DecisionRule] = {PAPER.name: PAPER, HYBRID.name: HYBRID}
"""The registered decision rules by name (``GraphEval(rule=name)``); :func:`register_rule` adds one."""

RuleLike: TypeAlias = str | DecisionRule
"""A decision rule, or the name of a registered one."""


def register_rule(rule: DecisionRule, *, replace: bool = False) -> DecisionRule:
    """Register ``rule`` under its :attr:`~DecisionRule.name`, so that ``GraphEval(rule=name)`` decides by it;
    returns it. A name already taken by another rule is refused unless ``replace=True``.

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
    if method is None:
        return default if rule is None else rule
    warnings.warn(f"{owner}(method=...) is deprecated: pass rule=..., the decision rule (GraphCorrect's correction "
                  "strategy is strategy=...)", DeprecationWarning, stacklevel=stacklevel)
    given = get_rule(method, "method")
    if rule is not None and rule != default and get_rule(rule).name != given.name:
        raise InputError("method", "give rule= (method= is its deprecated old name), not both")
    return method


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
    """Which triples to score against their own output next, so that the decision is the one scoring every triple
    gives, at a fraction of the cost.

    ``p_context[i]`` is claim ``i``'s P(unsupported) against the context (``None`` for a claim that is not a triple,
    or was not judged); ``p_output`` holds the triples already scored against the output. Both rules read the
    largest P(unsupported) over the kept triples, and an explanation names every triple above ``threshold``; so
    the triples above the threshold are checked first (all at once), then the others one at a time in decreasing
    P(unsupported) until one is kept. A triple below the first kept one decides nothing and is not checked.
    Returns ``[]`` when nothing more is needed.

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
