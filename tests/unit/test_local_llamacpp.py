"""The llama-cpp-python shim: ``use_extra_bufts`` reaches llama.cpp's model parameters, checked by field and version.

A fake ``llama_cpp`` module mirrors what the real one does: ``Llama.__init__`` assigns ``self.model_params`` from
``llama_model_default_params()`` (a ctypes structure), fills in fields and hands that structure to the loader.
"""

from __future__ import annotations

import ctypes
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from gguf_files import LLAMA2, write_gguf

from grapheval_plugins.exceptions import InputError, ModelLoadError
from grapheval_plugins.local import llamacpp
from grapheval_plugins.local.cpu import EXTRA_BUFFERS_ENV
from grapheval_plugins.local.runtime import LlamaSession, clear_sessions, get_session


class ParamsWithField(ctypes.Structure):
    _fields_ = [("n_gpu_layers", ctypes.c_int32), ("vocab_only", ctypes.c_bool), ("use_extra_bufts", ctypes.c_bool)]


class ParamsWithoutField(ctypes.Structure):
    _fields_ = [("n_gpu_layers", ctypes.c_int32), ("vocab_only", ctypes.c_bool)]


def fake_llama_cpp(params_type: type, *, keyword: bool = False) -> types.ModuleType:
    module = types.ModuleType("llama_cpp")
    module.__version__ = "0.3.36"  # type: ignore[attr-defined]
    loaded: list[dict[str, Any]] = []

    def defaults() -> Any:
        params = params_type()
        if hasattr(params, "use_extra_bufts"):
            params.use_extra_bufts = True  # llama.cpp's own default
        return params

    class Llama:
        def __init__(self, model_path: str, *, n_ctx: int = 512, verbose: bool = True, **kwargs: Any) -> None:
            self.model_params = defaults()
            self.model_params.n_gpu_layers = 0
            if keyword and "use_extra_bufts" in kwargs:
                self.model_params.use_extra_bufts = kwargs.pop("use_extra_bufts")
            self.kwargs = kwargs
            # the "loader" sees the structure as it is now
            loaded.append({f[0]: getattr(self.model_params, f[0]) for f in params_type._fields_})

        def token_eos(self) -> int:
            return 2

        def tokenize(self, text: bytes, add_bos: bool = True, special: bool = False) -> list[int]:
            return [2] if text == b"<|im_end|>" else [5, 6]

    if keyword:
        init = Llama.__init__

        def __init__(self: Any, model_path: str, *, use_extra_bufts: bool = True, **kwargs: Any) -> None:  # noqa: N807
            init(self, model_path, use_extra_bufts=use_extra_bufts, **kwargs)

        Llama.__init__ = __init__  # type: ignore[method-assign]
    module.Llama = Llama  # type: ignore[attr-defined]
    module.llama_model_params = params_type  # type: ignore[attr-defined]
    module.loaded = loaded  # type: ignore[attr-defined]
    return module


@pytest.fixture
def model_file(tmp_path: Path) -> Path:
    return write_gguf(tmp_path / "tiny.gguf")


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.delenv(EXTRA_BUFFERS_ENV, raising=False)
    clear_sessions()
    yield
    clear_sessions()


def _load(model_file: Path, **options: Any) -> Any:
    return llamacpp.load_llama(model_file, n_ctx=128, n_threads=1, n_batch=64, seed=0, **options)


def test_extra_buffers_are_off_by_default_and_on_when_asked(model_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_llama_cpp(ParamsWithField)
    monkeypatch.setitem(sys.modules, "llama_cpp", fake)
    off = _load(model_file)
    on = _load(model_file, extra_buffers=True)
    assert [d["use_extra_bufts"] for d in fake.loaded] == [False, True]  # type: ignore[attr-defined]
    assert isinstance(off, fake.Llama) and off.model_params.use_extra_bufts is False
    assert on.model_params.n_gpu_layers == 0  # the other fields are still set by Llama itself
    assert "use_extra_bufts" not in off.kwargs  # not passed as an (ignored) keyword


def test_a_llama_taking_the_keyword_gets_it(model_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_llama_cpp(ParamsWithField, keyword=True)
    monkeypatch.setitem(sys.modules, "llama_cpp", fake)
    llama = _load(model_file)
    assert type(llama) is fake.Llama  # no subclass needed
    assert fake.loaded[-1]["use_extra_bufts"] is False  # type: ignore[attr-defined]


def test_a_llama_cpp_without_the_field_fails_clearly(model_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_llama_cpp(ParamsWithoutField)
    monkeypatch.setitem(sys.modules, "llama_cpp", fake)
    with pytest.raises(ModelLoadError, match="no 'use_extra_bufts' model parameter") as info:
        _load(model_file)
    assert EXTRA_BUFFERS_ENV in str(info.value)
    assert fake.loaded == []  # type: ignore[attr-defined]  # refused before loading anything
    _load(model_file, extra_buffers=True)  # opting in needs no field: it is llama.cpp's default


def test_the_file_is_checked_before_llama_cpp_is_called(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = fake_llama_cpp(ParamsWithField)
    monkeypatch.setitem(sys.modules, "llama_cpp", fake)
    bad = tmp_path / "weights.gguf"
    bad.write_bytes(b"\x00" * 1000)
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        _load(bad)
    with pytest.raises(ModelLoadError, match="not ChatML"):
        _load(write_gguf(tmp_path / "llama2.gguf", template=LLAMA2))
    assert fake.loaded == []  # type: ignore[attr-defined]


def test_session_uses_the_environment_variable(model_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grapheval_plugins.local import probe

    fake = fake_llama_cpp(ParamsWithField)
    monkeypatch.setitem(sys.modules, "llama_cpp", fake)
    monkeypatch.setenv(EXTRA_BUFFERS_ENV, "1")
    probed: list[tuple[str, bool]] = []  # the child-process check that precedes an opted-in load, faked here
    monkeypatch.setattr(probe, "run_probe", lambda model, extra: probed.append((model, extra)) or probe.ProbeResult(True))
    probe._forget_confirmations()
    session = LlamaSession(model_file, n_ctx=128)
    session.load()
    assert probed == [(str(model_file.resolve()), True)]
    assert session.decision is not None and session.decision.enabled
    assert fake.loaded[-1]["use_extra_bufts"] is True  # type: ignore[attr-defined]
    explicit = LlamaSession(model_file, n_ctx=128, extra_buffers=False)
    explicit.load()
    assert fake.loaded[-1]["use_extra_bufts"] is False  # type: ignore[attr-defined]
    assert explicit.decision is not None and explicit.decision.reason == "extra_buffers=False"


def test_a_bad_environment_value_fails_before_loading(model_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXTRA_BUFFERS_ENV, "sometimes")
    with pytest.raises(InputError, match=EXTRA_BUFFERS_ENV):
        get_session("x", model_file, role="chat", n_ctx=128)


def test_internals_version_range() -> None:
    assert llamacpp.internals_supported("0.3.9") and llamacpp.internals_supported("0.3.36")
    assert not llamacpp.internals_supported("0.4.0") and not llamacpp.internals_supported("0.2.90")
    assert not llamacpp.internals_supported(None) or llamacpp.llama_cpp_version() is not None


def test_shared_context_refuses_an_unsupported_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llamacpp, "llama_cpp_version", lambda: "0.4.2")
    with pytest.raises(ModelLoadError, match="0.4.2 is outside"):
        llamacpp.SharedContext(object(), n_ctx=128, n_batch=64, n_threads=1)
