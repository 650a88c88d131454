"""The spec a user gives GraphEval (``local:<name>``) names the same model wherever a model name is taken."""

from __future__ import annotations

import pytest

from grapheval_plugins.local.chat import ChatLocalLlama
from grapheval_plugins.local.judge import LocalJudgeScorer
from grapheval_plugins.local.weights import canonical_name, strip_spec_prefix, validate_reference


@pytest.mark.parametrize("spec", ["local:qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b", " LOCAL:qwen2.5-coder-1.5b "])
def test_chat_model_takes_the_engine_spec(spec: str) -> None:
    llm = ChatLocalLlama(model=spec)
    assert llm.model == "qwen2.5-coder-1.5b"
    assert llm.model_label == "local:qwen2.5-coder-1.5b"  # the same label GraphEval(llm="local:…") reports


@pytest.mark.parametrize("spec", ["judge:local:qwen2.5-coder-0.5b", "local:qwen2.5-coder-0.5b", "qwen2.5-coder-0.5b"])
def test_judge_takes_the_engine_spec(spec: str) -> None:
    judge = LocalJudgeScorer(spec)
    assert judge.model_key == "qwen2.5-coder-0.5b"
    assert judge.name == "judge:local:qwen2.5-coder-0.5b"


def test_spec_prefixes_are_stripped_everywhere_a_name_is_resolved(tmp_path) -> None:  # type: ignore[no-untyped-def]
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    assert validate_reference("local:qwen2.5-coder-1.5b") == "qwen2.5-coder-1.5b"
    assert validate_reference(f"local:{gguf}") == str(gguf)
    assert canonical_name("local:qwen2.5-coder-0.5b") == "qwen2.5-coder-0.5b"
    assert strip_spec_prefix("org/local:odd") == "org/local:odd"  # only a leading prefix


def test_an_unknown_name_is_still_refused_with_the_spec_prefix() -> None:
    from grapheval_plugins.exceptions import ModelLoadError

    with pytest.raises(ModelLoadError, match="unknown local model 'gpt-4'"):
        validate_reference("local:gpt-4")
    with pytest.raises(ModelLoadError, match="non-empty"):
        validate_reference("local:")
