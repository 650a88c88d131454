"""The llama.cpp runtime's own choices: threads from the cores other processes leave free, llama.cpp's extra buffer
types kept off, ChatML models only, and bad GGUF files refused by llama.cpp as typed errors."""

from __future__ import annotations

import ctypes
import struct
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from gguf_files import gguf_bytes, write_gguf
from local_fake_llama import FakeLlama, byte_tokens, one_hot

from grapheval_plugins.exceptions import ModelLoadError
from grapheval_plugins.local import runtime
from grapheval_plugins.local.runtime import LlamaSession, clear_sessions, free_cores, get_session, load_llama


def _proc(tmp_path: Path, running: int, states: list[str]) -> Path:
    (tmp_path / "stat").write_text(f"cpu  1 2 3\ncpu0 1 2 3\nprocs_running {running}\nprocs_blocked 0\n")
    for i, state in enumerate(states):
        task = tmp_path / "self" / "task" / str(i)
        task.mkdir(parents=True)
        (task / "stat").write_text(f"{i} (llama worker) {state} 1 2 3")
    return tmp_path


def test_others_running_subtracts_this_process_threads(tmp_path: Path) -> None:
    assert runtime._others_running(_proc(tmp_path, 5, ["R", "S", "R"])) == 3
    assert runtime._others_running(tmp_path / "missing") == 0  # no /proc: nothing known to be busy


@pytest.mark.parametrize(("others", "limit", "expected"), [(0, 4, 4), (1, 4, 3), (4, 4, 1), (9, 2, 1), (0, 2, 2)])
def test_free_cores(others: int, limit: int, expected: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runtime, "_others_running", lambda: others)
    assert free_cores(limit) == expected


def test_a_session_takes_the_free_cores_at_each_call_and_an_explicit_count_wins(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    busy = [0]
    set_to: list[int] = []
    monkeypatch.setattr(runtime, "_others_running", lambda: busy[0])
    monkeypatch.setattr(runtime, "set_threads", lambda llama, n: set_to.append(n))
    monkeypatch.setattr(runtime, "allowed_cpus", lambda: 2)
    factory = lambda **p: FakeLlama(lambda seq: one_hot(2), **p)  # noqa: E731
    session = LlamaSession("fake.gguf", factory=factory)
    with session.lock:
        session.prefill(byte_tokens("idle"))
        busy[0] = 2
        list(session.generate(byte_tokens("busy"), max_tokens=4))
    assert session.n_threads == 2 and set_to == [1] and session.threads_now == 1
    fixed = LlamaSession("fake.gguf", n_threads=2, factory=factory)
    with fixed.lock:
        fixed.prefill(byte_tokens("busy"))
    assert set_to == [1] and fixed.threads_now == 2


def test_sessions_have_a_lock_each_and_get_session_keeps_counts_apart() -> None:
    clear_sessions()
    try:
        auto = get_session("m", "fake.gguf", role="chat")
        judge = get_session("m", "fake.gguf", role="judge")
        explicit = get_session("m", "fake.gguf", role="chat", n_threads=1)
        assert auto is not explicit and not auto.threads_fixed and explicit.threads_fixed
        assert auto is get_session("m", "fake.gguf", role="chat")
        assert auto.lock is not judge.lock  # one evaluation at a time in each context; the two may run together
    finally:
        clear_sessions()


def test_sessions_evaluating_at_once_split_the_free_cores_and_a_decoder_takes_them_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A chat model decoding shrinks to its half when the judge starts an evaluation, and grows back at its next
    step once the judge is done; a session with a fixed thread count keeps it."""
    set_to: list[tuple[str, int]] = []
    monkeypatch.setattr(runtime, "_others_running", lambda: 0)
    monkeypatch.setattr(runtime, "allowed_cpus", lambda: 4)
    monkeypatch.setattr(runtime, "set_threads", lambda llama, n: set_to.append((llama.name, n)))

    def factory(name: str) -> Any:
        def make(**params: Any) -> FakeLlama:
            llama = FakeLlama(lambda seq: one_hot(ord("a") + 4 + len(seq) % 3), **params)
            llama.name = name
            return llama
        return make

    chat = LlamaSession("fake.gguf", factory=factory("chat"))
    judge = LlamaSession("fake.gguf", factory=factory("judge"))
    fixed = LlamaSession("fake.gguf", factory=factory("fixed"), n_threads=3)
    steps = chat.generate(byte_tokens("tell"), max_tokens=6)
    next(steps)  # the chat model alone: all four cores, as loaded
    assert chat.threads_now == 4 and set_to == []
    with judge.busy():
        judge.prefill(byte_tokens("context"))
        assert judge.threads_now == 2  # two sessions evaluating: two cores each
        next(steps)
        assert chat.threads_now == 2
        with fixed.busy():
            fixed.prefill(byte_tokens("own"))
            next(steps)
            assert fixed.threads_now == 3 and chat.threads_now == 1  # four cores among three sessions
    next(steps)
    next(steps)
    assert chat.threads_now == 4  # alone again: every free core at its next step
    steps.close()
    assert set_to == [("judge", 2), ("chat", 2), ("chat", 1), ("chat", 4)]
    assert not runtime._BUSY  # every span ended


def test_a_model_whose_template_is_not_chatml_is_refused() -> None:
    def factory(**params: Any) -> FakeLlama:
        llama = FakeLlama(lambda seq: one_hot(2), **params)
        llama.metadata = {"tokenizer.chat_template": "{% for m in messages %}[INST] {{ m.content }}{% endfor %}"}
        return llama

    with pytest.raises(ModelLoadError, match=r"fake\.gguf has the chat template .*ChatML"):
        LlamaSession("fake.gguf", factory=factory).load()


class _Params(ctypes.Structure):
    _fields_ = [("n_gpu_layers", ctypes.c_int32), ("use_extra_bufts", ctypes.c_bool)]


def _fake_llama_cpp(params_type: type) -> types.ModuleType:
    """Mirrors llama-cpp-python 0.3: ``Llama.__init__`` assigns ``self.model_params`` from the defaults (extra
    buffer types on), fills in fields and hands the structure to the loader, which ``loaded`` records."""
    module = types.ModuleType("llama_cpp")
    module.loaded = []  # type: ignore[attr-defined]

    class Llama:
        def __init__(self, model_path: str, **kwargs: Any) -> None:
            defaults = params_type()
            if hasattr(defaults, "use_extra_bufts"):
                defaults.use_extra_bufts = True
            self.model_params = defaults
            self.model_params.n_gpu_layers = 0
            self.kwargs = kwargs
            module.loaded.append(getattr(self.model_params, "use_extra_bufts", None))

    module.Llama = Llama  # type: ignore[attr-defined]
    module.llama_model_params = params_type  # type: ignore[attr-defined]
    return module


def test_weights_load_without_extra_buffer_types(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_llama_cpp(_Params)
    monkeypatch.setitem(sys.modules, "llama_cpp", fake)
    llama = load_llama(tmp_path / "m.gguf", n_ctx=128, n_threads=1, n_batch=64, seed=0)
    assert fake.loaded == [False] and "use_extra_bufts" not in llama.kwargs  # type: ignore[attr-defined]
    assert isinstance(llama, fake.Llama) and llama.model_params.n_gpu_layers == 0  # type: ignore[attr-defined]


def test_a_llama_cpp_python_without_the_field_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class NoField(ctypes.Structure):
        _fields_ = [("n_gpu_layers", ctypes.c_int32)]

    monkeypatch.setitem(sys.modules, "llama_cpp", _fake_llama_cpp(NoField))
    with pytest.raises(ModelLoadError, match="use_extra_bufts"):
        load_llama(tmp_path / "m.gguf", n_ctx=128, n_threads=1, n_batch=64, seed=0)


def _nested_arrays(depth: int) -> bytes:
    """A GGUF whose one metadata value is an array of arrays ``depth`` deep (its parser used to recurse)."""
    value = b""
    for _ in range(depth):
        value += struct.pack("<IQ", 9, 1)  # an array of one array
    value += struct.pack("<IQ", 4, 0)
    key = struct.pack("<Q", 4) + b"deep"
    return b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + key + struct.pack("<I", 9) + value


@pytest.mark.parametrize("content", [
    b"", b"not a gguf file at all", gguf_bytes()[:300], gguf_bytes()[:-40], _nested_arrays(100_000),
], ids=["empty", "random", "cut-header", "cut-tensor", "nested-arrays"])
def test_bad_gguf_files_are_model_load_errors_naming_the_file(content: bytes, tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (extra 'local') reads GGUF files")
    path = tmp_path / "bad.gguf"
    path.write_bytes(content)
    with pytest.raises(ModelLoadError) as info:
        load_llama(path, n_ctx=128, n_threads=1, n_batch=64, seed=0)
    assert str(path) in str(info.value)


def test_a_gguf_without_a_chatml_template_never_reaches_a_decode(tmp_path: Path) -> None:
    pytest.importorskip("llama_cpp", reason="llama-cpp-python (extra 'local') reads GGUF files")
    path = write_gguf(tmp_path / "tiny.gguf")  # complete header, one tensor: not a model llama.cpp can build
    with pytest.raises(ModelLoadError, match="tiny.gguf"):
        load_llama(path, n_ctx=128, n_threads=1, n_batch=64, seed=0)
