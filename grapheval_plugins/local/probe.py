"""One tiny real decode in a child process, and what the parent makes of it.

The child (:mod:`grapheval_plugins.local.probe_child`, ``python -m grapheval_plugins.local.probe_child``) loads a
local model exactly as the chat model does (same weights resolution without the hub, same llama.cpp settings,
including the extra-buffer decision), decodes a few tokens greedily, and prints one JSON object on stdout:
``{"ok": true, "text": …, "tokens": …, "seconds": …, "weights": …, "extra_buffers": …}``, or
``{"ok": false, "error": …}`` with exit code 2 for a typed error. Progress lines go to stderr first, so if
llama.cpp crashes the caller's last lines of output say where. ``grapheval doctor`` runs it with
:func:`run_probe`, which turns a crash (a signal) into a result instead of a crash of its own.

:func:`confirm_extra_buffers` is the guard of the opt-in to llama.cpp's extra buffer types: before a process loads
a model with them, the same load and a short decode run in a child, so that a CPU on which that path crashes (the
AMX repack of some llama.cpp builds) gets a :class:`~grapheval_plugins.exceptions.ModelLoadError` saying how to turn
it off, never a crashed process. The verdict is kept per weights file for the life of the process.

Usage::

    python -m grapheval_plugins.local.probe_child --model qwen2.5-coder-0.5b [--extra-buffers 1]
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .cpu import CPUFeatures, ExtraBuffersDecision

__all__ = ["PROBE_CHILD_ENV", "ProbeResult", "confirm_extra_buffers", "probe_command", "run_probe"]

PROBE_CHILD_ENV = "GRAPHEVAL_PROBE_CHILD"
"""Set in a probe child's environment: the child loads as asked, without probing again itself."""


@dataclass(frozen=True)
class ProbeResult:
    """How the child decode went: ``ok``; the decoded ``text`` or the ``error``; ``signal`` when it was killed."""

    ok: bool
    text: str = ""
    error: str = ""
    signal: str | None = None
    returncode: int = 0
    seconds: float = 0.0
    tail: str = ""
    info: dict[str, object] | None = None


def probe_command(model: str, extra_buffers: bool | None = None, *, tokens: int = 4) -> list[str]:
    """The command line of a probe child for ``model``."""
    command = [sys.executable, "-m", "grapheval_plugins.local.probe_child", "--model", model, "--tokens", str(tokens)]
    if extra_buffers is not None:
        command += ["--extra-buffers", "1" if extra_buffers else "0"]
    return command


def run_probe(
    model: str,
    extra_buffers: bool | None = None,
    *,
    timeout: float = 300.0,
    command: Sequence[str] | None = None,
    env: dict[str, str] | None = None,
) -> ProbeResult:
    """Run the probe in a child process; a crash or a timeout becomes a failed :class:`ProbeResult`.

    ``command`` replaces the probe's command line (tests use a child that kills itself).
    """
    argv = list(command) if command is not None else probe_command(model, extra_buffers)
    child_env = {**(os.environ if env is None else env), PROBE_CHILD_ENV: "1"}
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=child_env,
                              stdin=subprocess.DEVNULL, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stderr if isinstance(exc.stderr, str) else (exc.stderr or b"").decode("utf-8", "replace")
        return ProbeResult(False, error=f"the decode did not finish in {timeout:.0f} s (a hang?)",
                           seconds=time.perf_counter() - started, tail=_tail(out), returncode=-9)
    seconds = time.perf_counter() - started
    tail = _tail(done.stderr)
    if done.returncode < 0:
        try:
            name = signal.Signals(-done.returncode).name
        except ValueError:
            name = f"signal {-done.returncode}"
        return ProbeResult(False, error=f"the decode crashed: killed by {name}", signal=name,
                           returncode=done.returncode, seconds=seconds, tail=tail)
    lines = [line for line in done.stdout.splitlines() if line.strip().startswith("{")]
    try:
        data = json.loads(lines[-1]) if lines else {}
    except json.JSONDecodeError:
        data = {}
    if done.returncode == 0 and data.get("ok"):
        return ProbeResult(True, text=str(data.get("text", "")), seconds=seconds, tail=tail, info=data)
    error = str(data.get("error") or f"the probe exited with code {done.returncode}")
    return ProbeResult(False, error=error, returncode=done.returncode, seconds=seconds, tail=tail, info=data or None)


ProbeRunner = Callable[[str, bool], ProbeResult]
"""Runs the probe for ``(model or .gguf path, extra_buffers)``: :func:`run_probe` (tests pass a fake)."""

_CONFIRMED: dict[tuple[str, int, int], ProbeResult] = {}
_CONFIRMED_LOCK = threading.Lock()


def confirm_extra_buffers(
    decision: ExtraBuffersDecision,
    path: str | Path,
    *,
    runner: ProbeRunner | None = None,
    cpu: CPUFeatures | None = None,
) -> ExtraBuffersDecision:
    """Check in a child process that loading ``path`` with extra buffer types decodes, before this process does.

    A decision that leaves extra buffer types off is returned as it is, with no child. Inside a probe child
    (:data:`PROBE_CHILD_ENV` set) nothing is probed again. Otherwise the probe's verdict for this file (path, size,
    modification time) is computed once per process.

    Returns:
        ``decision``, its ``reason`` saying that the probe passed.

    Raises:
        ModelLoadError: the child crashed (its signal named), hung or failed; the message says how to load
            without extra buffer types.
    """
    from ..exceptions import ModelLoadError
    from .cpu import EXTRA_BUFFERS_ENV, cpu_features

    if not decision.enabled or os.environ.get(PROBE_CHILD_ENV):
        return decision
    file = Path(path).expanduser().resolve()
    try:
        stat = file.stat()
    except OSError as exc:
        raise ModelLoadError(f"model file not found: {file}") from exc
    key = (str(file), stat.st_size, stat.st_mtime_ns)
    with _CONFIRMED_LOCK:  # one probe at a time, and at most one per file
        result = _CONFIRMED.get(key)
        if result is None:
            result = (runner or run_probe)(str(file), True)
            _CONFIRMED[key] = result
    if result.ok:
        return dataclasses.replace(decision, reason=f"{decision.reason}; a child process decoded with them")
    features = cpu if cpu is not None else cpu_features()
    why = f"killed by {result.signal}" if result.signal else result.error
    amx = " (this CPU has AMX, whose repack path is known to crash in some llama.cpp builds)" if features.amx else ""
    tail = f"\nlast lines of the child's output:\n{result.tail}" if result.tail else ""
    raise ModelLoadError(
        f"llama.cpp's extra buffer types were asked for ({decision.reason}), but a child process that loaded "
        f"{file.name} with them failed: {why}{amx}. Nothing was loaded in this process. Load without them: "
        f"extra_buffers=False on ChatLocalLlama / LocalJudgeScorer, or unset {EXTRA_BUFFERS_ENV} "
        f"(CPU: {features.summary()}){tail}"
    )


def _forget_confirmations() -> None:
    """Drop the per-process probe verdicts (tests)."""
    with _CONFIRMED_LOCK:
        _CONFIRMED.clear()


def _tail(text: str | None, lines: int = 15) -> str:
    return "\n".join((text or "").splitlines()[-lines:])
