"""One async code path, called from sync code: :func:`run_sync` on one persistent background event loop, so
async resources bound to the loop of their first use stay usable across sync calls (``docs/architecture.md``).

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


_LOCK = threading.Lock()
_LOOP: asyncio.AbstractEventLoop | None = None
_THREAD: threading.Thread | None = None
_PID: int | None = None


def _serve(loop: asyncio.AbstractEventLoop) -> None:
    asyncio.set_event_loop(loop)
    try:
        loop.run_forever()
    finally:
        try:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
        finally:
            loop.close()


def background_loop() -> asyncio.AbstractEventLoop:
    """The process's background event loop (started on first use; a new one after ``fork``)."""
    global _LOOP, _THREAD, _PID
    with _LOCK:
        if _LOOP is None or _THREAD is None or _PID != os.getpid() or not _THREAD.is_alive():
            _LOOP, _PID = asyncio.new_event_loop(), os.getpid()  # a forked child inherits no running thread
            _THREAD = threading.Thread(target=_serve, args=(_LOOP,), name="grapheval-event-loop", daemon=True)
            _THREAD.start()
        return _LOOP


@atexit.register
def _shutdown() -> None:
    if _LOOP is not None and _THREAD is not None and _PID == os.getpid() and not _LOOP.is_closed():
        _LOOP.call_soon_threadsafe(_LOOP.stop)
        _THREAD.join(5.0)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` on the background loop and return its result (a ``KeyboardInterrupt`` cancels it). Called from
    the background loop itself, it runs ``coro`` on a fresh loop in a worker thread instead of deadlocking."""
    loop = background_loop()
    if threading.current_thread() is _THREAD:  # on the background loop itself
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
