"""What this machine's CPU can do: its SIMD / matrix features, read from ``/proc/cpuinfo`` (Linux) or ``sysctl``
(macOS). llama.cpp's kernels (:mod:`grapheval_plugins.local.cpu`) and the HF scorers' numeric path
(``check/_precision.py``) both decide by them; the readers are injectable, so decisions are testable without the CPU.

>>> cpu = parse_cpuinfo("flags\\t\\t: fpu sse2 avx2 fma amx_tile amx_int8 amx_bf16 avx512f\\n", machine="x86_64")
>>> cpu.amx, cpu.avx512, cpu.avx2
(True, True, True)
"""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["CPUFeatures", "cpu_features", "parse_cpuinfo", "parse_sysctl"]


@dataclass(frozen=True)
class CPUFeatures:
    """The SIMD / matrix features llama.cpp's CPU backend picks kernels by.

    Attributes:
        machine: ``platform.machine()`` (``x86_64``, ``arm64``, ``aarch64`` …).
        model: the CPU model name, when known.
        avx2, avx512, amx, neon: feature present (``avx512`` = AVX-512 Foundation; ``amx`` = any AMX tile flag).
        flags: every flag read (lower case).
        source: where the flags came from (``/proc/cpuinfo``, ``sysctl``, ``platform``).
    """

    machine: str
    model: str = ""
    avx2: bool = False
    avx512: bool = False
    amx: bool = False
    neon: bool = False
    flags: frozenset[str] = field(default_factory=frozenset)
    source: str = ""

    def summary(self) -> str:
        """A one-line description, e.g. ``x86_64 AMD EPYC: AVX2``."""
        names = [n for n, on in (("AVX2", self.avx2), ("AVX-512", self.avx512), ("AMX", self.amx),
                                 ("NEON", self.neon)) if on]
        return f"{self.machine} {self.model}".strip() + ": " + (", ".join(names) or "none of AVX2/AVX-512/AMX/NEON")


def _is_arm(machine: str) -> bool:
    return machine.lower() in ("arm64", "aarch64", "armv8l", "armv8b") or machine.lower().startswith("arm")


def _features(machine: str, model: str, flags: set[str], source: str) -> CPUFeatures:
    arm = _is_arm(machine)
    return CPUFeatures(
        machine=machine,
        model=model,
        avx2="avx2" in flags,
        avx512="avx512f" in flags,
        amx=any(f.startswith("amx") for f in flags),
        # AArch64 always has Advanced SIMD; Linux calls it "asimd", older 32-bit kernels "neon".
        neon=arm and (machine.lower() in ("arm64", "aarch64") or bool({"neon", "asimd"} & flags)),
        flags=frozenset(flags),
        source=source,
    )


def parse_cpuinfo(text: str, *, machine: str | None = None) -> CPUFeatures:
    """Features from the text of Linux's ``/proc/cpuinfo`` (x86 ``flags`` lines, ARM ``Features`` lines).

    >>> parse_cpuinfo("Features\\t: fp asimd evtstrm aes\\n", machine="aarch64").neon
    True
    """
    flags: set[str] = set()
    model = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key in ("flags", "features") and not flags:  # the first CPU's line; all cores are alike here
            flags = {f.lower() for f in value.split()}
        elif key in ("model name", "cpu model", "hardware") and not model:
            model = value.strip()
    return _features(machine or platform.machine(), model, flags, "/proc/cpuinfo")


def parse_sysctl(text: str, *, machine: str | None = None) -> CPUFeatures:
    """Features from macOS ``sysctl -a`` style output (``key: value`` lines).

    Intel Macs list ``machdep.cpu.features`` / ``machdep.cpu.leaf7_features``; Apple silicon lists
    ``hw.optional.neon: 1`` (and ``hw.optional.arm.FEAT_*`` keys).

    >>> parse_sysctl("machdep.cpu.brand_string: Apple M2\\nhw.optional.neon: 1\\n", machine="arm64").neon
    True
    """
    flags: set[str] = set()
    model = ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "machdep.cpu.brand_string":
            model = value
        elif key in ("machdep.cpu.features", "machdep.cpu.leaf7_features", "machdep.cpu.extfeatures"):
            flags |= {f.lower().replace(".", "_") for f in value.split()}
        elif key.startswith("hw.optional.") and value == "1":
            name = key.removeprefix("hw.optional.").lower()
            flags.add(name.removeprefix("arm.").removeprefix("feat_") if name.startswith("arm.") else name)
    # Intel spells them AVX2, AVX512F, AMX_TILE … (already lower-cased above).
    return _features(machine or platform.machine(), model, flags, "sysctl")


def _read_proc_cpuinfo() -> str | None:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _read_sysctl() -> str | None:
    try:
        done = subprocess.run(["sysctl", "-a"], capture_output=True, text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout if done.returncode == 0 else None


def cpu_features(
    *,
    machine: str | None = None,
    read_cpuinfo: Callable[[], str | None] = _read_proc_cpuinfo,
    read_sysctl: Callable[[], str | None] = _read_sysctl,
    system: str | None = None,
) -> CPUFeatures:
    """The features of this CPU (the readers are injectable: tests feed recorded text).

    Linux reads ``/proc/cpuinfo``; macOS runs ``sysctl -a``; elsewhere only the architecture is known (arm64 is
    reported with NEON, which every AArch64 CPU has).
    """
    machine = machine or platform.machine()
    system = system or platform.system()
    if system == "Darwin":
        text = read_sysctl()
        if text:
            return parse_sysctl(text, machine=machine)
    else:
        text = read_cpuinfo()
        if text:
            return parse_cpuinfo(text, machine=machine)
    return _features(machine, platform.processor(), set(), "platform")
