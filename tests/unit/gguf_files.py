"""Small GGUF files written byte by byte (format version 3), for the loader's bad-input tests."""

from __future__ import annotations

import struct
from pathlib import Path

CHATML = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
LLAMA2 = "{{ bos_token }}{% for message in messages %}[INST] {{ message['content'] }} [/INST]{% endfor %}"


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def gguf_bytes(
    template: str | None = CHATML,
    *,
    tensor_elements: int = 64,
    version: int = 3,
    vocab: int = 100,
) -> bytes:
    """A GGUF with a few metadata keys (architecture, a string array 'vocabulary', an optional chat template) and
    one F32 tensor of ``tensor_elements`` values."""
    kv: list[bytes] = [
        _string("general.architecture") + struct.pack("<I", 8) + _string("qwen2"),
        _string("general.alignment") + struct.pack("<I", 4) + struct.pack("<I", 32),
        _string("tokenizer.ggml.tokens") + struct.pack("<I", 9) + struct.pack("<IQ", 8, vocab)
        + b"".join(_string(f"tok{i}") for i in range(vocab)),
        _string("tokenizer.ggml.scores") + struct.pack("<I", 9) + struct.pack("<IQ", 6, vocab)
        + struct.pack(f"<{vocab}f", *([0.0] * vocab)),
    ]
    if template is not None:
        kv.append(_string("tokenizer.chat_template") + struct.pack("<I", 8) + _string(template))
    tensor = _string("token_embd.weight") + struct.pack("<I", 1) + struct.pack("<Q", tensor_elements) + struct.pack(
        "<IQ", 0, 0
    )
    header = b"GGUF" + struct.pack("<IQQ", version, 1, len(kv)) + b"".join(kv) + tensor
    padding = b"\0" * (-len(header) % 32)
    return header + padding + struct.pack(f"<{tensor_elements}f", *([0.5] * tensor_elements))


def write_gguf(path: Path, **options: object) -> Path:
    path.write_bytes(gguf_bytes(**options))  # type: ignore[arg-type]
    return path
