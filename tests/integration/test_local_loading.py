"""Loading the real Qwen2.5-Coder-0.5B GGUF: without extra buffer types, bad files refused as typed errors naming
them, a too-small context window named, and ``grapheval doctor`` end to end (its decode in a child process).

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
from grapheval_plugins.local.judge import LocalJudgeScorer  # noqa: E402
from grapheval_plugins.local.runtime import ContextOverflowError  # noqa: E402
from grapheval_plugins.local.weights import resolve_model  # noqa: E402

MODEL = "qwen2.5-coder-0.5b"


@pytest.fixture(scope="module")
def weights() -> Path:
    return resolve_model(MODEL, hub=False, show_progress=False).path


def test_models_load_without_extra_buffer_types(weights: Path) -> None:
    llm = ChatLocalLlama(model=MODEL, max_tokens=4, hub=False).load()
    session = llm.session
    assert session.llama.model_params.use_extra_bufts is False
    answer = llm.invoke("Reply with one word: OK.")
    assert answer.content.strip()
    assert answer.response_metadata["weights"].startswith("qwen2.5-coder-0.5b-instruct-q4_k_m.gguf (from ")
    assert "sha256 1d961463" in answer.response_metadata["weights"]


def test_a_truncated_copy_is_refused_naming_the_file(weights: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.gguf"
    with weights.open("rb") as src:
        cut.write_bytes(src.read(50_000_000))
    with pytest.raises(ModelLoadError, match="llama.cpp could not load") as info:
        ChatLocalLlama(model=str(cut)).load()
    assert str(cut) in str(info.value)


def test_random_bytes_are_refused(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(os.urandom(1 << 20))
    with pytest.raises(ModelLoadError, match="junk.gguf"):
        LocalJudgeScorer(str(junk)).load()


def test_a_context_window_too_small_for_prompt_a_names_n_ctx(weights: Path) -> None:
    llm = ChatLocalLlama(model=str(weights), n_ctx=256, max_tokens=8)
    with pytest.raises(ContextOverflowError, match="n_ctx") as info:
        llm.invoke(KG_PROMPT.messages("Paris is the capital of France."))
    assert info.value.field == "messages"


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
    assert report["facts"]["decode"]["ok"] is True
