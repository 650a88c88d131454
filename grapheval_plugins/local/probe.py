"""One tiny real decode, meant to run in a child process: ``python -m grapheval_plugins.local.probe``.

Loads a local model exactly as the chat model does (same weights resolution without the hub, same llama.cpp
settings, including the extra-buffer decision), decodes a few tokens greedily, and prints one JSON object on
stdout: ``{"ok": true, "text": …, "tokens": …, "seconds": …, "weights": …, "extra_buffers": …}``, or
``{"ok": false, "error": …}`` with exit code 2 for a typed error. Progress lines go to stderr first, so if
llama.cpp crashes the caller's last lines of output say where. ``grapheval doctor`` runs it with
:func:`run_probe`, which turns a crash (a signal) into a result instead of a crash of its own.

Usage::

    python -m grapheval_plugins.local.probe --model qwen2.5-coder-0.5b [--extra-buffers 1]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ProbeResult", "main", "probe_command", "run_probe"]

PROMPT = "Reply with one word: OK."


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
    command = [sys.executable, "-m", "grapheval_plugins.local.probe", "--model", model, "--tokens", str(tokens)]
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
    started = time.perf_counter()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
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


def _tail(text: str | None, lines: int = 15) -> str:
    return "\n".join((text or "").splitlines()[-lines:])


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m grapheval_plugins.local.probe``."""
    parser = argparse.ArgumentParser(prog="python -m grapheval_plugins.local.probe", description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b", help="a known model name or a .gguf path")
    parser.add_argument("--extra-buffers", choices=("0", "1"), default=None,
                        help="llama.cpp extra buffer types (default: GRAPHEVAL_LLAMA_EXTRA_BUFFERS, else off)")
    parser.add_argument("--tokens", type=int, default=4, help="tokens to decode")
    parser.add_argument("--n-ctx", type=int, default=512)
    args = parser.parse_args(argv)
    from ..exceptions import GraphEvalError
    from .chatml import chatml_segments, tokenize_segments
    from .runtime import LlamaSession
    from .weights import resolve_model

    extra = None if args.extra_buffers is None else args.extra_buffers == "1"
    try:
        _say(f"probe: resolving {args.model} (no hub)")
        weights = resolve_model(args.model, hub=False, show_progress=False)
        session = LlamaSession(lambda: weights, n_ctx=args.n_ctx, extra_buffers=extra)
        _say(f"probe: loading {weights.path} (pid {os.getpid()})")
        started = time.perf_counter()
        session.load()
        assert session.decision is not None
        _say(f"probe: loaded in {time.perf_counter() - started:.1f} s; extra buffers "
             f"{'on' if session.decision.enabled else 'off'} ({session.decision.reason}); decoding")
        with session.lock:
            prompt = tokenize_segments(chatml_segments([("user", PROMPT)]),
                                       lambda text, special: session.tokenize(text, special=special))
            started = time.perf_counter()
            generated = list(session.generate(prompt, max_tokens=args.tokens))
            seconds = time.perf_counter() - started
        text = session.detokenize(generated).decode("utf-8", errors="replace")
    except GraphEvalError as exc:
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}), flush=True)
        return 2
    _say("probe: done")
    print(json.dumps({
        "ok": True, "text": text, "tokens": len(generated), "prompt_tokens": len(prompt),
        "seconds": round(seconds, 3), "weights": session.describe_weights(),
        "extra_buffers": session.decision.enabled, "extra_buffers_reason": session.decision.reason,
    }), flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover - run as a child process
    sys.exit(main())
