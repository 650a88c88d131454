"""The process-wide stores under the engine: loaded scorers by spec (:func:`shared_scorer`, so engines over one
spec load its model once) and one engine per ``(llm, scorer, options)`` (:func:`engine_slot`, built by the caller).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

from .check.base import Scorer

__all__ = ["clear", "engine_slot", "scorer_key", "shared_scorer"]

T = TypeVar("T")

LOCK = threading.RLock()
"""Guards every store here and the registry's adapter stores."""

_SCORERS: dict[str, Scorer] = {}
_SCORER_LOCKS: dict[str, threading.Lock] = {}
_ENGINES: dict[tuple[Any, ...], Any] = {}
_ENGINES_BY_OBJECT: weakref.WeakValueDictionary[tuple[Any, ...], Any] = weakref.WeakValueDictionary()


def is_spec(value: Any) -> bool:
    """A spec string or ``None`` (the default), as opposed to a model object."""
    return value is None or isinstance(value, str)


def scorer_key(spec: str | None) -> str:
    """The canonical form of a scorer spec: ``None`` is the default, aliases name their model.

    >>> scorer_key("HHEM") == scorer_key("hhem:vectara/hallucination_evaluation_model")
    True
    """
    from .models import DEFAULT_SCORER, SCORER_ALIASES

    text = (spec or DEFAULT_SCORER).strip()
    text = SCORER_ALIASES.get(text.lower(), text)
    prefix, sep, rest = text.partition(":")
    return f"{prefix.lower()}:{rest}" if sep else text


def shared_scorer(spec: Any = None) -> Scorer:
    """The process-wide scorer for ``spec`` (a scorer object as it is): resolved once per canonical spec
    (:func:`scorer_key`); loads of different specs may run at once."""
    from . import models

    if not is_spec(spec):
        return models.resolve_scorer(spec)
    key = scorer_key(spec)
    with LOCK:
        scorer = _SCORERS.get(key)
        if scorer is not None:
            return scorer
        lock = _SCORER_LOCKS.setdefault(key, threading.Lock())
    with lock:  # one load per spec; other specs are not held up
        with LOCK:
            scorer = _SCORERS.get(key)
        if scorer is None:
            scorer = models.resolve_scorer(spec)
            with LOCK:
                _SCORERS[key] = scorer
        return scorer


def _llm_key(llm: Any) -> Hashable:
    if llm is None:
        from .models import DEFAULT_LLM

        return DEFAULT_LLM
    return llm.strip() if isinstance(llm, str) else ("object", id(llm))


def _scorer_part(scorer: Any) -> Hashable:
    return scorer_key(scorer) if is_spec(scorer) else ("object", id(scorer))


def engine_slot(llm: Any, scorer: Any, options: Hashable, build: Callable[[], T]) -> T:
    """The engine kept for ``(llm, scorer, options)``, made by ``build()`` on the first request: over spec strings
    (compared by value) for the process, over model objects (by identity) as long as something holds them."""
    from .models import scorer_for

    key = (_llm_key(llm), _scorer_part(scorer_for(llm, scorer)), options)
    store: Any = _ENGINES if is_spec(llm) and is_spec(scorer) else _ENGINES_BY_OBJECT
    with LOCK:
        engine: T | None = store.get(key)
        if engine is None:
            engine = build()
            store[key] = engine
        return engine


def clear() -> None:
    """Forget every shared engine and scorer (their models are freed once nothing else holds them)."""
    with LOCK:
        _ENGINES.clear()
        _ENGINES_BY_OBJECT.clear()
        _SCORERS.clear()
        _SCORER_LOCKS.clear()
