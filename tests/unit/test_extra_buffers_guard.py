"""Opting in to llama.cpp's extra buffer types never takes the process down: a child decodes with them first.

The decision is fed simulated CPUs (AMX, AVX-512 only, AVX2 only) and a fake probe runner, so it is tested on any
machine; tests/integration/test_local_loading.py runs the real probe.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from grapheval_plugins.exceptions import ModelLoadError
from grapheval_plugins.local import probe
from grapheval_plugins.local.cpu import EXTRA_BUFFERS_ENV, CPUFeatures, decide_extra_buffers, parse_cpuinfo
from grapheval_plugins.local.probe import PROBE_CHILD_ENV, ProbeResult, confirm_extra_buffers

AMX = parse_cpuinfo("model name\t: Intel Xeon\nflags\t\t: fpu sse2 avx2 fma avx512f amx_tile amx_int8 amx_bf16\n",
                    machine="x86_64")
AVX512 = parse_cpuinfo("model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 fma avx512f avx512_bf16\n", machine="x86_64")
AVX2 = parse_cpuinfo("model name\t: AMD EPYC\nflags\t\t: fpu sse2 avx2 fma\n", machine="x86_64")

CRASH = ProbeResult(False, error="the decode crashed: killed by SIGSEGV", signal="SIGSEGV", returncode=-11,
                    tail="probe: loaded in 0.4 s; extra buffers on; decoding")
PASS = ProbeResult(True, text="OK")


class Runner:
    def __init__(self, result: ProbeResult) -> None:
        self.result = result
        self.calls: list[tuple[str, bool]] = []

    def __call__(self, model: str, extra_buffers: bool) -> ProbeResult:
        self.calls.append((model, extra_buffers))
        return self.result


@pytest.fixture(autouse=True)
def _fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv(PROBE_CHILD_ENV, raising=False)
    probe._forget_confirmations()
    yield
    probe._forget_confirmations()


@pytest.fixture
def gguf(tmp_path: Path) -> Path:
    path = tmp_path / "model.gguf"
    path.write_bytes(b"GGUF" + b"\0" * 60)
    return path


@pytest.mark.parametrize("cpu", [AMX, AVX512, AVX2], ids=["amx", "avx512-only", "avx2-only"])
def test_a_crashing_child_is_a_clear_refusal_on_every_cpu(cpu: CPUFeatures, gguf: Path) -> None:
    runner = Runner(CRASH)
    decision = decide_extra_buffers(True, env={}, cpu=cpu)
    with pytest.raises(ModelLoadError) as info:
        confirm_extra_buffers(decision, gguf, runner=runner, cpu=cpu)
    message = str(info.value)
    assert "killed by SIGSEGV" in message and "model.gguf" in message
    assert "extra_buffers=False" in message and EXTRA_BUFFERS_ENV in message  # how to turn it off
    assert ("AMX" in message.split("(CPU:")[0]) is cpu.amx  # the known cause is named only where it applies
    assert runner.calls == [(str(gguf.resolve()), True)]


@pytest.mark.parametrize("cpu", [AMX, AVX512, AVX2], ids=["amx", "avx512-only", "avx2-only"])
def test_a_passing_child_lets_the_process_load_with_them(cpu: CPUFeatures, gguf: Path) -> None:
    runner = Runner(PASS)
    decision = decide_extra_buffers(None, env={EXTRA_BUFFERS_ENV: "1"}, cpu=cpu)
    confirmed = confirm_extra_buffers(decision, gguf, runner=runner, cpu=cpu)
    assert confirmed.enabled and confirmed.risky is cpu.amx
    assert "child process decoded" in confirmed.reason
    confirm_extra_buffers(decision, gguf, runner=runner, cpu=cpu)
    assert len(runner.calls) == 1  # one probe per file per process


def test_nothing_is_probed_when_extra_buffers_are_off_or_inside_the_probe_child(
    gguf: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runner = Runner(CRASH)
    off = decide_extra_buffers(None, env={}, cpu=AMX)
    assert confirm_extra_buffers(off, gguf, runner=runner, cpu=AMX) is off
    monkeypatch.setenv(PROBE_CHILD_ENV, "1")
    on = decide_extra_buffers(True, env={}, cpu=AMX)
    assert confirm_extra_buffers(on, gguf, runner=runner, cpu=AMX) is on
    assert runner.calls == []


def test_a_changed_file_is_probed_again(gguf: Path) -> None:
    runner = Runner(PASS)
    decision = decide_extra_buffers(True, env={}, cpu=AVX2)
    confirm_extra_buffers(decision, gguf, runner=runner, cpu=AVX2)
    gguf.write_bytes(b"GGUF" + b"\1" * 80)
    confirm_extra_buffers(decision, gguf, runner=runner, cpu=AVX2)
    assert len(runner.calls) == 2


def test_the_probe_child_is_told_not_to_probe_again() -> None:
    import sys

    code = f"import json, os; print(json.dumps({{'ok': True, 'text': os.environ.get({PROBE_CHILD_ENV!r}, 'unset')}}))"
    result = probe.run_probe("unused", command=[sys.executable, "-c", code])
    assert result.ok and result.text == "1"
