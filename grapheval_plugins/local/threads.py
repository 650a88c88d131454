"""How many CPU threads a llama.cpp call gets on a machine that other work may be using.

llama.cpp splits every operation of a forward pass over its threads and waits for all of them at the end of each
one, so a thread that shares a core with another busy process stalls the whole pass: on 2 cores beside one other
busy llama.cpp process, 2 threads decoded ~9× slower than 1. Two mechanisms keep the local models at least as fast
as one thread:

* :func:`free_threads` picks a count from what is free now: the kernel's instantaneous count of runnable threads
  (``procs_running`` in ``/proc/stat``) minus this process's own runnable threads, spread over the online CPUs.
  :func:`read_cpu_load` samples it (a few reads, well under a millisecond); it is taken before every evaluation.
* :class:`ThreadGovernor` backs off during decoding from measured step times: it compares the time per decode step
  at the chosen count with one thread (probed for a step or two, now and then) and keeps whichever is faster, so a
  load that the count does not show (a CPU quota, another container on the same cores) is caught as well.
* :data:`LEDGER` holds the threads this process's own sessions are evaluating with. Two llama.cpp contexts of one
  process (the chat model extracting, the judge reading a context) may run at once; each other's threads are this
  process's own, so the load reading does not show them: an evaluation starts when its threads fit beside theirs,
  else waits for them (:meth:`ThreadLedger.acquire`), and one meant to run beside another reserves its threads
  first (:meth:`ThreadLedger.reserve`).

Greedy output does not depend on the thread count (llama.cpp's CPU kernels split rows, not sums, over threads).
An explicit ``n_threads=`` bypasses both. Everything here is pure (no llama.cpp); the tests feed it fake
``/proc`` text and fake timings.
"""

from __future__ import annotations

import os
import statistics
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "LEDGER",
    "CpuLoad",
    "ThreadGovernor",
    "ThreadLedger",
    "allowed_cpus",
    "free_threads",
    "own_running_threads",
    "parse_proc_stat",
    "read_cpu_load",
    "step_cost",
]

BATCH_STEP_COST = 0.08
"""Extra cost of each further token in one evaluation, relative to a one-token decode step (decoding is bound by
reading the weights, so a short batch costs little more than one token); :func:`step_cost` normalises step times
with it so that steps of different sizes compare."""


@dataclass(frozen=True)
class CpuLoad:
    """One reading of how busy the machine is.

    Attributes:
        procs_running: runnable threads on the whole system (``/proc/stat``), this process's included.
        own_running: runnable threads of this process at the same moment.
        online: CPUs of the system (the ``cpuN`` lines of ``/proc/stat``).
        allowed: CPUs this process may run on (its affinity mask).
    """

    procs_running: int
    own_running: int
    online: int
    allowed: int

    @property
    def others(self) -> int:
        """Runnable threads of other processes."""
        return max(0, self.procs_running - self.own_running)


def parse_proc_stat(text: str) -> tuple[int | None, int]:
    """``(procs_running, online CPUs)`` from the text of ``/proc/stat`` (``None`` when the line is missing).

    >>> parse_proc_stat("cpu  1 2 3\\ncpu0 1 2 3\\ncpu1 4 5 6\\nprocs_running 3\\nprocs_blocked 0\\n")
    (3, 2)
    """
    running: int | None = None
    online = 0
    for line in text.splitlines():
        if line.startswith("cpu") and line[3:4].isdigit():
            online += 1
        elif line.startswith("procs_running"):
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                running = int(parts[1])
    return running, online


def own_running_threads(stats: Iterable[str]) -> int:
    """How many of this process's threads are runnable, from the texts of ``/proc/self/task/*/stat``.

    The state is the first field after the command name in parentheses (which may itself hold spaces or ')').

    >>> own_running_threads(["12 (python) R 1 2", "13 (llama worker) S 1 2", "14 (a) b) R 0"])
    2
    """
    count = 0
    for text in stats:
        tail = text.rpartition(")")[2].split()
        if tail and tail[0] == "R":
            count += 1
    return count


def allowed_cpus() -> int:
    """CPUs this process may run on (its affinity mask, else the CPU count)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def _read_own_task_stats(task_dir: Path) -> list[str]:
    texts: list[str] = []
    try:
        entries = list(task_dir.iterdir())
    except OSError:
        return texts
    for entry in entries:
        try:
            texts.append((entry / "stat").read_text(encoding="ascii", errors="replace"))
        except OSError:  # the thread ended meanwhile
            continue
    return texts


def read_cpu_load(
    *,
    samples: int = 3,
    proc: Path = Path("/proc"),
    read_text: Callable[[Path], str] | None = None,
    allowed: int | None = None,
) -> CpuLoad | None:
    """Read the load now: the reading with the fewest other runnable threads among ``samples`` quick reads (a
    core is taken as busy only if it is busy in every read). ``None`` where ``/proc/stat`` cannot be read (not
    Linux)."""
    read = read_text or (lambda p: p.read_text(encoding="ascii", errors="replace"))
    best: CpuLoad | None = None
    for _ in range(max(1, samples)):
        try:
            running, online = parse_proc_stat(read(proc / "stat"))
        except OSError:
            return None
        if running is None:
            return None
        own = own_running_threads(_read_own_task_stats(proc / "self" / "task"))
        load = CpuLoad(
            procs_running=running, own_running=own, online=max(online, 1),
            allowed=allowed if allowed is not None else allowed_cpus(),
        )
        if best is None or load.others < best.others:
            best = load
    return best


def free_threads(load: CpuLoad | None, max_threads: int) -> int:
    """Threads to use given ``load``: the allowed CPUs not taken by other runnable threads, between 1 and
    ``max_threads`` (``max_threads`` when the load is unknown).

    Other processes' runnable threads are assumed spread evenly over the online CPUs, so on a large machine where
    this process may use only some of them, each allowed CPU gets its share.

    >>> free_threads(CpuLoad(procs_running=2, own_running=1, online=2, allowed=2), 2)
    1
    >>> free_threads(CpuLoad(procs_running=1, own_running=1, online=2, allowed=2), 2)
    2
    """
    if load is None:
        return max(1, max_threads)
    allowed = max(1, min(load.allowed, load.online))
    if load.online <= load.allowed:
        busy = load.others
    else:
        busy = round(load.others * allowed / load.online)
    return max(1, min(max_threads, allowed - busy))


class ThreadLedger:
    """The threads each evaluating session of this process holds now (a session is a holder, by identity), and
    the admission of a new evaluation.

    An evaluation starts (:meth:`acquire`) when no other session of the process is evaluating, or when its threads
    fit beside theirs in what other processes leave free; otherwise it waits for them (so two sessions never crowd
    the same cores: a llama.cpp pass waits for its slowest thread). A session does not wait once it is evaluating
    (only its count changes, :meth:`hold`), so no two sessions wait for each other. While one waits, the sessions
    evaluating shrink to make room for it at their next decode step (:meth:`share`: an even part each), so two
    stages that run at once (the judge checking one row while the chat model extracts the next) each get their
    part instead of taking turns.

    >>> ledger = ThreadLedger()
    >>> a, b = object(), object()
    >>> ledger.acquire(a, free=lambda: 4), ledger.held_by_others(b)
    (4, 4)
    >>> ledger.hold(a, 2); ledger.reserve(b, free=4)  # half of what the others leave, held at once
    1
    >>> ledger.reserve(object(), free=4) is None  # 4 - 3 held: no two threads left to share
    True
    >>> ledger.release(a); ledger.release(b); ledger.held_by_others(object())
    0
    >>> ledger.acquire(a, free=lambda: 2), ledger.share(a, free=2)  # alone: all of them
    (2, 2)
    """

    def __init__(self, wait_limit_s: float = 120.0) -> None:
        self._cond = threading.Condition()
        self._held: dict[int, int] = {}
        self._waiting: dict[int, int] = {}  # holders waiting in acquire(): their fixed count, or 0
        self.wait_limit_s = wait_limit_s
        """The longest :meth:`acquire` waits (a holder that never releases costs this much, not a hang)."""

    def _others(self, holder: object) -> int:
        key = id(holder)
        return sum(n for k, n in self._held.items() if k != key)

    def held_by_others(self, holder: object) -> int:
        """Threads held by every holder but ``holder``."""
        with self._cond:
            return self._others(holder)

    def acquire(self, holder: object, free: Callable[[], int], fixed: int | None = None) -> int:
        """Wait until ``holder`` may start an evaluation, then hold its threads and return their count: ``fixed``,
        or what ``free()`` (the threads other processes leave, :func:`free_threads`) leaves beside the other
        holders, at least one. Admitted at once when nobody else holds threads."""
        deadline: float | None = None
        key = id(holder)
        with self._cond:
            try:
                while True:
                    others = self._others(holder)
                    available = free()
                    threads = fixed if fixed else max(1, available - others)
                    now = time.monotonic()
                    deadline = now + self.wait_limit_s if deadline is None else deadline
                    if others == 0 or threads + others <= available or now >= deadline:
                        self._held[key] = threads
                        return threads
                    self._waiting[key] = fixed or 0  # the holders make room at their next step (share)
                    self._cond.wait(min(0.05, deadline - now))
            finally:
                self._waiting.pop(key, None)

    def share(self, holder: object, free: int) -> int:
        """The threads ``holder``, evaluating, may use now: what ``free`` (the threads other processes leave)
        leaves beside the other holders, and, while other sessions wait to start, what leaves room for them (a
        waiting session's fixed count, else an even part of ``free`` among all of them), when that is at least
        one; a holder that could not make room that way keeps its threads."""
        key = id(holder)
        with self._cond:
            threads = free - self._others(holder)
            waiting = {k: n for k, n in self._waiting.items() if k != key}
            if waiting:
                even = max(1, free // len(set(self._held) | set(waiting) | {key}))
                room = threads - sum(n or even for n in waiting.values())
                if room >= 1:
                    threads = min(threads, room)
            return max(1, threads)

    def waiting(self, holder: object) -> bool:
        """Whether another session waits to start an evaluation."""
        with self._cond:
            return any(k != id(holder) for k in self._waiting)

    def hold(self, holder: object, threads: int) -> None:
        """``holder`` evaluates with ``threads`` threads from now on (until :meth:`release`)."""
        with self._cond:
            self._held[id(holder)] = max(1, int(threads))
            self._cond.notify_all()

    def release(self, holder: object) -> None:
        """``holder`` evaluates no more."""
        with self._cond:
            self._held.pop(id(holder), None)
            self._cond.notify_all()

    def reserve(self, holder: object, free: int, fixed: int | None = None) -> int | None:
        """Threads for an evaluation that is to run beside another one of this process, held at once (so that the
        other, starting next, leaves them alone): half of the ``free`` threads (what other processes leave, from
        :func:`free_threads`) that no other holder holds, or ``fixed`` when the session's count is fixed; ``None``
        when that would not leave as many for the other evaluation (running both would only contend)."""
        with self._cond:
            available = free - self._others(holder)
            threads = fixed if fixed else available // 2
            if threads < 1 or 2 * threads > available:
                return None
            self._held[id(holder)] = threads
            return threads


LEDGER = ThreadLedger()
"""The process-wide :class:`ThreadLedger` every :class:`~grapheval_plugins.local.runtime.LlamaSession` reports to."""


def step_cost(tokens: int) -> float:
    """Relative cost of one evaluation of ``tokens`` tokens (1.0 for one token); see :data:`BATCH_STEP_COST`."""
    return 1.0 + BATCH_STEP_COST * max(0, tokens - 1)


@dataclass
class ThreadGovernor:
    """Chooses the thread count of each decode step from measured step times.

    Two arms: one thread, and the ``cap`` (the threads :func:`free_threads` allows now, set with :meth:`set_cap`).
    It runs the faster arm, probes the other now and then for ``probe_steps`` steps (cut short after one step that
    is more than ``abort_ratio`` times slower than the arm it left), and switches when the probe's median
    normalised step time is below the current arm's by more than ``margin``. A probe that loses doubles the wait
    before the next (from ``reprobe_every`` steps up to ``max_reprobe_every``); one that wins resets it. A step
    with several threads more than ``abort_ratio`` times slower than their recent median (a load that just
    started) brings the next probe of one thread forward to the next step. The first probe comes after ``warmup_steps``. Only the last ``window``
    samples of the running arm count.

    Call :meth:`threads` for the count of the next step and :meth:`observe` with its duration and size.
    """

    max_threads: int
    cap: int = 0
    probe_steps: int = 2
    warmup_steps: int = 1
    reprobe_every: int = 32
    max_reprobe_every: int = 1024
    abort_ratio: float = 2.0
    margin: float = 0.1
    window: int = 6
    _samples: dict[int, deque[float]] = field(default_factory=dict, init=False, repr=False)
    _current: int = field(default=0, init=False)
    _probing: int = field(default=0, init=False)  # probe steps left
    _probe_arm: int = field(default=0, init=False)
    _home: int = field(default=0, init=False)  # the arm a probe returns to
    _wait: int = field(default=0, init=False)  # steps until the next probe
    _backoff: int = field(default=0, init=False)
    _steps: int = field(default=0, init=False)
    _probe_values: list[float] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self.max_threads = max(1, self.max_threads)
        self.cap = self.max_threads if self.cap <= 0 else max(1, min(self.cap, self.max_threads))
        self._current = self.cap
        self._backoff = self.reprobe_every
        self._wait = self.warmup_steps

    @property
    def current(self) -> int:
        """The arm the last :meth:`threads` call chose (the one :meth:`observe` records)."""
        return self._current

    @property
    def preferred(self) -> int:
        """The arm the governor runs outside its probes (for evaluations it does not time, such as a prompt)."""
        return self._home if self._probing else self._current

    # ------------------------------------------------------------------ inputs
    def set_cap(self, cap: int) -> None:
        """What the load allows now (:func:`free_threads`). A lower cap applies at once; a higher one is tried by
        a probe before it is kept, unless nothing is known about the current arm yet."""
        cap = max(1, min(cap, self.max_threads))
        if cap == self.cap:
            return
        old, self.cap = self.cap, cap
        for arm in [a for a in self._samples if a not in (1, cap)]:
            del self._samples[arm]
        if self._probing and self._probe_arm not in (1, cap):
            self._probing = 0
        if self._current > cap or self._current not in (1, cap):
            self._current = cap if self._current > 1 else 1
        elif cap > old and self._current == 1 and not self._probing and not self._samples.get(1):
            self._current = cap  # one thread was never timed (a session that only evaluates prompts): no probe
        elif cap > old and self._current == 1 and not self._probing:
            # cores came free: try them soon (less soon after lost probes, so a flickering reading costs little)
            self._wait = min(self._wait, max(self.warmup_steps, self._backoff // 4))
        if self._home not in (1, cap):
            self._home = self._current

    def observe(self, seconds: float, tokens: int = 1) -> None:
        """Record that the last step (at :meth:`threads` threads, ``tokens`` tokens) took ``seconds``."""
        value = seconds / step_cost(tokens)
        self._steps += 1
        if self._probing:
            self._probe_values.append(value)
            self._probing -= 1
            home = self._median(self._home)
            if self._probing and home is not None and value > self.abort_ratio * home:
                self._probing = 0  # hopeless: stop probing now
            if not self._probing:
                self._end_probe()
            return
        before = self._median(self._current)
        self._samples.setdefault(self._current, deque(maxlen=self.window)).append(value)
        self._wait -= 1
        if self._current > 1 and before is not None and value > self.abort_ratio * before:
            self._wait = 0  # several threads just became much slower: compare with one thread now

    # ------------------------------------------------------------------ decision
    def threads(self) -> int:
        """The thread count for the next step."""
        if self.cap == 1:
            self._current = 1
            return 1
        if not self._probing and self._wait <= 0:
            other = 1 if self._current != 1 else self.cap
            self._home, self._probe_arm, self._probing = self._current, other, self.probe_steps
            self._probe_values = []
            self._current = other
        return self._current

    def _median(self, arm: int) -> float | None:
        samples = self._samples.get(arm)
        return statistics.median(samples) if samples else None

    def _end_probe(self) -> None:
        probe = statistics.median(self._probe_values) if self._probe_values else None
        home = self._median(self._home)
        if probe is not None and (home is None or probe < home * (1.0 - self.margin)):
            self._current = self._probe_arm  # the other arm is faster: stay there
            self._samples[self._probe_arm] = deque(self._probe_values, maxlen=self.window)
            self._backoff = self.reprobe_every
        else:
            self._current = self._home
            self._backoff = min(self.max_reprobe_every, self._backoff * 2)
        self._wait = self._backoff
