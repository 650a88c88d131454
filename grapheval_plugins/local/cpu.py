"""The CPU features llama.cpp's kernels depend on, and the decision to use its extra weight buffer types.

llama.cpp can *repack* a model's weights at load time into "extra buffer types" laid out for a CPU's matrix units
(Intel AMX tiles, or the interleaved AVX2 / NEON layouts). On Sapphire-Rapids-class Xeons (flags ``amx_tile``,
``amx_int8``, ``amx_bf16``) the AMX repack path of the llama.cpp bundled with llama-cpp-python 0.3.x crashes
inside ``llama_decode`` (a segmentation fault) with this package's Qwen2.5 Q4_K_M models. The offline default
therefore loads every model **without** extra buffer types, on every CPU; a user opts in with
``extra_buffers=True`` on :class:`~grapheval_plugins.local.chat.ChatLocalLlama` /
:class:`~grapheval_plugins.local.judge.LocalJudgeScorer`, or ``GRAPHEVAL_LLAMA_EXTRA_BUFFERS=1`` in the
environment (the option wins over the variable).

:func:`cpu_features` (from :mod:`grapheval_plugins.cpu`, re-exported here) reads the flags from ``/proc/cpuinfo``
(Linux) or ``sysctl`` (macOS); both readers are injectable, so the decision is testable without the CPU:

>>> cpu = parse_cpuinfo("flags\\t\\t: fpu sse2 avx2 fma amx_tile amx_int8 amx_bf16 avx512f\\n", machine="x86_64")
>>> cpu.amx, cpu.avx512, cpu.avx2
(True, True, True)
>>> decide_extra_buffers(None, env={}, cpu=cpu).enabled
False
>>> d = decide_extra_buffers(None, env={"GRAPHEVAL_LLAMA_EXTRA_BUFFERS": "1"}, cpu=cpu)
>>> d.enabled, d.risky
(True, True)
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from ..cpu import CPUFeatures, cpu_features, parse_cpuinfo, parse_sysctl
from ..exceptions import InputError

__all__ = [
    "EXTRA_BUFFERS_ENV",
    "CPUFeatures",
    "ExtraBuffersDecision",
    "cpu_features",
    "decide_extra_buffers",
    "parse_cpuinfo",
    "parse_sysctl",
]

EXTRA_BUFFERS_ENV = "GRAPHEVAL_LLAMA_EXTRA_BUFFERS"
"""Environment variable: ``1`` / ``true`` / ``on`` lets llama.cpp repack weights into extra buffer types."""

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off", "")


@dataclass(frozen=True)
class ExtraBuffersDecision:
    """Whether llama.cpp may repack weights into extra buffer types, and why.

    Attributes:
        enabled: the value passed to llama.cpp's ``use_extra_bufts`` model parameter.
        reason: how it was decided (the option, the environment variable, or the default).
        risky: enabled on a CPU with AMX, where the repack path is known to crash.
    """

    enabled: bool
    reason: str
    risky: bool = False

    def hint(self) -> str:
        """What to do when a decode crashes under this decision."""
        if self.enabled:
            return (
                f"llama.cpp ran with extra weight buffer types ({self.reason}): load without them, the default "
                f"(extra_buffers=False, or unset {EXTRA_BUFFERS_ENV})"
            )
        return (
            "llama.cpp crashed with extra buffer types already off: report the CPU (grapheval doctor --json) and "
            "the llama-cpp-python version"
        )


def parse_flag(value: str, name: str = EXTRA_BUFFERS_ENV) -> bool:
    """``1``/``true``/``yes``/``on`` → True, ``0``/``false``/``no``/``off``/empty → False, else :class:`InputError`."""
    text = value.strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise InputError(name, f"expected 1/0, true/false, yes/no or on/off, got {value!r}")


def decide_extra_buffers(
    requested: bool | None,
    *,
    env: Mapping[str, str] | None = None,
    cpu: CPUFeatures | None = None,
) -> ExtraBuffersDecision:
    """Decide llama.cpp's ``use_extra_bufts``: the explicit option, else ``$GRAPHEVAL_LLAMA_EXTRA_BUFFERS``, else off.

    ``cpu`` only qualifies the decision (``risky`` when enabled on an AMX CPU); it never turns the repack on.

    Raises:
        InputError: the environment variable holds something other than a yes/no value.
    """
    environ = os.environ if env is None else env
    if requested is not None:
        enabled, reason = bool(requested), f"extra_buffers={bool(requested)}"
    elif environ.get(EXTRA_BUFFERS_ENV, "").strip():
        raw = environ[EXTRA_BUFFERS_ENV]
        enabled, reason = parse_flag(raw), f"{EXTRA_BUFFERS_ENV}={raw.strip()}"
    else:
        enabled, reason = False, "default: off on every CPU"
    risky = enabled and cpu is not None and cpu.amx
    return ExtraBuffersDecision(enabled=enabled, reason=reason, risky=risky)
