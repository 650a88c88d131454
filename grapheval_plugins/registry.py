"""One process-wide registry of engines, loaded scorers and adapted host models.

Every host adapter (DeepEval, Ragas, LangChain) gets its engine here, so a process that scores with a DeepEval
metric, a Ragas metric and a LangChain Runnable over the same model specs builds one
:class:`~grapheval_plugins.GraphEval` and loads its scorer once:

* :func:`shared_engine` (also :meth:`GraphEval.shared <grapheval_plugins.GraphEval.shared>`): the engine for
  ``(llm, scorer, mode, hallucination_threshold)``. Engines over spec strings live as long as the process (or until
  :func:`clear_shared`); engines over model objects live as long as something holds them.
* :func:`shared_scorer`: the loaded scorer for a spec string (``"hhem"`` and its long form are one spec). Every
  :class:`~grapheval_plugins.GraphEval` resolves its scorer spec through it, shared or not.
* :func:`shared_adapter`: one adapter per host model object or name (a DeepEval ``DeepEvalBaseLLM``, a Ragas LLM),
  so the copies a host makes of a metric all reach the same engine.
* :func:`engine_options`: the one place that validates what an adapter was given (an engine, or models and
  options to build one from) and hands back the engine to score with.

Nothing is loaded when an engine is looked up: models load on first use.

>>> from grapheval_plugins import GraphEval
>>> GraphEval.shared("local:qwen2.5-coder-0.5b", "hhem") is shared_engine("local:qwen2.5-coder-0.5b", "hhem")
True
>>> shared_engine(scorer="hhem", hallucination_threshold=0.2).hallucination_threshold
0.2
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from . import aggregate
from .exceptions import InputError
from .pipeline import GraphEval
from .shared import LOCK, clear, scorer_key, shared_scorer
from .types import Mode

__all__ = [
    "EngineOptions",
    "clear_shared",
    "engine_options",
    "scorer_key",
    "shared_adapter",
    "shared_engine",
    "shared_scorer",
]

T = TypeVar("T")

_ADAPTERS: weakref.WeakValueDictionary[tuple[str, int], Any] = weakref.WeakValueDictionary()
_ADAPTERS_BY_NAME: dict[tuple[str, str], Any] = {}


def shared_engine(
    llm: Any = None,
    scorer: Any = None,
    *,
    mode: Mode = "graph",
    rule: aggregate.RuleLike = "hybrid",
    hallucination_threshold: float | None = None,
    method: aggregate.RuleLike | None = None,
) -> GraphEval:
    """The process-wide :class:`~grapheval_plugins.GraphEval` for these models and options.

    Built on the first request (nothing loads until first use) and returned again for the same arguments: spec
    strings compare by value (``"hhem"`` and its long form are one), model objects by identity. Engines that
    differ only in ``hallucination_threshold`` share their models, knowledge-graph cache and scorer passes (see
    :meth:`GraphEval.with_options <grapheval_plugins.GraphEval.with_options>`). The same as
    :meth:`GraphEval.shared <grapheval_plugins.GraphEval.shared>`.

    Args:
        llm: the extraction chat model or spec (``None``: the offline default).
        scorer: the scorer or spec (``None``: the offline default).
        mode: ``"graph"`` or ``"raw"``.
        rule: the decision rule, a registered name (``"hybrid"``, default, ``"paper"``, or one added with
            :func:`~grapheval_plugins.aggregate.register_rule`) or a rule; engines with different rules are distinct.
        hallucination_threshold: the P(unsupported) above which a claim is unsupported (default 0.5).
        method: deprecated alias of ``rule`` (warns).
    """
    rule = aggregate.rule_argument(rule, method, "shared_engine") or aggregate.HYBRID
    return GraphEval.shared(llm, scorer, mode=mode, rule=rule, hallucination_threshold=hallucination_threshold)


def shared_adapter(kind: str, host_object: Any, factory: Callable[[Any], T]) -> T:
    """One adapter per host model object: ``factory(host_object)`` on the first request, the same object after.

    A host that copies a metric for every test case hands each copy the same model object; through this they all
    get the same adapter, hence the same engine from :func:`shared_engine`. ``kind`` names the host
    (``"deepeval"``, ``"ragas"``). A name (a string) is adapted once per process; an object's adapter, which holds
    the object, lives as long as something (an engine, a metric) holds the adapter.
    """
    with LOCK:
        if isinstance(host_object, str):
            hit = _ADAPTERS_BY_NAME.get((kind, host_object))
            if hit is None:
                hit = _ADAPTERS_BY_NAME[(kind, host_object)] = factory(host_object)
            return hit
        key = (kind, id(host_object))  # the adapter holds the object: its id stays its own while the entry lives
        hit = _ADAPTERS.get(key)
        if hit is None:
            hit = factory(host_object)
            _ADAPTERS[key] = hit
        return hit


def clear_shared() -> None:
    """Forget every shared engine, scorer and adapter (their models are freed once nothing else holds them)."""
    with LOCK:
        clear()
        _ADAPTERS.clear()
        _ADAPTERS_BY_NAME.clear()


# --------------------------------------------------------------------- what an adapter was given
@dataclass(frozen=True)
class EngineOptions:
    """What a host adapter scores with, validated: an engine, or the models and options to build one from.

    Made by :func:`engine_options`; :meth:`engine` gives the engine.
    """

    grapheval: GraphEval | None = None
    llm: Any = None
    scorer: Any = None
    mode: Mode | None = None
    rule: aggregate.DecisionRule | None = None
    hallucination_threshold: float | None = None

    def engine(self, llm: Any = None) -> GraphEval:
        """The engine to score with: the given engine (seen at this threshold), or the shared engine.

        ``llm`` replaces the extraction model of a spec-built engine (a host's per-run model, e.g. the ``llm=`` of
        ``ragas.evaluate()``); it is ignored when an engine was given.
        """
        if self.grapheval is not None:
            return self.grapheval.with_options(hallucination_threshold=self.hallucination_threshold)
        return shared_engine(
            self.llm if llm is None else llm,
            self.scorer,
            mode=self.mode or "graph",
            rule=self.rule or aggregate.HYBRID,
            hallucination_threshold=self.hallucination_threshold,
        )


def engine_options(
    grapheval: Any = None,
    *,
    llm: Any = None,
    scorer: Any = None,
    mode: Any = None,
    rule: Any = None,
    hallucination_threshold: Any = None,
    fields: dict[str, str] | None = None,
) -> EngineOptions:
    """Validate the shared options of a host adapter; the one place every adapter checks them.

    Args:
        grapheval: an engine to score with (passed by reference), or ``None``.
        llm, scorer: models or specs for an engine built here (refused together with ``grapheval``).
        mode: ``"graph"``, ``"raw"`` or ``None`` (the engine's own; ``"graph"`` for a built one).
        rule: the decision rule, a registered name (``"hybrid"``, ``"paper"`` …), a
            :class:`~grapheval_plugins.aggregate.DecisionRule`, or ``None`` (the engine's own; ``"hybrid"`` for a
            built one).
        hallucination_threshold: the P(unsupported) above which a claim is unsupported, in [0, 1], or ``None``
            (the engine's own; 0.5 for a built one). Hosts translate their own convention before calling this.
            With an engine whose threshold differs, :meth:`EngineOptions.engine` is a view of that engine at this
            threshold (same models, cache and scorer passes): the same behaviour in every adapter.
        fields: the host's names for the options, used in error messages (e.g. ``{"mode": "check_mode"}``).

    Raises:
        InputError: a value of the wrong type or out of range, an engine with ``llm``/``scorer``, or a ``mode`` that
            differs from the engine's.

    >>> engine_options(mode="fast")
    Traceback (most recent call last):
    ...
    grapheval_plugins.exceptions.InputError: mode: must be 'graph' or 'raw', got 'fast'
    """

    names = {"grapheval": "grapheval", "llm": "llm", "scorer": "scorer", "mode": "mode", "rule": "rule",
             "hallucination_threshold": "hallucination_threshold", **(fields or {})}
    if mode is not None and mode not in ("graph", "raw"):
        raise InputError(names["mode"], f"must be 'graph' or 'raw', got {mode!r}")
    decision_rule = None if rule is None else aggregate.get_rule(rule, names["rule"])
    value = None
    if hallucination_threshold is not None:
        value = aggregate.check_threshold(hallucination_threshold, names["hallucination_threshold"])
    if grapheval is None:
        return EngineOptions(llm=llm, scorer=scorer, mode=mode, rule=decision_rule, hallucination_threshold=value)
    if not isinstance(grapheval, GraphEval):
        raise InputError(names["grapheval"], f"expected a GraphEval engine, got {type(grapheval).__name__}", reason="type")
    if llm is not None or scorer is not None:
        raise InputError(
            names["grapheval"], f"give either {names['grapheval']}= or llm=/scorer=, not both (the engine has its own)"
        )
    if mode is not None and mode != grapheval.mode:
        raise InputError(
            names["mode"], f"{mode!r} differs from the engine's mode {grapheval.mode!r}: set it on the engine"
        )
    if decision_rule is not None and decision_rule is not grapheval.rule:
        raise InputError(
            names["rule"],
            f"{decision_rule.name!r} differs from the engine's rule {grapheval.rule.name!r}: set it on the engine",
        )
    # Another threshold than the engine's: every adapter scores with a view of the engine at that threshold (same
    # models, cache and scorer passes; :meth:`GraphEval.with_options`), never by changing the shared engine.
    return EngineOptions(grapheval=grapheval, mode=grapheval.mode, rule=grapheval.rule, hallucination_threshold=value)
