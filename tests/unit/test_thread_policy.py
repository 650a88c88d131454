"""The thread policy of the local models (grapheval_plugins.local.threads and its use in LlamaSession), fed fake
``/proc`` text and fake step times: no timing is measured here."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from local_fake_llama import byte_tokens, scripted_reply
from test_prompt_lookup import SOURCE, BatchFakeLlama, copy_with_changes, prompt_for, run

from grapheval_plugins.local.runtime import LlamaSession, clear_sessions, get_session
from grapheval_plugins.local.threads import (
    LEDGER,
    CpuLoad,
    ThreadGovernor,
    ThreadLedger,
    free_threads,
    own_running_threads,
    parse_proc_stat,
    read_cpu_load,
    step_cost,
)

PROC_STAT = """cpu  32637 0 5175 14865 173 0 138 132 0 0
cpu0 14115 0 1681 10638 39 0 4 61 0 0
cpu1 18522 0 3494 4227 134 0 133 70 0 0
intr 1 2 3
ctxt 12345
btime 1764600000
processes 5334
procs_running {running}
procs_blocked 0
"""


def fake_proc(tmp_path: Path, running: int, own_states: list[str]) -> Path:
    proc = tmp_path / "proc"
    (proc / "self" / "task").mkdir(parents=True)
    (proc / "stat").write_text(PROC_STAT.format(running=running))
    for i, state in enumerate(own_states):
        task = proc / "self" / "task" / str(100 + i)
        task.mkdir()
        (task / "stat").write_text(f"{100 + i} (python3 (x)) {state} 1 100 100 0 -1 4194560")
    return proc


# ---------------------------------------------------------------------- reading the load
def test_parse_proc_stat() -> None:
    assert parse_proc_stat(PROC_STAT.format(running=4)) == (4, 2)
    assert parse_proc_stat("cpu 1 2\ncpu0 1 2\n") == (None, 1)
    assert parse_proc_stat("procs_running x\n") == (None, 0)


def test_own_running_threads_reads_the_state_after_the_command_name() -> None:
    assert own_running_threads(["1 (a) R 0", "2 (b c) S 0", "3 (d) e) R 0", "4 (R) S 0", ""]) == 2


def test_read_cpu_load_subtracts_this_process(tmp_path: Path) -> None:
    proc = fake_proc(tmp_path, running=3, own_states=["R", "S", "R"])
    load = read_cpu_load(proc=proc, allowed=2)
    assert load == CpuLoad(procs_running=3, own_running=2, online=2, allowed=2) and load.others == 1
    assert free_threads(load, 2) == 1


def test_read_cpu_load_takes_the_least_busy_of_its_samples(tmp_path: Path) -> None:
    readings = iter([PROC_STAT.format(running=3), PROC_STAT.format(running=1), PROC_STAT.format(running=2)])
    proc = fake_proc(tmp_path, running=0, own_states=["R"])
    load = read_cpu_load(proc=proc, allowed=2, read_text=lambda path: next(readings))
    assert load is not None and load.others == 0


def test_read_cpu_load_without_proc_is_unknown(tmp_path: Path) -> None:
    assert read_cpu_load(proc=tmp_path / "nowhere") is None
    (tmp_path / "stat").write_text("cpu 1 2 3\n")
    assert read_cpu_load(proc=tmp_path) is None
    assert free_threads(None, 8) == 8


@pytest.mark.parametrize(
    ("load", "max_threads", "expected"),
    [
        (CpuLoad(procs_running=1, own_running=1, online=2, allowed=2), 2, 2),  # idle
        (CpuLoad(procs_running=2, own_running=1, online=2, allowed=2), 2, 1),  # one busy process beside us
        (CpuLoad(procs_running=5, own_running=1, online=2, allowed=2), 2, 1),  # overloaded: never below 1
        (CpuLoad(procs_running=3, own_running=1, online=16, allowed=16), 16, 14),
        (CpuLoad(procs_running=3, own_running=1, online=16, allowed=16), 4, 4),  # the cap
        # 64 host CPUs, 4 allowed: 32 other runnable threads are about 2 per allowed CPU … 2 of our 4
        (CpuLoad(procs_running=33, own_running=1, online=64, allowed=4), 4, 2),
        (CpuLoad(procs_running=2, own_running=1, online=64, allowed=4), 4, 4),
        (CpuLoad(procs_running=0, own_running=3, online=2, allowed=2), 2, 2),  # inconsistent reading
    ],
)
def test_free_threads(load: CpuLoad, max_threads: int, expected: int) -> None:
    assert free_threads(load, max_threads) == expected


def test_step_cost_grows_slowly_with_the_batch() -> None:
    assert step_cost(1) == 1.0 and step_cost(0) == 1.0
    assert 1.0 < step_cost(11) < 11.0


# ---------------------------------------------------------------------- the governor
def drive(governor: ThreadGovernor, seconds: dict[int, float], steps: int) -> list[int]:
    """Run ``steps`` decode steps where a step at ``n`` threads takes ``seconds[n]``; the counts used."""
    used = []
    for _ in range(steps):
        n = governor.threads()
        used.append(n)
        governor.observe(seconds[n], 1)
    return used


BUSY = {1: 0.080, 2: 0.700}  # measured on 2 cores beside another busy llama.cpp process
IDLE = {1: 0.080, 2: 0.050}


def test_governor_backs_off_to_one_thread_when_the_cores_are_taken() -> None:
    governor = ThreadGovernor(2)
    used = drive(governor, BUSY, 300)
    assert used[0] == 2 and used[1:3] == [1, 1]  # the first probe of one thread
    assert governor.preferred == 1
    slow = used.count(2)
    assert slow <= 5  # every later probe of 2 threads is cut after one step, and they get rarer
    cost = sum(BUSY[n] for n in used)
    assert cost <= 1.25 * 300 * BUSY[1]


def test_governor_keeps_all_threads_when_they_are_faster() -> None:
    governor = ThreadGovernor(2)
    used = drive(governor, IDLE, 300)
    assert governor.preferred == 2
    assert used.count(1) <= 12
    assert sum(IDLE[n] for n in used) <= 1.05 * 300 * IDLE[2]


def test_governor_follows_a_load_that_comes_and_goes() -> None:
    governor = ThreadGovernor(2)
    drive(governor, IDLE, 50)
    assert governor.preferred == 2
    drive(governor, BUSY, 200)  # a load the kernel's count did not show
    assert governor.preferred == 1
    used = drive(governor, IDLE, 3000)
    assert governor.preferred == 2 and used[-100:].count(2) >= 95


def test_a_lower_cap_applies_at_once_and_a_higher_one_is_probed() -> None:
    governor = ThreadGovernor(4)
    assert governor.threads() == 4
    governor.set_cap(1)
    assert governor.threads() == 1 and drive(governor, {1: 0.1}, 50) == [1] * 50
    governor.set_cap(3)
    used = drive(governor, {1: 0.1, 3: 0.04}, 20)
    assert 3 in used[:3] and governor.preferred == 3
    governor.set_cap(8)  # above max_threads
    assert governor.cap == 4
    governor.set_cap(0)
    assert governor.cap == 1 and governor.threads() == 1


def test_governor_normalises_batches() -> None:
    governor = ThreadGovernor(2, probe_steps=2)
    # at 2 threads every step is a batch of 11 tokens; at 1 thread single tokens: per unit of cost 2 threads win
    for _ in range(100):
        n = governor.threads()
        if n == 2:
            governor.observe(0.050 * step_cost(11), 11)
        else:
            governor.observe(0.080, 1)
    assert governor.preferred == 2


# ---------------------------------------------------------------------- in a session
def governed_session(load: CpuLoad, **kwargs: object) -> tuple[LlamaSession, list[BatchFakeLlama]]:
    fakes: list[BatchFakeLlama] = []

    def factory(**params: object) -> BatchFakeLlama:
        fakes.append(BatchFakeLlama(scripted_reply(copy_with_changes), **params))
        return fakes[-1]

    session = LlamaSession("fake.gguf", factory=factory, **kwargs)  # type: ignore[arg-type]
    session._load_reader = lambda: load
    return session, fakes


def test_session_uses_the_free_cores_and_an_explicit_count_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("grapheval_plugins.local.runtime._default_threads", lambda: 2)
    busy = CpuLoad(procs_running=2, own_running=1, online=2, allowed=2)
    session, fakes = governed_session(busy)
    assert not session.threads_fixed and session.n_threads == 2
    out = run(session, prompt_for(SOURCE), max_tokens=100)
    assert out == byte_tokens(copy_with_changes(""))
    assert fakes[0].threads and set(fakes[0].threads) == {(1, 1)} and session.threads_now == 1
    assert fakes[0].params["n_threads"] == 2  # loaded with the most it may use

    fixed, fakes = governed_session(busy, n_threads=2)
    assert fixed.threads_fixed
    assert run(fixed, prompt_for(SOURCE), max_tokens=100) == out
    assert fakes[0].threads == [] and fixed.threads_now == 2


def test_session_without_set_n_threads_keeps_its_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from local_fake_llama import FakeLlama

    monkeypatch.setattr("grapheval_plugins.local.runtime._default_threads", lambda: 2)
    session = LlamaSession("fake.gguf", factory=lambda **p: FakeLlama(scripted_reply(copy_with_changes), **p))
    session._load_reader = lambda: CpuLoad(procs_running=2, own_running=1, online=2, allowed=2)
    assert run(session, prompt_for(SOURCE), max_tokens=20) == byte_tokens(copy_with_changes(""))[:20]
    assert session.threads_now == 2 and session.stats.thread_switches == 0


def test_get_session_keeps_an_explicit_count_apart_from_the_default() -> None:
    clear_sessions()
    try:
        auto = get_session("m", "fake.gguf", role="chat")
        explicit = get_session("m", "fake.gguf", role="chat", n_threads=1)
        assert auto is not explicit and not auto.threads_fixed and explicit.threads_fixed
        assert auto is get_session("m", "fake.gguf", role="chat", n_threads=None)
    finally:
        clear_sessions()


# ---------------------------------------------------------------------- sessions of one process: the ledger
def test_the_first_evaluation_is_admitted_at_once_and_takes_what_is_free() -> None:
    ledger = ThreadLedger()
    a = object()
    assert ledger.acquire(a, free=lambda: 1) == 1  # nobody else: admitted even on one free core
    ledger.release(a)
    assert ledger.acquire(a, free=lambda: 3) == 3


def test_an_evaluation_beside_another_takes_what_it_leaves() -> None:
    ledger = ThreadLedger()
    a, b, c = object(), object(), object()
    ledger.acquire(a, free=lambda: 4, fixed=1)
    assert ledger.acquire(b, free=lambda: 4) == 3
    assert ledger.held_by_others(c) == 4
    ledger.release(b)
    assert ledger.acquire(c, free=lambda: 4, fixed=2) == 2  # fits: 1 + 2 <= 4


def test_an_evaluation_that_does_not_fit_waits_for_the_others() -> None:
    ledger = ThreadLedger()
    a, b = object(), object()
    ledger.acquire(a, free=lambda: 2)  # holds both cores
    got: list[int] = []
    waiting = threading.Thread(target=lambda: got.append(ledger.acquire(b, free=lambda: 2, fixed=1)))
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive() and got == []  # 1 + 2 > 2: it waits …
    ledger.hold(a, 1)  # … until the other holds fewer (its governor fell back to one thread)
    waiting.join(5)
    assert got == [1] and ledger.held_by_others(object()) == 2
    ledger.release(a)
    ledger.release(b)


def test_a_waiting_evaluation_is_admitted_when_the_other_releases() -> None:
    ledger = ThreadLedger()
    a, b = object(), object()
    ledger.acquire(a, free=lambda: 1)  # a busy machine: one core free, taken
    got: list[int] = []
    waiting = threading.Thread(target=lambda: got.append(ledger.acquire(b, free=lambda: 1)))
    waiting.start()
    waiting.join(0.3)
    assert waiting.is_alive()
    ledger.release(a)
    waiting.join(5)
    assert got == [1]


def test_a_holder_that_never_releases_costs_the_wait_limit_not_a_hang() -> None:
    ledger = ThreadLedger(wait_limit_s=0.1)
    a, b = object(), object()
    ledger.acquire(a, free=lambda: 2)
    assert ledger.acquire(b, free=lambda: 2) == 1


@pytest.mark.parametrize(("free", "held", "fixed", "expected"), [
    (2, 0, None, 1), (4, 0, None, 2), (1, 0, None, None), (3, 1, None, 1), (2, 1, None, None),
    (2, 0, 1, 1), (3, 0, 2, None), (4, 0, 2, 2),
])
def test_reserve_beside_leaves_as_many_for_the_other(free: int, held: int, fixed: int | None,
                                                     expected: int | None) -> None:
    ledger = ThreadLedger()
    other, holder = object(), object()  # both alive: the ledger knows holders by identity
    if held:
        ledger.hold(other, held)
    assert ledger.reserve(holder, free, fixed) == expected


def test_a_session_starts_beside_a_reserved_one_with_the_rest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The judge reserves half of 4 idle cores for the context; the chat model, starting next, generates on the
    other half, with the answer it gives alone; everything is given back."""
    monkeypatch.setattr("grapheval_plugins.local.runtime._default_threads", lambda: 4)
    idle = CpuLoad(procs_running=1, own_running=1, online=4, allowed=4)
    judge, _ = governed_session(idle)
    chat, fakes = governed_session(idle)
    alone = run(chat, prompt_for(SOURCE), max_tokens=60)
    assert fakes[0].threads and max(n for n, _ in fakes[0].threads) == 4  # alone: every core (and probes of one)
    judge.load()
    assert judge.reserve_beside() == 2
    fakes[0].threads.clear()
    assert run(chat, prompt_for(SOURCE), max_tokens=60) == alone
    assert fakes[0].threads and max(n for n, _ in fakes[0].threads) == 2  # never more than what the judge left
    judge.prefill(byte_tokens("the context"), threads=2, logits=False)
    judge.release_beside()
    assert LEDGER.held_by_others(object()) == 0


def test_a_holder_makes_room_for_an_evaluation_that_waits() -> None:
    """While one session waits to start, the one evaluating may use only an even part of the free threads; once it
    holds that part the other is admitted with the rest."""
    ledger = ThreadLedger()
    a, b = object(), object()
    assert ledger.acquire(a, free=lambda: 2) == 2 and ledger.share(a, free=2) == 2 and not ledger.waiting(a)
    got: list[int] = []
    waiting = threading.Thread(target=lambda: got.append(ledger.acquire(b, free=lambda: 2)))
    waiting.start()
    for _ in range(200):
        if ledger.waiting(a):
            break
        waiting.join(0.01)
    assert ledger.waiting(a) and not ledger.waiting(b) and got == []
    assert ledger.share(a, free=2) == 1  # its part of two cores, with b waiting
    ledger.hold(a, 1)
    waiting.join(5)
    assert got == [1] and not ledger.waiting(a)
    assert ledger.share(a, free=2) == 1  # b holds the other core now
    ledger.release(b)
    assert ledger.share(a, free=2) == 2
    ledger.release(a)


def test_a_holder_keeps_its_threads_when_shrinking_would_not_let_the_waiting_one_start() -> None:
    """A session with a fixed count of two waits beside one holding both of two free threads: shrinking to one
    would not let it start, so the holder keeps both (and the other waits for its end, as before)."""
    ledger = ThreadLedger()
    a, b = object(), object()
    ledger.acquire(a, free=lambda: 2)
    waiting = threading.Thread(target=lambda: ledger.acquire(b, free=lambda: 2, fixed=2))
    waiting.start()
    for _ in range(200):
        if ledger.waiting(a):
            break
        waiting.join(0.01)
    assert ledger.waiting(a) and ledger.share(a, free=2) == 2
    assert ledger.share(a, free=4) == 2  # with four free, two left for it are enough
    ledger.release(a)
    waiting.join(5)
    assert not waiting.is_alive() and ledger.held_by_others(a) == 2
    ledger.release(b)


def test_governor_moves_up_at_once_when_one_thread_was_never_timed() -> None:
    """A session that only evaluates prompts (the judge) never times a decode step: when cores come free again it
    uses them at once instead of waiting for a probe that would never come."""
    prompts_only = ThreadGovernor(2)
    prompts_only.set_cap(1)
    prompts_only.set_cap(2)
    assert prompts_only.preferred == 2 and prompts_only.threads() == 2
    decoding = ThreadGovernor(2)
    decoding.set_cap(1)
    drive(decoding, {1: 0.1, 2: 0.05}, 5)
    decoding.set_cap(2)
    assert decoding.preferred == 1  # one thread was timed: two are tried by a probe first


def test_a_decoding_session_makes_room_for_one_that_waits(monkeypatch: pytest.MonkeyPatch) -> None:
    """The chat model decodes on both idle cores; the judge starts a prompt: the chat model drops to one thread at
    its next step, the judge evaluates on the other, and the answer is the one the chat model gives alone."""
    monkeypatch.setattr("grapheval_plugins.local.runtime._default_threads", lambda: 2)
    idle = CpuLoad(procs_running=1, own_running=1, online=2, allowed=2)
    judge, judge_fakes = governed_session(idle)
    chat, fakes = governed_session(idle)
    alone = run(chat, prompt_for(SOURCE), max_tokens=60)
    judge.load()
    chat.reset()
    chat.governor = ThreadGovernor(2, warmup_steps=10**6)  # no probes of one thread: only the judge moves it
    fakes[0].threads.clear()
    admitted: list[int] = []
    with chat.lock:
        steps = chat.generate(prompt_for(SOURCE), max_tokens=60)
        answer = [next(steps) for _ in range(3)]
        assert chat.threads_now == 2
        prompt = threading.Thread(target=lambda: admitted.append(judge.prefill(byte_tokens("the context"))))
        prompt.start()
        for _ in range(200):
            if LEDGER.waiting(chat):
                break
            prompt.join(0.01)
        assert LEDGER.waiting(chat) and admitted == []  # both cores are the chat model's: the judge waits …
        answer.append(next(steps))  # … until the chat model's next step
        prompt.join(5)
        assert admitted == [0] and judge_fakes[0].threads[-1] == (1, 1) and fakes[0].threads[-1] == (1, 1)
        answer += list(steps)
    assert answer == alone
    assert LEDGER.held_by_others(object()) == 0
