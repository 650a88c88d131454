"""The torch runtime of the HuggingFace scorers (imported lazily): device and dtype, out-of-memory."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, Union, cast

from .._imports import require

if TYPE_CHECKING:
    import torch

__all__ = ["DTypeLike", "DeviceLike", "Features", "resolve_dtype", "select_device"]

logger = logging.getLogger("grapheval_plugins.check.hf")

DeviceLike = Union[str, "torch.device", None]
DTypeLike = Union[str, "torch.dtype", None]
Features = dict[str, list[int]]

_DTYPE_NAMES = {
    "float32": "float32", "fp32": "float32", "float": "float32",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
}


def _torch() -> Any:
    return require("torch", "hf", "the HuggingFace scorers")


def _transformers() -> Any:
    return require("transformers", "hf", "the HuggingFace scorers")


def select_device(device: DeviceLike = None) -> torch.device:
    """The device to run on: the one given, else cuda, then mps, then cpu (logged).

    >>> str(select_device("cpu"))
    'cpu'
    """
    _torch()  # a missing torch raises MissingDependencyError, naming the extra
    import torch

    if device is not None:
        return torch.device(device)
    if torch.cuda.is_available():
        chosen = torch.device("cuda")
    elif getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
        chosen = torch.device("mps")
    else:
        chosen = torch.device("cpu")
    logger.info("using device %s", chosen)
    return chosen


def resolve_dtype(dtype: DTypeLike, device: torch.device, *, allow_fp16: bool = True) -> torch.dtype:
    """The weights' precision: the one given, else bfloat16 or (``allow_fp16``) float16 on a GPU, or float32.

    >>> import torch
    >>> resolve_dtype(None, torch.device("cpu"))
    torch.float32
    >>> resolve_dtype("bf16", torch.device("cpu"))
    torch.bfloat16
    """
    _torch()  # a missing torch raises MissingDependencyError, naming the extra
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype.lower() != "auto":
        key = _DTYPE_NAMES.get(dtype.lower())
        if key is None:
            raise ValueError(f"unknown dtype {dtype!r}: use one of {sorted(set(_DTYPE_NAMES))} or a torch.dtype")
        return cast("torch.dtype", getattr(torch, key))
    if dtype is not None and not isinstance(dtype, str):
        raise TypeError(f"dtype must be a torch.dtype, a name or None, not {type(dtype).__name__}")
    if device.type == "cuda" and torch.cuda.is_bf16_supported():
        return torch.bfloat16
    return torch.float16 if device.type in ("cuda", "mps") and allow_fp16 else torch.float32


def _is_oom(exc: BaseException) -> bool:
    # torch.cuda.OutOfMemoryError is torch.OutOfMemoryError (2.5+); other devices say it in a RuntimeError.
    return isinstance(exc, _torch().cuda.OutOfMemoryError) or "out of memory" in str(exc).lower()
