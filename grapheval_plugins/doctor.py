"""``grapheval doctor``: can the main job (``grapheval demo``) run on this machine, and if not, why (the checks:
``docs/troubleshooting.md``). Every probe of :func:`run_doctor` is injectable::

    >>> report = run_doctor(decode=False, verify=False, hub_probe=lambda: HubProbe(False, "skipped in a test"))
    >>> [c.name for c in report.checks][:3]
    ['grapheval-plugins', 'python', 'extras']
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from importlib import metadata
from typing import Any, Literal

from .local.hub import HubProbe, hub_enabled, probe_hub
from .local.weights import KNOWN_MODELS, WeightsStatus, locate_weights

__all__ = ["Check", "DecodeResult", "DoctorReport", "decode_in_child", "installed_extras", "run_doctor"]

Status = Literal["ok", "warn", "fail", "info"]
DEFAULT_MODEL = "qwen2.5-coder-1.5b"
"""The model of the main job (``GraphEval()`` / ``grapheval demo``)."""
LIBRARIES = ("torch", "transformers", "llama-cpp-python", "huggingface-hub", "langchain-core", "deepeval", "ragas")


@dataclass(frozen=True)
class Check:
    """One line of the report; a ``blocking`` failure means the main job cannot run."""

    name: str
    status: Status
    detail: str
    blocking: bool = False


@dataclass
class DoctorReport:
    """The checks, and the facts behind them (:meth:`as_dict` is what ``--json`` prints)."""

    checks: list[Check] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(c.status == "fail" and c.blocking for c in self.checks)

    def add(self, name: str, status: Status, detail: str, blocking: bool = False) -> None:
        self.checks.append(Check(name, status, detail, blocking))

    def as_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "checks": [asdict(c) for c in self.checks], "facts": self.facts}


@dataclass(frozen=True)
class DecodeResult:
    """What the child-process decode gave: ``text`` when ``ok``, else ``error`` (and ``tail``, its last output)."""

    ok: bool
    text: str = ""
    error: str = ""
    seconds: float = 0.0
    tail: str = ""


_DECODE = (
    "import sys, json\n"
    "from grapheval_plugins.local.chat import ChatLocalLlama\n"
    "llm = ChatLocalLlama(model=sys.argv[1], max_tokens=int(sys.argv[2]), hub=False)\n"
    "print(json.dumps({'text': llm.invoke('Reply with one word: OK.').content}))\n"
)


def decode_in_child(model: str, tokens: int = 4, timeout: float = 600.0, command: list[str] | None = None) -> DecodeResult:
    """Load ``model`` and decode ``tokens`` greedy tokens in a child process (a crash there is a result here)."""
    started = time.perf_counter()
    command = command or [sys.executable, "-c", _DECODE, model, str(tokens)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, "PYTHONUNBUFFERED": "1"})
    except subprocess.TimeoutExpired:
        return DecodeResult(False, error=f"no answer within {timeout:.0f} s", seconds=time.perf_counter() - started)
    seconds = time.perf_counter() - started
    tail = "\n".join((done.stderr or "").strip().splitlines()[-8:])
    if done.returncode == 0:
        line = (done.stdout or "").strip().splitlines()[-1:] or ["{}"]
        return DecodeResult(True, text=str(json.loads(line[0]).get("text", "")), seconds=seconds)
    if done.returncode < 0:
        name = signal.Signals(-done.returncode).name if -done.returncode in signal.valid_signals() else "a signal"
        return DecodeResult(False, error=f"the decode crashed: killed by {name}", seconds=seconds, tail=tail)
    last = tail.splitlines()[-1] if tail else f"exit code {done.returncode}"
    return DecodeResult(False, error=last, seconds=seconds, tail=tail)


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def installed_extras(dist: str = "grapheval-plugins") -> dict[str, bool]:
    """For each extra of ``dist``: whether every requirement it adds is installed (nested extras expanded)."""
    from packaging.requirements import Requirement

    try:
        meta = metadata.metadata(dist)
    except metadata.PackageNotFoundError:
        return {}
    requires = [Requirement(text) for text in meta.get_all("Requires-Dist") or []]

    def complete(extra: str, seen: frozenset[str]) -> bool:
        for req in requires:
            if req.marker is None or not req.marker.evaluate({"extra": extra}):
                continue
            if req.name.lower().replace("_", "-") == dist:
                if not all(complete(e, seen | {extra}) for e in req.extras if e not in seen):
                    return False
            elif _version(req.name) is None:
                return False
        return True

    return {extra: complete(extra, frozenset()) for extra in sorted(meta.get_all("Provides-Extra") or [])}


def run_doctor(
    *,
    model: str = DEFAULT_MODEL,
    decode: bool = True,
    verify: bool = True,
    hub_probe: Callable[[], HubProbe] | None = None,
    decode_runner: Callable[[str], DecodeResult] | None = None,
    weights_locator: Callable[[str], WeightsStatus] | None = None,
) -> DoctorReport:
    """Check the machine for the main job with ``model`` (``verify``: hash the weights, a few seconds per GB); the
    probes replace :func:`~grapheval_plugins.local.hub.probe_hub`, :func:`decode_in_child` and
    :func:`~grapheval_plugins.local.weights.locate_weights`."""
    from ._version import __version__

    report = DoctorReport()
    report.add("grapheval-plugins", "info", __version__)
    report.add("python", "info", f"{platform.python_version()} ({sys.executable})")
    extras = installed_extras()
    report.facts["extras"] = extras
    report.add("extras", "info", ", ".join(e for e, ok in extras.items() if ok) or "none (core only)")

    versions = {lib: _version(lib) for lib in LIBRARIES}
    report.facts["versions"] = versions
    report.add("libraries", "info", ", ".join(f"{k} {v or '—'}" for k, v in versions.items()))
    llama_ok = versions["llama-cpp-python"] is not None
    if not llama_ok:
        report.add("llama-cpp-python", "fail",
                   "not installed: the offline default needs it (pip install 'grapheval-plugins[local]')", True)

    report.add("cpu", "info", f"{platform.machine()}, {os.cpu_count()} cores ({platform.processor() or 'unknown'})")

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
        result = (decode_runner or decode_in_child)(model)
        report.facts["decode"] = asdict(result)
        if result.ok:
            report.add("decode", "ok", f"{model}: {result.text.strip()!r} in {result.seconds:.1f} s (child process)")
        else:
            detail = f"{model}: {result.error}" + (f"\nlast lines:\n{result.tail}" if result.tail else "")
            report.add("decode", "fail", detail, True)
    elif decode:
        why = "llama-cpp-python is not installed" if not llama_ok else f"{model}'s weights are not available offline"
        report.add("decode", "warn", f"skipped: {why}")
    return report


def render(report: DoctorReport) -> Any:
    """A rich table of the report."""
    from rich.table import Table

    colours = {"ok": "green", "warn": "yellow", "fail": "red", "info": "cyan"}
    table = Table("check", "status", title="grapheval doctor", show_lines=False)
    table.add_column("detail", overflow="fold")
    for c in report.checks:
        table.add_row(c.name, f"[{colours[c.status]}]{c.status}[/{colours[c.status]}]", c.detail)
    return table
