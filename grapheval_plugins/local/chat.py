"""A LangChain chat model over llama.cpp, the offline default: greedy, prefix-cached (docs/offline.md).

Example (``pip install 'grapheval-plugins[offline]'``)::

    from grapheval_plugins.local.chat import ChatLocalLlama

    llm = ChatLocalLlama(model="qwen2.5-coder-0.5b")        # or "qwen2.5-coder-1.5b", a .gguf path, "org/repo"
    answer = llm.invoke("Name the capital of France in one word.")
    answer.content                       # 'Paris'
    answer.usage_metadata                # {'input_tokens': 38, 'output_tokens': 1, 'total_tokens': 39}
    answer.response_metadata["prefix_tokens_reused"]   # tokens served from the KV cache
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from typing import Any, cast

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.chat_models import generate_from_stream
from langchain_core.messages import AIMessageChunk, BaseMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGenerationChunk, ChatResult
from pydantic import ConfigDict, PrivateAttr, field_validator, model_validator

from .._imports import require
from ..exceptions import InputError
from .chatml import chatml_segments, message_role, message_text, tokenize_segments
from .runtime import ContextOverflowError, LlamaSession, get_session
from .weights import canonical_name, resolve_model, strip_spec_prefix, validate_reference

__all__ = ["LOOP_MAX_CHARS", "LOOP_MIN_CHARS", "ChatLocalLlama", "ends_in_loop", "load_local_chat_model"]


class ChatLocalLlama(BaseChatModel):
    """A local llama.cpp chat model (Qwen2.5 ChatML), deterministic and prefix-cached; its options: the table in
    docs/offline.md, "Load options" (``model`` is resolved on the first call)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    model: str = "qwen2.5-coder-1.5b"
    n_ctx: int = 4096
    n_threads: int | None = None
    max_tokens: int = 512
    temperature: float = 0.0
    seed: int = 0
    hub: bool = True
    cache_dir: str | None = None
    loop_repeats: int | None = 4
    model_label: str = ""  # name in reports and cache keys (default ``local:<model>``)

    _session: LlamaSession | None = PrivateAttr(default=None)

    @field_validator("model", mode="before")
    @classmethod
    def _bare_model(cls, value: Any) -> Any:
        return strip_spec_prefix(value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _check(self) -> ChatLocalLlama:
        if self.n_ctx < 64:
            raise InputError("n_ctx", f"must be at least 64, got {self.n_ctx}")
        if self.max_tokens < 1:
            raise InputError("max_tokens", f"must be at least 1, got {self.max_tokens}")
        if self.temperature < 0:
            raise InputError("temperature", f"must be >= 0, got {self.temperature}")
        if self.loop_repeats is not None and self.loop_repeats < 2:
            raise InputError("loop_repeats", f"must be None or at least 2, got {self.loop_repeats}")
        if not self.model_label:
            self.model_label = f"local:{canonical_name(self.model) or self.model}"
        return self

    def for_judging(self) -> Any:
        """The judge of an engine given this model alone: the local judge over the same weights, which reads the
        labels' log-probabilities (this model's answers are seeded, so sampled answers would all be alike).

        >>> ChatLocalLlama(model="qwen2.5-coder-0.5b", hub=False).for_judging().name
        'judge:local:qwen2.5-coder-0.5b'
        """
        from .judge import LocalJudgeScorer

        return LocalJudgeScorer(self.model, n_ctx=self.n_ctx, n_threads=self.n_threads, hub=self.hub,
                                cache_dir=self.cache_dir)

    @classmethod
    def from_session(cls, session: LlamaSession, **kwargs: Any) -> ChatLocalLlama:
        """A chat model over an existing :class:`~grapheval_plugins.local.runtime.LlamaSession` (tests, benchmarks)."""
        llm = cls(**kwargs)
        llm._session = session
        return llm

    # ------------------------------------------------------------------ LangChain plumbing
    @property
    def _llm_type(self) -> str:
        return "grapheval-llama-cpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.model, "n_ctx": self.n_ctx, "max_tokens": self.max_tokens,
                "temperature": self.temperature, "seed": self.seed, "loop_repeats": self.loop_repeats}

    @property
    def session(self) -> LlamaSession:
        if self._session is None:
            weights = partial(resolve_model, self.model, cache=self.cache_dir, hub=self.hub)
            self._session = get_session(canonical_name(self.model) or self.model, weights, role="chat",
                                        n_ctx=self.n_ctx, n_threads=self.n_threads, seed=self.seed)
        return self._session

    def load(self) -> ChatLocalLlama:
        self.session.load()
        return self

    def prompt_tokens(self, messages: list[BaseMessage]) -> list[int]:
        """The prompt's tokens: the ChatML rendering of ``messages`` followed by the assistant header."""
        segments = chatml_segments([(message_role(m), message_text(m)) for m in messages])
        session = self.session
        return tokenize_segments(segments, lambda text, special: session.tokenize(text, special=special))

    # ------------------------------------------------------------------ generation
    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
            run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        # (BaseChatModel._agenerate runs this in a worker thread: the event loop stays free.)
        return generate_from_stream(self._stream(messages, stop, run_manager, **kwargs))

    def _stream(self, messages: list[BaseMessage], stop: list[str] | None = None,
            run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any
    ) -> Iterator[ChatGenerationChunk]:
        """Text pieces as they are decoded; the last chunk carries the usage and response metadata."""

        def piece(text: str) -> ChatGenerationChunk:
            if run_manager is not None:
                run_manager.on_llm_new_token(text)
            return ChatGenerationChunk(message=AIMessageChunk(content=text))

        max_tokens = int(kwargs.get("max_tokens", self.max_tokens))
        temperature = float(kwargs.get("temperature", self.temperature))
        stops = [s for s in (stop or []) if s]
        session = self.session
        with session.lock:
            prompt = self.prompt_tokens(messages)
            if len(prompt) >= session.n_ctx:
                raise ContextOverflowError("messages", f"the prompt has {len(prompt)} tokens and the model's context "
                                           f"window is {session.n_ctx}: shorten the input or raise n_ctx")
            before = session.stats.reused_tokens
            generated: list[int] = []
            text, emitted, finish = "", 0, "length"
            hold = max((len(s) for s in stops), default=1) - 1
            for token in session.generate(prompt, max_tokens=max_tokens, temperature=temperature, seed=self.seed):
                generated.append(token)
                text = session.detokenize(generated).decode("utf-8", errors="ignore")
                cut = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
                if cut >= 0:
                    text, finish = text[:cut], "stop"
                    break
                if self.loop_repeats is not None and ends_in_loop(text, self.loop_repeats):
                    finish = "repetition"
                    break
                safe = len(text) - hold
                if safe > emitted:
                    yield piece(text[emitted:safe])
                    emitted = safe
            else:
                if len(generated) < max_tokens and len(prompt) + len(generated) < session.n_ctx:
                    finish = "stop"
            if len(text) > emitted:
                yield piece(text[emitted:])
            reused = session.stats.reused_tokens - before
        yield ChatGenerationChunk(message=AIMessageChunk(
            content="", chunk_position="last",
            usage_metadata=cast(UsageMetadata, {"input_tokens": len(prompt), "output_tokens": len(generated),
                                                "total_tokens": len(prompt) + len(generated)}),
            response_metadata={
                "model_name": self.model_label,
                "weights": session.weights.describe() if session.weights is not None else str(session.path),
                "finish_reason": finish,
                "prefix_tokens_reused": reused,
                "prompt_tokens_evaluated": len(prompt) - reused,
            },
        ))

LOOP_MIN_CHARS = 8
"""The shortest and longest stretch of text whose repeats :attr:`ChatLocalLlama.loop_repeats` counts."""
LOOP_MAX_CHARS = 400


def ends_in_loop(text: str, repeats: int, min_chars: int = LOOP_MIN_CHARS, max_chars: int = LOOP_MAX_CHARS) -> bool:
    """Whether ``text`` ends with one stretch of ``min_chars`` to ``max_chars`` characters, holding a letter or a
    digit, written ``repeats`` times in a row.

    >>> triple = '["Bahar Mustafa", "is a", "university"], '
    >>> ends_in_loop('[' + triple * 4, 4), ends_in_loop('[' + triple * 3, 4), ends_in_loop("-" * 80, 4)
    (True, False, False)
    """
    end = len(text)
    for period in range(min_chars, min(max_chars, end // repeats) + 1):
        block = text[end - period:]
        if all(text.startswith(block, end - k * period) for k in range(2, repeats + 1)) and any(
            c.isalnum() for c in block
        ):
            return True
    return False


def load_local_chat_model(name: str, **options: Any) -> ChatLocalLlama:
    """The factory behind ``local:<name or path>`` chat model specs; nothing loads before the first call."""
    if canonical_name(name) is not None:  # an embedded model: the weights packages are needed too
        require("llama_cpp", "offline", "the offline default chat model; or give your own model, e.g. "
                "llm='openai:gpt-4o-mini' with the 'openai' extra", package="llama-cpp-python")
    require("llama_cpp", "local", "the local chat model", package="llama-cpp-python")
    name = validate_reference(name)
    return ChatLocalLlama(model=name, **options)
