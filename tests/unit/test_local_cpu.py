"""CPU features and the extra-buffer decision, from recorded /proc/cpuinfo and sysctl text (no real CPU needed)."""

from __future__ import annotations

import pytest

from grapheval_plugins.exceptions import InputError
from grapheval_plugins.local.cpu import (
    EXTRA_BUFFERS_ENV,
    cpu_features,
    decide_extra_buffers,
    parse_cpuinfo,
    parse_sysctl,
)

SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu vme de pse tsc msr sse sse2 ssse3 fma cx16 sse4_1 sse4_2 avx f16c avx2 avx512f avx512dq avx512cd \
avx512bw avx512vl avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8 arch_lbr
processor\t: 1
flags\t\t: fpu vme
"""
EPYC = """processor\t: 0
model name\t: AMD EPYC 7R13 Processor
flags\t\t: fpu sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2
"""
ICELAKE = "model name\t: Intel(R) Xeon(R) Platinum 8375C\nflags\t\t: sse2 avx avx2 avx512f avx512bw avx512vl\n"
GRAVITON = "processor\t: 0\nBogoMIPS\t: 243.75\nFeatures\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics\n"
OLD_SSE = "model name\t: Intel(R) Core(TM)2 Duo\nflags\t\t: fpu sse sse2 ssse3\n"
APPLE_M2 = """machdep.cpu.brand_string: Apple M2
hw.optional.neon: 1
hw.optional.arm.FEAT_DotProd: 1
hw.optional.arm.FEAT_I8MM: 0
"""
INTEL_MAC = """machdep.cpu.brand_string: Intel(R) Core(TM) i9-9880H CPU @ 2.30GHz
machdep.cpu.features: FPU VME SSE SSE2 SSE3 FMA AVX1.0 F16C
machdep.cpu.leaf7_features: SMEP BMI1 AVX2 BMI2 ERMS
"""


@pytest.mark.parametrize(
    ("text", "avx2", "avx512", "amx", "neon", "model"),
    [
        (SAPPHIRE_RAPIDS, True, True, True, False, "Intel(R) Xeon(R) Platinum 8488C"),
        (EPYC, True, False, False, False, "AMD EPYC 7R13 Processor"),
        (ICELAKE, True, True, False, False, "Intel(R) Xeon(R) Platinum 8375C"),
        (OLD_SSE, False, False, False, False, "Intel(R) Core(TM)2 Duo"),
    ],
)
def test_x86_cpuinfo(text: str, avx2: bool, avx512: bool, amx: bool, neon: bool, model: str) -> None:
    cpu = parse_cpuinfo(text, machine="x86_64")
    assert (cpu.avx2, cpu.avx512, cpu.amx, cpu.neon, cpu.model) == (avx2, avx512, amx, neon, model)
    assert cpu.source == "/proc/cpuinfo"


def test_arm64_linux_has_neon() -> None:
    cpu = parse_cpuinfo(GRAVITON, machine="aarch64")
    assert cpu.neon and not (cpu.avx2 or cpu.amx or cpu.avx512)
    assert "NEON" in cpu.summary()


def test_macos_sysctl_apple_silicon_and_intel() -> None:
    m2 = parse_sysctl(APPLE_M2, machine="arm64")
    assert m2.neon and m2.model == "Apple M2" and "dotprod" in m2.flags and "i8mm" not in m2.flags
    intel = parse_sysctl(INTEL_MAC, machine="x86_64")
    assert intel.avx2 and not intel.avx512 and not intel.amx and not intel.neon


def test_cpu_features_uses_the_reader_of_the_system() -> None:
    def no_cpuinfo() -> str:
        raise AssertionError("Linux reader used on macOS")

    mac = cpu_features(machine="arm64", system="Darwin", read_sysctl=lambda: APPLE_M2, read_cpuinfo=no_cpuinfo)
    assert mac.neon and mac.source == "sysctl"
    linux = cpu_features(machine="x86_64", system="Linux", read_cpuinfo=lambda: SAPPHIRE_RAPIDS)
    assert linux.amx and linux.source == "/proc/cpuinfo"
    unknown = cpu_features(machine="aarch64", system="Linux", read_cpuinfo=lambda: None)
    assert unknown.neon and unknown.source == "platform"  # every AArch64 CPU has Advanced SIMD


@pytest.mark.parametrize("text", [SAPPHIRE_RAPIDS, EPYC, ICELAKE, OLD_SSE, GRAVITON])
def test_default_is_off_on_every_cpu(text: str) -> None:
    cpu = parse_cpuinfo(text, machine="aarch64" if text is GRAVITON else "x86_64")
    decision = decide_extra_buffers(None, env={}, cpu=cpu)
    assert decision.enabled is False and decision.risky is False
    assert "default" in decision.reason


def test_environment_variable_opts_in_and_amx_makes_it_risky() -> None:
    amx = parse_cpuinfo(SAPPHIRE_RAPIDS, machine="x86_64")
    epyc = parse_cpuinfo(EPYC, machine="x86_64")
    on = {EXTRA_BUFFERS_ENV: "1"}
    assert decide_extra_buffers(None, env=on, cpu=amx).risky is True
    assert decide_extra_buffers(None, env=on, cpu=epyc).risky is False
    assert decide_extra_buffers(None, env=on, cpu=epyc).enabled is True
    assert EXTRA_BUFFERS_ENV in decide_extra_buffers(None, env=on, cpu=epyc).reason
    assert decide_extra_buffers(None, env={EXTRA_BUFFERS_ENV: "off"}, cpu=amx).enabled is False


def test_the_option_wins_over_the_environment() -> None:
    amx = parse_cpuinfo(SAPPHIRE_RAPIDS, machine="x86_64")
    assert decide_extra_buffers(False, env={EXTRA_BUFFERS_ENV: "1"}, cpu=amx).enabled is False
    forced = decide_extra_buffers(True, env={EXTRA_BUFFERS_ENV: "0"}, cpu=amx)
    assert forced.enabled and forced.risky and forced.reason == "extra_buffers=True"
    assert "extra_buffers=False" in forced.hint() or EXTRA_BUFFERS_ENV in forced.hint()


def test_a_bad_environment_value_names_the_variable() -> None:
    with pytest.raises(InputError, match=EXTRA_BUFFERS_ENV) as info:
        decide_extra_buffers(None, env={EXTRA_BUFFERS_ENV: "maybe"})
    assert info.value.field == EXTRA_BUFFERS_ENV
