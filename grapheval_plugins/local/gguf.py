"""Check a GGUF file in Python before llama.cpp touches it: magic, header, metadata, tensor bounds, chat template.

llama.cpp is native code: a file it cannot parse should be refused here, with a typed error naming the file,
rather than reach the C loader. :func:`read_gguf` parses the GGUF header (format versions 2 and 3), every
metadata key/value and every tensor descriptor, and checks that each tensor's data lies inside the file — so a
truncated download or a file that is not GGUF at all raises :class:`~grapheval_plugins.exceptions.ModelLoadError`.
:func:`check_chatml` refuses a model whose chat template (``tokenizer.chat_template``) is not ChatML: the local
runtime renders prompts in ChatML (the format of the Qwen2.5 models it ships with).

>>> import struct, tempfile, os
>>> fd, name = tempfile.mkstemp(suffix=".gguf"); _ = os.write(fd, b"PK\\x03\\x04 not a model"); os.close(fd)
>>> read_gguf(name)
Traceback (most recent call last):
...
grapheval_plugins.exceptions.ModelLoadError: ... is not a GGUF file (it starts with b'PK\\x03\\x04', not b'GGUF')
>>> os.unlink(name)
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from ..exceptions import ModelLoadError

__all__ = ["GGUFInfo", "check_chatml", "is_chatml_template", "read_gguf"]

MAGIC = b"GGUF"
_DEFAULT_ALIGNMENT = 32
# GGUF metadata value types -> struct format (scalars); 8 = string, 9 = array.
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
# ggml tensor types -> (elements per block, bytes per block); types not listed are only offset-checked.
_TYPE_SIZES = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 30: (1, 2),
}
_MAX_STRING = 64 * 1024 * 1024  # a metadata string longer than this means a corrupt header
_KEEP_ARRAY = 64  # arrays longer than this (the vocabulary) are skipped, not kept


@dataclass(frozen=True)
class GGUFInfo:
    """What :func:`read_gguf` found.

    Attributes:
        path: the file.
        version: the GGUF format version.
        size: file size in bytes.
        tensor_count: number of tensors.
        metadata: metadata values (long arrays such as the vocabulary are replaced by their length).
        data_end: the end of the last tensor's data (≤ ``size`` for a complete file).
    """

    path: Path
    version: int
    size: int
    tensor_count: int
    metadata: dict[str, Any] = field(default_factory=dict)
    data_end: int = 0

    @property
    def architecture(self) -> str:
        return str(self.metadata.get("general.architecture", "unknown"))

    @property
    def chat_template(self) -> str | None:
        value = self.metadata.get("tokenizer.chat_template")
        return value if isinstance(value, str) else None


class _Truncated(Exception):
    pass


class _Reader:
    def __init__(self, fh: BinaryIO) -> None:
        self.fh = fh
        self.pos = 0

    def take(self, n: int) -> bytes:
        data = self.fh.read(n)
        if len(data) != n:
            raise _Truncated(self.pos + len(data))
        self.pos += n
        return data

    def skip(self, n: int) -> None:
        self.fh.seek(n, 1)
        self.pos += n

    def unpack(self, fmt: str) -> Any:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def string(self, size: int) -> str:
        length = self.unpack("<Q")
        if length > min(_MAX_STRING, size):
            raise ValueError(f"a metadata string of {length} bytes at offset {self.pos}")
        return self.take(length).decode("utf-8", errors="replace")

    def value(self, kind: int, size: int) -> Any:
        if kind in _SCALARS:
            return self.unpack(_SCALARS[kind])
        if kind == _STRING:
            return self.string(size)
        if kind == _ARRAY:
            item_kind, count = self.unpack("<I"), self.unpack("<Q")
            if count > size:
                raise ValueError(f"an array of {count} items at offset {self.pos}")
            if item_kind in _SCALARS and count > _KEEP_ARRAY:
                self.skip(count * struct.calcsize(_SCALARS[item_kind]))
                return count
            items = [self.value(item_kind, size) for _ in range(count)]
            return items if count <= _KEEP_ARRAY else count
        raise ValueError(f"unknown metadata value type {kind} at offset {self.pos}")


def read_gguf(path: str | Path) -> GGUFInfo:
    """Parse ``path``'s GGUF header, metadata and tensor descriptors; check every tensor lies inside the file.

    Raises:
        ModelLoadError: the file cannot be read, is not GGUF, has an unsupported version, a corrupt header, or is
            truncated (the message names the file, its size and the size its tensors need).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        fh = path.open("rb")
    except OSError as exc:
        raise ModelLoadError(f"cannot read the model file {path}: {exc}") from exc
    with fh:
        reader = _Reader(fh)
        try:
            magic = fh.read(4)
            reader.pos = len(magic)
            if magic != MAGIC:
                raise ModelLoadError(f"{path} is not a GGUF file (it starts with {magic!r}, not {MAGIC!r})")
            version = reader.unpack("<I")
            if version not in (2, 3):
                raise ModelLoadError(f"{path}: unsupported GGUF version {version} (llama.cpp reads versions 2 and 3)")
            n_tensors, n_kv = reader.unpack("<Q"), reader.unpack("<Q")
            if n_tensors > size or n_kv > size:
                raise ValueError(f"{n_tensors} tensors / {n_kv} metadata keys in a {size}-byte file")
            metadata: dict[str, Any] = {}
            for _ in range(n_kv):
                key = reader.string(size)
                metadata[key] = reader.value(reader.unpack("<I"), size)
            tensors: list[tuple[str, int, int, int]] = []  # name, type, offset, elements
            for _ in range(n_tensors):
                name = reader.string(size)
                n_dims = reader.unpack("<I")
                if n_dims > 8:
                    raise ValueError(f"tensor {name!r} has {n_dims} dimensions")
                elements = 1
                for _ in range(n_dims):
                    elements *= reader.unpack("<Q")
                kind, offset = reader.unpack("<I"), reader.unpack("<Q")
                tensors.append((name, kind, offset, elements))
        except _Truncated as cut:
            raise ModelLoadError(
                f"{path} is truncated: its GGUF header ends after {cut.args[0]:,} of {size:,} bytes"
            ) from None
        except (ValueError, struct.error, UnicodeDecodeError) as exc:
            raise ModelLoadError(f"{path} has a corrupt GGUF header: {exc}") from exc
        alignment = metadata.get("general.alignment", _DEFAULT_ALIGNMENT)
        if not isinstance(alignment, int) or alignment <= 0:
            alignment = _DEFAULT_ALIGNMENT
        data_start = -(-reader.pos // alignment) * alignment
        data_end = data_start
        for name, kind, offset, elements in tensors:
            block, nbytes = _TYPE_SIZES.get(kind, (1, 0))
            end = data_start + offset + -(-elements // block) * nbytes
            data_end = max(data_end, end)
            if end > size:
                raise ModelLoadError(
                    f"{path} is truncated: tensor {name!r} needs bytes up to {end:,} but the file has {size:,} "
                    "(an incomplete download or copy? delete it and fetch it again)"
                )
    return GGUFInfo(path=path, version=version, size=size, tensor_count=len(tensors), metadata=metadata,
                    data_end=data_end)


def is_chatml_template(template: str) -> bool:
    """Whether a Jinja chat template renders ChatML (``<|im_start|>role`` … ``<|im_end|>``).

    >>> is_chatml_template("{% for m in messages %}<|im_start|>{{ m.role }}\\n{{ m.content }}<|im_end|>{% endfor %}")
    True
    >>> is_chatml_template("{{ bos_token }}[INST] {{ m.content }} [/INST]")
    False
    """
    return "<|im_start|>" in template and "<|im_end|>" in template


def check_chatml(info: GGUFInfo) -> None:
    """Refuse a model whose chat template is not ChatML (or that has none).

    Raises:
        ModelLoadError: naming the file, its architecture and the start of its template.
    """
    template = info.chat_template
    if template is None:
        raise ModelLoadError(
            f"{info.path} ({info.architecture}) has no chat template (tokenizer.chat_template); the local runtime "
            "renders prompts in ChatML and only runs ChatML models such as Qwen2.5-Instruct GGUFs"
        )
    if not is_chatml_template(template):
        start = " ".join(template.split())[:80]
        raise ModelLoadError(
            f"{info.path} ({info.architecture}) uses a chat template that is not ChatML ({start!r} …); the local "
            "runtime renders prompts in ChatML and only runs ChatML models such as Qwen2.5-Instruct GGUFs"
        )
