"""Stage 1 of GraphEval: one chat-model call turns an LLM output into a knowledge graph.

The grounding context is never sent to the chat model: only the output and the fixed prompt A.
"""

from __future__ import annotations

import asyncio
import logging

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import RunnableConfig

from ..cache import CachedKG, KGCache
from ..exceptions import ExtractionError
from ..messages import describe_llm, message_text
from ..retry import Reprompt, RetryPolicy, is_retryable
from ..types import Extraction, Triple
from .parser import parse_triples
from .prompts import KG_PROMPT, KGPrompt

__all__ = ["TripleExtractor", "describe_llm"]

logger = logging.getLogger(__name__)


class TripleExtractor:
    """Prompt A + a chat model + the safe parser, with ``max_retries`` extra calls (an unparseable answer is asked
    again at once, a call that raised after ``retry``'s backoff) and an optional cache
    (:class:`~grapheval_plugins.cache.KGCache`, keyed on the model's name, the prompt's ``cache_id`` and the text).

    Example:
        >>> from grapheval_plugins.testing import ScriptedChatModel
        >>> llm = ScriptedChatModel(responses=['<python>[["Paris", "capital of", "France"]]</python>'])
        >>> TripleExtractor(llm).extract("Paris is the capital of France.").triples[0].as_list()
        ['Paris', 'capital of', 'France']
    """

    def __init__(
        self,
        llm: BaseChatModel,
        prompt: KGPrompt = KG_PROMPT,
        max_retries: int = 2,
        cache: KGCache | None = None,
        *,
        retry: RetryPolicy | None = None,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.retry = retry if retry is not None else RetryPolicy.from_retries(max_retries)
        self.llm = llm
        self.prompt = prompt
        self.cache = cache
        self.llm_id = describe_llm(llm)
        self.prompt_id = prompt.cache_id

    def extract(self, text: str, config: RunnableConfig | None = None) -> Extraction:
        """Synchronous :meth:`aextract`."""
        from .._async import run_sync

        return run_sync(self.aextract(text, config=config))

    async def aextract(self, text: str, config: RunnableConfig | None = None) -> Extraction:
        """The knowledge graph of ``text``: ``fallback=True`` with no triples when no answer parsed (cached as an
        empty graph when every call answered); :class:`ExtractionError` when every call raised."""
        if self.cache is not None:
            hit = await asyncio.to_thread(self.cache.get, self.llm_id, self.prompt_id, text)
            if hit is not None:
                return Extraction(
                    triples=[Triple.from_list(t) for t in hit.triples],
                    raw_text=hit.raw_text,
                    cached=True,
                    fallback=not hit.triples,
                )

        messages: list[BaseMessage] = self.prompt.messages(text)
        issues: list[str] = []
        last_error: BaseException | None = None
        raw: str | None = None
        triples: list[Triple] = []
        attempts = 0
        try:
            async for attempt in self.retry.retrying():
                with attempt:
                    attempts += 1
                    try:
                        answer = await self.llm.ainvoke(messages, config=config)
                    except Exception as exc:  # noqa: BLE001 - retried when it can succeed, then reported
                        last_error = exc
                        issues.append(f"attempt {attempts}: chat model raised {type(exc).__name__}: {exc}")
                        if not is_retryable(exc):
                            issues.append(f"not retried: {type(exc).__name__} cannot succeed on another call")
                        raise
                    raw = message_text(answer)
                    parsed = parse_triples(raw)
                    issues.extend(parsed.issues)
                    if not parsed.triples:
                        reason = parsed.issues[-1] if parsed.issues else "no triple found"
                        messages = [*self.prompt.messages(text), AIMessage(raw), self.prompt.retry_message(reason)]
                        raise Reprompt(reason)
                    triples = parsed.triples
        except Exception as exc:  # noqa: BLE001 - attempts ran out: reported below
            if last_error is not None and exc is last_error:
                logger.warning("KG extraction call failed (attempt %d, no retry left): %s", attempts, exc)
        if not triples and raw is None and last_error is not None:
            raise ExtractionError(
                f"the chat model {self.llm_id} raised on all {attempts} attempt(s): "
                f"{type(last_error).__name__}: {last_error}"
            ) from last_error
        if self.cache is not None and (triples or last_error is None):
            # An answered run that parsed nothing is cached as an empty graph, so a re-run makes no call.
            value = CachedKG(triples=[t.as_list() for t in triples], raw_text=raw)
            await asyncio.to_thread(self.cache.set, self.llm_id, self.prompt_id, text, value)
        if triples:
            return Extraction(triples=triples, raw_text=raw, attempts=attempts, issues=issues)
        issues.append("no parseable knowledge graph; the whole output is checked as one claim")
        return Extraction(triples=[], raw_text=raw, attempts=attempts, fallback=True, issues=issues)
