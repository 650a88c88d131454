"""Loading the real Qwen2.5-Coder-0.5B GGUF: extra buffer types off by default, bad files refused before llama.cpp,
a too-small context window named, and ``grapheval doctor`` end to end (its decode in a child process).

This module runs in a child process (``isolated``), like every integration module.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("llama_cpp")

from grapheval_plugins.exceptions import ModelLoadError  # noqa: E402
from grapheval_plugins.extract.prompts import KG_PROMPT  # noqa: E402
from grapheval_plugins.local.chat import ChatLocalLlama  # noqa: E402
from grapheval_plugins.local.cpu import EXTRA_BUFFERS_ENV  # noqa: E402
from grapheval_plugins.local.gguf import read_gguf  # noqa: E402
from grapheval_plugins.local.judge import LocalJudgeScorer  # noqa: E402
from grapheval_plugins.local.probe import run_probe  # noqa: E402
from grapheval_plugins.local.runtime import ContextOverflowError, clear_sessions  # noqa: E402
from grapheval_plugins.local.weights import resolve_model  # noqa: E402

MODEL = "qwen2.5-coder-0.5b"


@pytest.fixture(scope="module")
def weights() -> Path:
    return resolve_model(MODEL, hub=False, show_progress=False).path


@pytest.fixture(autouse=True)
def _default_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXTRA_BUFFERS_ENV, raising=False)


def test_the_real_file_passes_the_python_checks(weights: Path) -> None:
    info = read_gguf(weights)
    assert info.architecture == "qwen2" and info.tensor_count > 200
    assert info.data_end <= info.size and info.size - info.data_end < 64  # every tensor's bytes accounted for
    assert "<|im_start|>" in (info.chat_template or "")


def test_models_load_without_extra_buffer_types_by_default(weights: Path) -> None:
    llm = ChatLocalLlama(model=MODEL, max_tokens=4, hub=False).load()
    session = llm.session
    assert session.decision is not None and session.decision.enabled is False
    assert session.llama.model_params.use_extra_bufts is False
    answer = llm.invoke("Reply with one word: OK.")
    assert answer.content.strip()
    assert answer.response_metadata["weights"].startswith("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (from ")
    assert "sha256 1d961463" in answer.response_metadata["weights"]


def test_opting_in_loads_with_extra_buffer_types_or_refuses_clearly(
    weights: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On every CPU: either the model loads with extra buffer types and scores, or (where that path crashes, e.g.
    the AMX repack) the load is refused with a ModelLoadError that says how to turn them off; never a crash."""
    clear_sessions()
    monkeypatch.setenv(EXTRA_BUFFERS_ENV, "1")
    try:
        judge = LocalJudgeScorer(str(weights)).load()
    except ModelLoadError as exc:
        message = str(exc)
        assert "a child process that loaded" in message and "extra_buffers=False" in message, message
        assert EXTRA_BUFFERS_ENV in message
        clear_sessions()
        return
    assert judge.session.decision is not None and "child process decoded" in judge.session.decision.reason
    assert judge.session.decision is not None and judge.session.decision.enabled
    assert judge.session.llama.model_params.use_extra_bufts is True
    explicit = ChatLocalLlama(model=str(weights), extra_buffers=False, max_tokens=2).load()  # option beats env
    assert explicit.session.llama.model_params.use_extra_bufts is False
    [score] = judge.check(["The sky over Lisbon was blue on Monday."], ["The sky over Lisbon was blue"])
    assert 0.0 <= score.p_unsupported <= 1.0
    clear_sessions()


def test_a_truncated_copy_is_refused_naming_the_file(weights: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with weights.open("rb") as src:
        cut.write_bytes(src.read(50_000_000))
    with pytest.raises(ModelLoadError, match="is truncated") as info:
        ChatLocalLlama(model=str(cut)).load()
    assert str(cut) in str(info.value)


def test_random_bytes_are_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(os.urandom(1 << 20))
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        LocalJudgeScorer(str(junk)).load()


def test_a_context_window_too_small_for_prompt_a_names_n_ctx(weights: Path) -> None:
    llm = ChatLocalLlama(model=str(weights), n_ctx=256, max_tokens=8)
    with pytest.raises(ContextOverflowError, match="n_ctx") as info:
        llm.invoke(KG_PROMPT.messages("Paris is the capital of France."))
    assert info.value.field == "messages"


def test_the_probe_decodes_in_a_child_process(weights: Path) -> None:
    result = run_probe(MODEL, timeout=600)
    assert result.ok, (result.error, result.tail)
    assert result.info is not None and result.info["extra_buffers"] is False and result.info["tokens"] >= 1


def test_grapheval_doctor_end_to_end(weights: Path) -> None:
    cli = Path(sys.executable).with_name("grapheval")
    command = [str(cli)] if cli.exists() else [sys.executable, "-m", "grapheval_plugins.cli"]
    done = subprocess.run(
        [*command, "doctor", "--json", "--model", MODEL, "--no-verify"],
        capture_output=True, text=True, timeout=900, env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    assert report["ok"] is True and checks["decode"]["status"] == "ok"
    assert report["facts"]["hub"]["detail"].startswith("skipped")  # HF_HUB_OFFLINE: no connection attempted
    assert report["facts"]["weights"][MODEL]["source"] in ("cache", "parts", "env")
    assert report["facts"]["extra_buffers"]["enabled"] is False
