"""Chat-model calls and tokens per stage, with LangChain's usage callback (``docs/concepts.md#cost-per-row``): every
call inside :func:`metered`, in its tasks and threads too, reaches its :class:`StageMeter`.

>>> from langchain_core.language_models import GenericFakeChatModel
>>> from langchain_core.messages import AIMessage
>>> llm = GenericFakeChatModel(messages=iter([AIMessage("hi", usage_metadata={
...     "input_tokens": 7, "output_tokens": 1, "total_tokens": 8})]))
>>> with metered() as meter:
...     _ = llm.invoke("hello")
>>> meter.usage()
StageUsage(calls=1, input_tokens=7, output_tokens=1, cost=None)
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from langchain_core.callbacks import UsageMetadataCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tracers.context import register_configure_hook

from .types import StageUsage

__all__ = ["COST_KEY", "StageMeter", "metered", "record"]

COST_KEY = "cost_usd"
"""The ``response_metadata`` key of the US dollars an answer cost, for models that report it."""


class StageMeter(UsageMetadataCallbackHandler):
    """Counts the chat-model calls that end while it is open, their tokens and their reported cost."""

    run_inline = True  # counting is cheap: no executor hop on async runs

    def __init__(self, parent: StageMeter | None = None) -> None:
        super().__init__()
        self.parent = parent
        self._total = StageUsage()
        self._count_lock = threading.Lock()

    def on_llm_end(self, response: LLMResult, **kwargs: Any) -> None:
        super().on_llm_end(response, **kwargs)
        for generations in response.generations:
            for generation in generations:
                message = generation.message if isinstance(generation, ChatGeneration) else None
                meta = getattr(message, "usage_metadata", None) if isinstance(message, AIMessage) else None
                cost = message.response_metadata.get(COST_KEY) if isinstance(message, AIMessage) else None
                self.add(StageUsage(
                    calls=1,
                    input_tokens=None if not meta else int(meta.get("input_tokens", 0)),
                    output_tokens=None if not meta else int(meta.get("output_tokens", 0)),
                    cost=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) else None,
                ))

    def add(self, usage: StageUsage) -> None:
        if not usage.calls:
            return
        with self._count_lock:
            self._total = self._total + usage
        if self.parent is not None:
            self.parent.add(usage)

    def usage(self) -> StageUsage:
        with self._count_lock:
            return self._total.model_copy()


_meter: ContextVar[StageMeter | None] = ContextVar("grapheval_stage_meter", default=None)
register_configure_hook(_meter, inheritable=True)


@contextmanager
def metered(*, detached: bool = False) -> Iterator[StageMeter]:
    """A :class:`StageMeter` open for the code inside (``detached``: it adds nothing to an outer meter)."""
    meter = StageMeter(parent=None if detached else _meter.get())
    token = _meter.set(meter)
    try:
        yield meter
    finally:
        _meter.reset(token)


def record(usage: StageUsage) -> None:
    """Count ``usage``, measured elsewhere (a row's share of a scorer pass), in the meter open here, if any."""
    meter = _meter.get()
    if meter is not None:
        meter.add(usage)
