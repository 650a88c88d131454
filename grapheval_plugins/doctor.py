"""``grapheval doctor``: can the main job run on this machine, and if not, why.

:func:`run_doctor` collects, without importing torch or llama.cpp into this process:

* the package version and which extras are installed; Python; torch / transformers / llama-cpp-python versions;
* the CPU features llama.cpp picks kernels by (AVX2, AVX-512, AMX, NEON) and whether llama.cpp's extra weight
  buffer types (the AMX repack path) are on, and why;
* the numeric path the HuggingFace scorers will run on this CPU (float32, bfloat16 autocast or int8), and why;
* for each offline model, where its weights resolve from (environment variable, cache, hub cache, installed
  weight packages, or only the hub) and whether the sha256 matches the pin;
* whether the model hub is reachable (one TCP connection attempt with a short timeout; skipped when
  ``HF_HUB_OFFLINE`` is set);
* one tiny real decode **in a child process** (:mod:`grapheval_plugins.local.probe`): OK, or the crash with its
  signal, the last lines of output and what to change.

:attr:`DoctorReport.ok` is true only if the main job (``grapheval demo``: the default local models) can run.
Every probe is injectable, so the tests run offline and without models::

    >>> report = run_doctor(decode=False, verify=False, hub_probe=lambda: HubProbe(False, "skipped in a test"))
    >>> [c.name for c in report.checks][:3]
    ['grapheval-plugins', 'python', 'extras']
"""

from __future__ import annotations

import platform
import re
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any, Literal

from .check._precision import MAX_DELTA_P, choose_precision
from .local.cpu import CPUFeatures, cpu_features, decide_extra_buffers
from .local.hub import HubProbe, hub_enabled, probe_hub
from .local.probe import ProbeResult, run_probe
from .local.weights import KNOWN_MODELS, WeightsStatus, locate_weights

__all__ = ["Check", "DoctorReport", "installed_extras", "run_doctor"]

Status = Literal["ok", "warn", "fail", "info"]
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
"""The model of the main job (``GraphEval()`` / ``grapheval demo``)."""
LIBRARIES = ("torch", "transformers", "llama-cpp-python", "huggingface-hub", "langchain-core", "deepeval", "ragas")


@dataclass(frozen=True)
class Check:
    """One line of the doctor's report. ``blocking`` failures mean the main job cannot run."""

    name: str
    status: Status
    detail: str
    blocking: bool = False


@dataclass
class DoctorReport:
    """All checks, and the raw facts behind them (:meth:`as_dict` is what ``--json`` prints)."""

    checks: list[Check] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when no blocking check failed: the main job can run."""
        return not any(c.status == "fail" and c.blocking for c in self.checks)

    def add(self, name: str, status: Status, detail: str, blocking: bool = False) -> Check:
        check = Check(name, status, detail, blocking)
        self.checks.append(check)
        return check

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [asdict(c) for c in self.checks], "facts": self.facts}


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


_EXTRA = re.compile(r"""extra\s*==\s*['"]([^'"]+)['"]""")
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[([^\]]*)\])?")


def installed_extras(dist: str = "grapheval-plugins") -> dict[str, bool]:
    """For each extra of ``dist``: whether every requirement it adds is installed (nested extras expanded)."""
    try:
        requires = metadata.requires(dist) or []
    except metadata.PackageNotFoundError:
        return {}
    by_extra: dict[str, list[tuple[str, list[str]]]] = {}
    for requirement in requires:
        marker = _EXTRA.search(requirement)
        name = _NAME.match(requirement)
        if marker is None or name is None:
            continue
        nested = [e.strip() for e in (name.group(2) or "").split(",") if e.strip()]
        by_extra.setdefault(marker.group(1), []).append((name.group(1), nested))

    def complete(extra: str, seen: frozenset[str]) -> bool:
        for name, nested in by_extra.get(extra, []):
            if name.lower().replace("_", "-") == dist:
                if not all(complete(e, seen | {extra}) for e in nested if e not in seen):
                    return False
            elif _version(name) is None:
                return False
        return True

    return {extra: complete(extra, frozenset()) for extra in sorted(by_extra)}


def run_doctor(
    *,
    model: str = DEFAULT_MODEL,
    decode: bool = True,
    verify: bool = True,
    extra_buffers: bool | None = None,
    hub_probe: Callable[[], HubProbe] | None = None,
    cpu_reader: Callable[[], CPUFeatures] = cpu_features,
    decode_runner: Callable[[str, bool | None], ProbeResult] | None = None,
    weights_locator: Callable[[str], WeightsStatus] | None = None,
) -> DoctorReport:
    """Check the machine for the main job; see the module docstring. Every probe can be replaced.

    Args:
        model: the model to decode with (default: the main job's, :data:`DEFAULT_MODEL`).
        decode: run the child-process decode.
        verify: hash the weights and compare them with the pinned sha256 (a few seconds per GB).
        extra_buffers: the extra-buffer setting to decode with (default: as the main job decides it).
        hub_probe: replaces :func:`~grapheval_plugins.local.hub.probe_hub`.
        cpu_reader: replaces :func:`~grapheval_plugins.local.cpu.cpu_features`.
        decode_runner: replaces :func:`~grapheval_plugins.local.probe.run_probe` (``(model, extra_buffers)``).
        weights_locator: replaces :func:`~grapheval_plugins.local.weights.locate_weights`.
    """
    from ._version import __version__

    report = DoctorReport()
    report.add("grapheval-plugins", "info", __version__)
    report.add("python", "info", f"{platform.python_version()} ({sys.executable})")
    extras = installed_extras()
    report.facts["extras"] = extras
    have = [e for e, ok in extras.items() if ok]
    report.add("extras", "info", ", ".join(have) or "none (core only)")

    versions = {lib: _version(lib) for lib in LIBRARIES}
    report.facts["versions"] = versions
    report.add("libraries", "info", ", ".join(f"{k} {v or '—'}" for k, v in versions.items()))
    llama_ok = versions["llama-cpp-python"] is not None
    if not llama_ok:
        report.add("llama-cpp-python", "fail",
                   "not installed: the offline default needs it (pip install 'grapheval-plugins[local]')", True)

    # CPU and the extra-buffer decision
    cpu = cpu_reader()
    report.facts["cpu"] = {"machine": cpu.machine, "model": cpu.model, "avx2": cpu.avx2, "avx512": cpu.avx512,
                           "amx": cpu.amx, "neon": cpu.neon, "source": cpu.source}
    report.add("cpu", "info", cpu.summary())
    try:
        decision = decide_extra_buffers(extra_buffers, cpu=cpu)
    except ValueError as exc:  # InputError: a bad GRAPHEVAL_LLAMA_EXTRA_BUFFERS value
        report.add("extra buffer types", "fail", str(exc), True)
        decision = None
    if decision is not None:
        report.facts["extra_buffers"] = {"enabled": decision.enabled, "reason": decision.reason,
                                         "risky": decision.risky}
        note = " — the AMX repack path is known to crash on this CPU" if decision.risky else ""
        report.add("extra buffer types", "warn" if decision.risky else "ok",
                   f"{'on' if decision.enabled else 'off'} ({decision.reason}){note}")

    # The HF scorers' numeric path on this CPU (chosen from the same flags; torch is not imported)
    try:
        precision = choose_precision(None, device_type="cpu", flags=cpu.flags)
    except ValueError as exc:  # a bad GRAPHEVAL_HF_DTYPE value
        report.add("HF scorers on CPU", "warn", str(exc))
    else:
        report.facts["hf_precision"] = {"cpu": precision.name, "reason": precision.reason,
                                        "guarded": precision.guarded}
        guard = (f"; checked at load against float32 (falls back if P(supported) moves > {MAX_DELTA_P})"
                 if precision.guarded else "")
        report.add("HF scorers on CPU", "info", f"{precision.describe()}{guard}; on a GPU: half-precision weights")

    # Weights of the offline models
    locate = weights_locator or (lambda name: locate_weights(name, verify=verify))
    weights: dict[str, WeightsStatus] = {}
    for name in KNOWN_MODELS:
        status = weights[name] = locate(name)
        report.facts.setdefault("weights", {})[name] = {
            "source": status.source, "path": str(status.path) if status.path else None,
            "sha256_ok": status.verified, "detail": status.detail,
        }
        check = ("sha256 not checked" if status.verified is None
                 else "sha256 ok" if status.verified else "sha256 MISMATCH")
        extra = f"; {status.detail}" if status.detail and status.detail != status.source else ""
        text = f"{status.source}: {status.path} ({check}{extra})"
        main = name == model
        if status.verified is False:
            report.add(f"weights {name}", "fail", text, main)
        elif status.offline:
            report.add(f"weights {name}", "ok", text)
        else:
            report.add(f"weights {name}", "fail" if main else "warn", status.detail, False)

    # The hub: one quick attempt
    probe = (hub_probe or probe_hub)()
    report.facts["hub"] = {"enabled": hub_enabled(), "reachable": probe.reachable, "detail": probe.detail}
    needs_hub = model in weights and not weights[model].offline
    if probe.reachable:
        report.add("model hub", "ok", probe.detail)
    else:
        report.add("model hub", "fail" if needs_hub else "info",
                   probe.detail + (f" — and {model}'s weights are not available offline" if needs_hub else
                                   " (not needed: the weights are local)"), needs_hub)

    # One tiny real decode in a child process
    if decode and llama_ok and model in weights and weights[model].offline:
        result = (decode_runner or (lambda m, e: run_probe(m, e)))(model, extra_buffers)
        report.facts["decode"] = {"ok": result.ok, "text": result.text, "error": result.error,
                                  "signal": result.signal, "seconds": round(result.seconds, 2),
                                  "info": result.info, "tail": result.tail}
        if result.ok:
            report.add("decode", "ok", f"{model}: {result.text.strip()!r} in {result.seconds:.1f} s (child process)")
        else:
            hint = decision.hint() if decision is not None else ""
            detail = f"{model}: {result.error}" + (f"\nlast lines:\n{result.tail}" if result.tail else "")
            if result.signal is not None and hint:
                detail += f"\nhint: {hint}"
            report.add("decode", "fail", detail, True)
    elif decode:
        why = "llama-cpp-python is not installed" if not llama_ok else f"{model}'s weights are not available offline"
        report.add("decode", "warn", f"skipped: {why}")
    return report


def render(report: DoctorReport) -> Any:
    """A rich table of the report."""
    from rich.table import Table

    colours = {"ok": "green", "warn": "yellow", "fail": "red", "info": "cyan"}
    table = Table(title="grapheval doctor", show_lines=False)
    table.add_column("check")
    table.add_column("status")
    table.add_column("detail", overflow="fold")
    for check in report.checks:
        colour = colours[check.status]
        table.add_row(check.name, f"[{colour}]{check.status}[/{colour}]", check.detail)
    return table
