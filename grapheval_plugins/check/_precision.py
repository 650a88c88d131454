"""Which numeric path the HuggingFace scorers run on: the choice (pure, no torch) and its application to a model.

The paths (the scorers' ``dtype`` option, or ``$GRAPHEVAL_HF_DTYPE`` when the option is ``None`` / ``"auto"``):

* ``float32``: weights and arithmetic in float32 (the reference).
* ``bf16-autocast``: the encoder's matrix products in bfloat16 under ``torch.autocast`` (its ``Linear`` weights
  stored in bfloat16: the same numbers, without a cast per batch); norms, embeddings, the residual stream, the
  classification head (``classifier`` / ``pooler`` / ``lm_head`` / ``score``), the logits and the softmax stay in
  float32.
* ``int8``: dynamic int8 quantization of the encoder's ``Linear`` layers
  (``torch.ao.quantization.quantize_dynamic``); the head stays in float32. CPU only.
* ``bfloat16`` / ``float16``: the whole model's weights in that type (the GPU default; on request on a CPU).

``"auto"`` (the default) on a CPU picks ``bf16-autocast`` where the CPU multiplies bfloat16 natively
(``avx512_bf16`` or ``amx_bf16`` among its flags), else ``float32``: dynamic int8 missed the accuracy bound on
the real-weight reference (docs/benchmarks.md), so it is used only on request. An automatic reduced path is
*guarded*: at load, the scorer scores :data:`PROBE_PAIRS` in float32 and on the path, and falls back to float32
when P(supported) moves by more than :data:`MAX_DELTA_P`. On a GPU, ``"auto"`` keeps the half-precision weights
of :func:`~grapheval_plugins.check._runtime.resolve_dtype`.

>>> choose_precision(None, flags={"avx2", "avx512f", "avx512_bf16"}, env={}).name
'bf16-autocast'
>>> choose_precision(None, flags={"avx2", "avx512f"}, env={}).name
'float32'
>>> choose_precision("int8", flags=set(), env={}).name
'int8'
>>> choose_precision(None, flags={"amx_bf16"}, env={"GRAPHEVAL_HF_DTYPE": "float32"}).reason
'GRAPHEVAL_HF_DTYPE=float32'
"""

from __future__ import annotations

import os
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..cpu import cpu_features, parse_cpuinfo

__all__ = [
    "MAX_DELTA_P",
    "PRECISION_ENV",
    "PROBE_PAIRS",
    "Precision",
    "choose_precision",
    "keep_heads_float32",
    "native_bf16",
    "quantize_int8",
    "read_cpu_flags",
    "store_linear_bf16",
]

PRECISION_ENV = "GRAPHEVAL_HF_DTYPE"
"""Environment variable: the HF scorers' path when their ``dtype`` option is ``None`` or ``"auto"``."""
MAX_DELTA_P = 0.02
"""The largest change of P(supported) against float32 an automatically chosen path may make on the probe pairs."""
BF16_FLAGS = ("avx512_bf16", "amx_bf16")
"""CPU flags (Linux ``/proc/cpuinfo`` names) of native bfloat16 arithmetic; without them bfloat16 is emulated."""
HEAD_NAMES = ("classifier", "pooler", "lm_head", "score")
"""Submodules kept in float32 on the reduced paths (the classification heads of the supported architectures)."""
INT8_IN_AUTO = False
"""Whether ``"auto"`` may pick ``int8`` on a CPU without native bfloat16 (off: it missed the bound, see above)."""

PATHS = ("float32", "bf16-autocast", "int8", "bfloat16", "float16")
_ALIASES = {
    "float32": "float32", "fp32": "float32", "float": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16",
    "bf16-autocast": "bf16-autocast", "autocast-bf16": "bf16-autocast", "autocast": "bf16-autocast",
    "int8": "int8", "qint8": "int8", "dynamic-int8": "int8",
}

PROBE_PAIRS: tuple[tuple[str, str], ...] = (
    ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris.", "The Eiffel Tower is in Paris."),
    ("The Eiffel Tower was completed in 1889 for the World's Fair in Paris.", "The tower was finished in 1901."),
    ("Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.", "Curie won two Nobel Prizes."),
    ("Marie Curie won the Nobel Prize in Physics in 1903 and in Chemistry in 1911.", "Curie never won a prize."),
    ("The company reported revenue of 4.2 billion dollars, up 8 percent from last year, and plans to hire 300 "
     "engineers in Dublin.", "Revenue fell compared with the year before."),
    ("The company reported revenue of 4.2 billion dollars, up 8 percent from last year, and plans to hire 300 "
     "engineers in Dublin.", "The company will hire engineers in Ireland."),
    ("Heavy rain closed the northern motorway on Sunday; police said two people were injured in a crash near "
     "the bridge.", "Two people were hurt in a crash."),
    ("Heavy rain closed the northern motorway on Sunday; police said two people were injured in a crash near "
     "the bridge.", "The motorway stayed open all weekend."),
)
"""Short (premise, hypothesis) pairs the load-time guard scores in float32 and on the chosen path."""


@dataclass(frozen=True)
class Precision:
    """A numeric path and why it was chosen.

    Attributes:
        name: one of ``float32``, ``bf16-autocast``, ``int8``, ``bfloat16``, ``float16``, or ``device-default``
            (``"auto"`` on a GPU: the half precision :func:`resolve_dtype` picks).
        reason: how it was chosen (the option, the environment variable, or the CPU's features).
        guarded: chosen automatically: checked at load against float32 on :data:`PROBE_PAIRS`.
    """

    name: str
    reason: str
    guarded: bool = False

    @property
    def weights(self) -> str | None:
        """The weights' dtype name (``None``: the device's default)."""
        if self.name in ("float32", "bf16-autocast", "int8"):
            return "float32"
        return None if self.name == "device-default" else self.name

    @property
    def autocast(self) -> bool:
        return self.name == "bf16-autocast"

    @property
    def int8(self) -> bool:
        return self.name == "int8"

    def with_reason(self, reason: str, **changes: Any) -> Precision:
        return replace(self, reason=reason, **changes)

    def describe(self) -> str:
        """One line: the path and the reason, e.g. ``bf16-autocast (auto: the CPU has avx512_bf16)``."""
        return f"{self.name} ({self.reason})"


def native_bf16(flags: Collection[str]) -> bool:
    """Whether the CPU flags include native bfloat16 arithmetic (AVX-512-BF16 or AMX-BF16).

    >>> native_bf16({"avx512f", "avx512_bf16"}), native_bf16({"avx512f", "avx512bw"})
    (True, False)
    """
    lower = {f.lower() for f in flags}
    return any(f in lower for f in BF16_FLAGS)


def read_cpu_flags(read: Callable[[], str | None] | None = None) -> frozenset[str]:
    """This CPU's flags, lower case (:func:`grapheval_plugins.cpu.cpu_features`: ``/proc/cpuinfo`` on Linux,
    ``sysctl`` on macOS; empty where neither says); ``read`` gives recorded ``/proc/cpuinfo`` text instead.

    >>> sorted(read_cpu_flags(lambda: "model name : X\\nflags : fpu AVX512_BF16 avx2\\n"))
    ['avx2', 'avx512_bf16', 'fpu']
    """
    if read is None:
        return cpu_features().flags
    return parse_cpuinfo(read() or "").flags


def _name_of(dtype: Any) -> str:
    """A canonical path name from a string or a ``torch.dtype`` (``ValueError`` on an unknown name)."""
    if isinstance(dtype, str):
        text = dtype.strip().lower()
    elif type(dtype).__name__ == "dtype":  # a torch.dtype (not imported here)
        text = str(dtype).removeprefix("torch.")
    else:
        raise TypeError(f"dtype must be a torch.dtype, a name or None, not {type(dtype).__name__}")
    if text == "auto":
        return "auto"
    if text not in _ALIASES:
        raise ValueError(f"unknown dtype {dtype!r}: use 'auto', one of {sorted(_ALIASES)} or a torch.dtype")
    return _ALIASES[text]


def choose_precision(
    requested: Any,
    *,
    device_type: str = "cpu",
    flags: Collection[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Precision:
    """The path for ``requested`` (the ``dtype`` option): explicit > ``$GRAPHEVAL_HF_DTYPE`` > automatic.

    ``flags``: the CPU's flags (default: :func:`read_cpu_flags`). Raises ``ValueError`` on an unknown name and
    on ``int8`` / ``bf16-autocast`` off the CPU.
    """
    environ = os.environ if env is None else env
    name = "auto" if requested is None else _name_of(requested)
    reason = f"dtype={requested!r}" if name != "auto" else ""
    if name == "auto" and environ.get(PRECISION_ENV, "").strip():
        raw = environ[PRECISION_ENV].strip()
        try:
            name = _name_of(raw)
        except ValueError as exc:
            raise ValueError(f"{PRECISION_ENV}: {exc}") from None
        reason = f"{PRECISION_ENV}={raw}"
    if name != "auto":
        if name in ("int8", "bf16-autocast") and device_type != "cpu":
            raise ValueError(f"dtype {name!r} runs on the CPU only (device {device_type!r})")
        return Precision(name, reason)
    if device_type != "cpu":
        return Precision("device-default", f"auto: half precision on {device_type} where it is safe")
    cpu_flags = read_cpu_flags() if flags is None else {f.lower() for f in flags}
    if native_bf16(cpu_flags):
        have = ", ".join(f for f in BF16_FLAGS if f in cpu_flags)
        return Precision("bf16-autocast", f"auto: the CPU multiplies bfloat16 natively ({have})", guarded=True)
    if INT8_IN_AUTO:
        return Precision("int8", "auto: no native bfloat16 on this CPU", guarded=True)
    return Precision("float32", "auto: no native bfloat16 on this CPU (avx512_bf16 / amx_bf16); "
                                "dynamic int8 is not accurate enough to be chosen on its own")


# --------------------------------------------------------------------------- applying a path to a model
def _head_modules(model: Any) -> list[tuple[Any, str, Any]]:
    """``(parent, attribute, module)`` of every head submodule (by :data:`HEAD_NAMES`), outermost first."""
    found: list[tuple[Any, str, Any]] = []
    taken: list[str] = []
    for qualified, module in model.named_modules():
        parent_name, _, attr = qualified.rpartition(".")
        if attr not in HEAD_NAMES or any(qualified.startswith(t + ".") for t in taken):
            continue
        parent = model.get_submodule(parent_name) if parent_name else model
        found.append((parent, attr, module))
        taken.append(qualified)
    return found


def keep_heads_float32(model: Any) -> list[str]:
    """Run the model's head submodules with autocast off and float32 inputs; returns their names.

    The module's ``forward`` is replaced on the instance (its parameters and state-dict keys are unchanged).
    """
    import torch

    names: list[str] = []
    for _parent, attr, module in _head_modules(model):
        if getattr(module, "_grapheval_float32", False):
            continue
        inner = module.forward

        def forward(*args: Any, _inner: Any = inner, **kwargs: Any) -> Any:
            def up(value: Any) -> Any:
                return value.float() if isinstance(value, torch.Tensor) and value.is_floating_point() else value

            with torch.autocast("cpu", enabled=False):
                return _inner(*[up(a) for a in args], **{k: up(v) for k, v in kwargs.items()})

        module.forward = forward
        module._grapheval_float32 = True
        names.append(attr)
    return names


def _outside_heads(model: Any) -> list[tuple[str, Any]]:
    """``(name, module)`` of the ``Linear`` layers not inside a head."""
    import torch

    heads = [q for q, _ in model.named_modules() if q.rpartition(".")[2] in HEAD_NAMES]
    return [(q, m) for q, m in model.named_modules()
            if isinstance(m, torch.nn.Linear) and not any(q == h or q.startswith(h + ".") for h in heads)]


def store_linear_bf16(model: Any) -> int:
    """Store the weights of the ``Linear`` layers outside the heads in bfloat16; returns how many.

    Under bfloat16 autocast this gives the same numbers as float32 weights (autocast rounds them to bfloat16 before
    every product anyway) without re-casting them on every batch, and halves their memory. Norms, embeddings and
    the heads keep float32. The model then runs only under autocast.
    """
    import torch

    layers = _outside_heads(model)
    for _name, module in layers:
        module.to(torch.bfloat16)
    return len(layers)


def quantize_int8(model: Any) -> Any:
    """A copy of ``model`` whose ``Linear`` layers outside the head run in dynamic int8 (weights int8, activations
    quantized per batch); the head stays in float32."""
    import torch

    linear = {q for q, _ in _outside_heads(model)}
    quantize: Any = torch.ao.quantization.quantize_dynamic  # untyped in torch
    quantized: Any = quantize(model, qconfig_spec=linear, dtype=torch.qint8, inplace=False)
    return quantized


def max_delta(reference: Sequence[float], other: Sequence[float]) -> float:
    """The largest absolute difference of two equally long score lists.

    >>> max_delta([0.5, 0.25], [0.5, 0.2])
    0.05
    """
    return round(max((abs(a - b) for a, b in zip(reference, other, strict=True)), default=0.0), 10)
