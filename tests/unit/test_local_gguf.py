"""GGUF files are checked in Python before llama.cpp sees them: bad files are typed errors naming the file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gguf_files import LLAMA2, gguf_bytes, write_gguf

from grapheval_plugins.exceptions import ModelLoadError
from grapheval_plugins.local.gguf import check_chatml, read_gguf
from grapheval_plugins.local.llamacpp import validate_model_file


def test_a_complete_chatml_file_passes(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "ok.gguf")
    info = validate_model_file(path)
    assert info.version == 3 and info.tensor_count == 1 and info.architecture == "qwen2"
    assert info.data_end == info.size == path.stat().st_size
    assert info.metadata["tokenizer.ggml.tokens"] == 100  # long arrays are counted, not kept
    assert "<|im_start|>" in (info.chat_template or "")


def test_truncated_tensor_data_names_the_file_and_sizes(tmp_path: Path) -> None:
    data = gguf_bytes()
    path = tmp_path / "cut.gguf"
    path.write_bytes(data[:-40])
    with pytest.raises(ModelLoadError, match="is truncated: tensor 'token_embd.weight'") as info:
        read_gguf(path)
    assert str(path) in str(info.value) and f"{len(data) - 40:,}" in str(info.value)


def test_truncated_header_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "header-cut.gguf"
    path.write_bytes(gguf_bytes()[:300])
    with pytest.raises(ModelLoadError, match="truncated: its GGUF header ends") as info:
        read_gguf(path)
    assert str(path) in str(info.value)


def test_random_bytes_are_not_gguf(tmp_path: Path) -> None:
    path = tmp_path / "random.gguf"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(ModelLoadError, match="is not a GGUF file"):
        read_gguf(path)


def test_empty_and_missing_files(tmp_path: Path) -> None:
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(b"")
    with pytest.raises(ModelLoadError, match="not a GGUF file"):
        read_gguf(empty)
    with pytest.raises(ModelLoadError, match="cannot read the model file"):
        read_gguf(tmp_path / "absent.gguf")


def test_unsupported_version_and_corrupt_counts(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="unsupported GGUF version 1"):
        read_gguf(write_gguf(tmp_path / "v1.gguf", version=1))
    corrupt = bytearray(gguf_bytes())
    corrupt[16:24] = (2**62).to_bytes(8, "little")  # absurd number of metadata keys
    path = tmp_path / "corrupt.gguf"
    path.write_bytes(bytes(corrupt))
    with pytest.raises(ModelLoadError, match="corrupt GGUF header"):
        read_gguf(path)


def test_a_non_chatml_template_is_refused_with_the_file_name(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "llama2.gguf", template=LLAMA2)
    with pytest.raises(ModelLoadError, match="not ChatML") as info:
        validate_model_file(path)
    assert str(path) in str(info.value) and "[INST]" in str(info.value)
    validate_model_file(path, require_chatml=False)  # the structure itself is fine


def test_a_file_without_template_is_refused(tmp_path: Path) -> None:
    info = read_gguf(write_gguf(tmp_path / "bare.gguf", template=None))
    with pytest.raises(ModelLoadError, match="has no chat template"):
        check_chatml(info)
