"""One async code path, called from sync code: :func:`run_sync` on one persistent background event loop.

Every sync method of the package runs its coroutine on one event loop per process, kept in a daemon thread, so
async resources bound to the loop of their first use (``httpx`` pools of LangChain chat models, asyncio locks)
stay usable from one sync call to the next (a fresh ``asyncio.run`` per call leaves them on a closed loop). It works
whether or not the calling thread runs a loop (Jupyter, FastAPI); context variables (LangChain callbacks, tracing)
reach the coroutine.

>>> import asyncio
>>> async def answer() -> int:
...     await asyncio.sleep(0)
...     return 42
>>> run_sync(answer())
42
>>> background_loop() is background_loop()
True
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextvars
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["background_loop", "run_sync"]

T = TypeVar("T")


class _LoopThread:
    """An event loop running forever in a daemon thread."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.thread = threading.Thread(target=self._run, name="grapheval-event-loop", daemon=True)
        self.thread.start()
        self._ready.wait()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.call_soon(self._ready.set)
        try:
            self.loop.run_forever()
        finally:
            try:
                self._cancel_pending()
                self.loop.run_until_complete(self.loop.shutdown_asyncgens())
                self.loop.run_until_complete(self.loop.shutdown_default_executor())
            finally:
                self.loop.close()

    def _cancel_pending(self) -> None:
        tasks = [t for t in asyncio.all_tasks(self.loop) if not t.done()]
        for task in tasks:
            task.cancel()
        if tasks:
            self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))

    def stop(self, timeout: float = 5.0) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout)


_LOCK = threading.Lock()
_RUNNER: _LoopThread | None = None
_PID: int | None = None


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's background event loop (started on first use; a new one after ``fork``)."""
    global _RUNNER, _PID
    runner = _RUNNER
    if runner is not None and _PID == os.getpid() and runner.thread.is_alive():
        return runner.loop
    with _LOCK:
        if _RUNNER is None or _PID != os.getpid() or not _RUNNER.thread.is_alive():
            _RUNNER = _LoopThread()  # a forked child inherits no running thread: start its own
            _PID = os.getpid()
        return _RUNNER.loop


def _shutdown() -> None:
    runner = _RUNNER
    if runner is not None and _PID == os.getpid():
        runner.stop()


atexit.register(_shutdown)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and return its result (a ``KeyboardInterrupt`` cancels it). Called from
    the background loop itself, it runs ``coro`` on a fresh loop in a worker thread instead of deadlocking."""
    loop = background_loop()
    try:
        running = asyncio.get_running_loop()
    except RuntimeError:
        running = None
    if running is loop:
        ctx = contextvars.copy_context()
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            return pool.submit(ctx.run, asyncio.run, coro).result()
    # ``run_coroutine_threadsafe`` schedules the task from a callback that runs in a copy of this thread's
    # context, so context variables reach the coroutine.
    future = asyncio.run_coroutine_threadsafe(coro, loop)
    try:
        return future.result()
    except BaseException:
        future.cancel()
        raise
