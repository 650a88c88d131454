"""The process-wide engines, scorers and host-model adapters every host adapter goes through (docs/architecture.md).

>>> from grapheval_plugins import GraphEval
>>> GraphEval.shared("local:qwen2.5-coder-0.5b", "hhem") is shared_engine("local:qwen2.5-coder-0.5b", "hhem")
True
>>> shared_engine(scorer="hhem", hallucination_threshold=0.2).hallucination_threshold
0.2
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, TypeVar

from . import aggregate, models, pipeline
from .exceptions import InputError
from .models import scorer_key, shared_scorer
from .pipeline import GraphEval
from .types import Mode

__all__ = ["EngineOptions", "clear_shared", "engine_options", "scorer_key", "shared_adapter", "shared_engine",
    "shared_scorer"]

T = TypeVar("T")

_LOCK = threading.RLock()  # a factory may ask for another adapter
_ADAPTERS: weakref.WeakValueDictionary[tuple[str, Any], Any] = weakref.WeakValueDictionary()
_ADAPTERS_BY_NAME: dict[tuple[str, Any], Any] = {}


shared_engine = GraphEval.shared
"""The process-wide engine for these models and options: :meth:`GraphEval.shared <grapheval_plugins.GraphEval.shared>`."""


def shared_adapter(kind: str, host_object: Any, factory: Callable[[Any], T]) -> T:
    """One adapter per host (``kind``) model object or name: ``factory(host_object)`` on the first request, the same
    after, so the copies a host makes of a metric reach one engine. An object's adapter lives while it is held."""
    named = isinstance(host_object, str)
    store: MutableMapping[tuple[str, Any], Any] = _ADAPTERS_BY_NAME if named else _ADAPTERS
    key = (kind, host_object if named else id(host_object))  # an adapter holds its object: the id stays its own
    with _LOCK:
        hit = store.get(key)
        if hit is None:
            hit = store[key] = factory(host_object)
        return hit


def clear_shared() -> None:
    """Forget every shared engine, scorer and adapter (their models are freed once nothing else holds them)."""
    with _LOCK:
        for store in (pipeline.ENGINES, pipeline.ENGINES_BY_OBJECT, models.SCORERS, _ADAPTERS, _ADAPTERS_BY_NAME):
            store.clear()


# --------------------------------------------------------------------- what an adapter was given
@dataclass(frozen=True)
class EngineOptions:
    """What a host adapter scores with, validated by :func:`engine_options`: an engine, or models and options."""

    grapheval: GraphEval | None = None
    llm: Any = None
    scorer: Any = None
    mode: Mode | None = None
    rule: aggregate.DecisionRule | None = None
    hallucination_threshold: float | None = None

    def engine(self, llm: Any = None) -> GraphEval:
        """The given engine (seen at this threshold), or the shared one; ``llm`` (a host's per-run model) replaces
        the extraction model of a spec-built engine."""
        if self.grapheval is not None:
            return self.grapheval.with_options(hallucination_threshold=self.hallucination_threshold)
        return shared_engine(
            self.llm if llm is None else llm,
            self.scorer,
            mode=self.mode or "graph",
            rule=self.rule or aggregate.HYBRID,
            hallucination_threshold=self.hallucination_threshold,
        )


def engine_options(grapheval: Any = None, *, llm: Any = None, scorer: Any = None, mode: Any = None,
        rule: Any = None, hallucination_threshold: Any = None, fields: dict[str, str] | None = None
) -> EngineOptions:
    """Validate the shared options of a host adapter (the one place): an engine ``grapheval``, or ``llm`` /
    ``scorer`` to build one; ``None`` options are the engine's own; a different threshold gives a view of the
    engine; ``fields`` are the host's names for the options in error messages.

    >>> engine_options(mode="fast")
    Traceback (most recent call last):
    ...
    grapheval_plugins.exceptions.InputError: mode: must be 'graph' or 'raw', got 'fast'
    """

    names = {name: name for name in ("grapheval", "mode", "rule", "hallucination_threshold")} | (fields or {})
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
        raise InputError(names["rule"],
                         f"{decision_rule.name!r} differs from the engine's rule {grapheval.rule.name!r}: set it on the engine")
    return EngineOptions(grapheval=grapheval, mode=grapheval.mode, rule=grapheval.rule, hallucination_threshold=value)
