"""The sync API over one persistent background event loop (``_async.run_sync``)."""

from __future__ import annotations

import asyncio
import contextvars
import threading
from typing import Any

import pytest
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from grapheval_plugins import GraphEval
from grapheval_plugins._async import background_loop, run_sync
from grapheval_plugins.testing import KeywordScorer


class PooledAsyncClient:
    """Stands for an ``httpx.AsyncClient`` / ``openai.AsyncOpenAI``: on first use it binds to the running loop
    (a connection task reading a request queue, the way a keep-alive pool holds its connections), and later
    requests go through that connection. A request from another loop cannot be served (the real clients fail
    with "Event loop is closed" or "attached to a different loop")."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.queue: asyncio.Queue[tuple[str, asyncio.Future[str]]] | None = None
        self.connection: asyncio.Task[None] | None = None
        self.served = 0

    async def _serve(self) -> None:
        assert self.queue is not None
        while True:
            text, reply = await self.queue.get()
            self.served += 1
            reply.set_result(text)

    async def post(self, text: str) -> str:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
            self.queue = asyncio.Queue()
            self.connection = self.loop.create_task(self._serve())
        assert self.queue is not None
        reply: asyncio.Future[str] = self.loop.create_future()
        self.queue.put_nowait((text, reply))
        return await asyncio.wait_for(reply, timeout=10)


class PooledChatModel(BaseChatModel):
    """A chat model over one reused async client, answering one triple per output."""

    _client: PooledAsyncClient = PrivateAttr(default_factory=PooledAsyncClient)

    @property
    def _llm_type(self) -> str:
        return "pooled"

    @property
    def client(self) -> PooledAsyncClient:
        return self._client

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        raise NotImplementedError("async only, like a provider client")

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = str(messages[-1].content).split("<input>")[-1].split("</input>")[0].strip()
        echoed = await self._client.post(text)
        answer = f'<python>[["{echoed.split()[0]}", "is", "{echoed.split()[-1].rstrip(".")}"]]</python>'
        return ChatResult(generations=[ChatGeneration(message=AIMessage(answer))])


def test_one_async_client_is_reused_across_20_sync_calls() -> None:
    llm = PooledChatModel()
    engine = GraphEval(llm=llm, scorer=KeywordScorer(), cache=False)
    reports = [engine.evaluate("Paris is in France.", f"Paris number {i} is in France.") for i in range(20)]
    assert all(r.ok for r in reports), [r.errors for r in reports if not r.ok]
    assert llm.client.served == 20
    assert llm.client.connection is not None and not llm.client.connection.done()
    assert llm.client.loop is background_loop()


async def test_the_sync_api_works_inside_a_running_event_loop() -> None:
    # pytest-asyncio runs this test on its own loop in the main thread, as Jupyter and FastAPI run theirs.
    outer = asyncio.get_running_loop()
    llm = PooledChatModel()
    engine = GraphEval(llm=llm, scorer=KeywordScorer(), cache=False)
    first = engine.evaluate("Paris is in France.", "Paris is in France.")
    second = engine.evaluate("Paris is in France.", "Paris is in Spain.")
    assert first.hallucinated is False and second.hallucinated is True
    assert llm.client.loop is background_loop() and llm.client.loop is not outer
    assert llm.client.served == 2


def test_run_sync_returns_results_raises_errors_and_keeps_context_variables() -> None:
    request_id: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="none")

    async def read() -> str:
        await asyncio.sleep(0)
        return request_id.get()

    async def fail() -> None:
        raise KeyError("boom")

    token = request_id.set("r-42")
    try:
        assert run_sync(read()) == "r-42"
    finally:
        request_id.reset(token)
    with pytest.raises(KeyError, match="boom"):
        run_sync(fail())


def test_one_loop_serves_every_thread() -> None:
    loops: list[asyncio.AbstractEventLoop] = []

    async def which() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    threads = [threading.Thread(target=lambda: loops.append(run_sync(which()))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(loops) == 4 and all(loop is background_loop() for loop in loops)


def test_a_sync_call_made_on_the_background_loop_itself_does_not_deadlock() -> None:
    async def inner() -> int:
        return 7

    async def outer() -> int:
        return run_sync(inner())  # e.g. a sync API used inside a callback running on the background loop

    assert run_sync(outer()) == 7
