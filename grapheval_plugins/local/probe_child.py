"""The probe's child process: ``python -m grapheval_plugins.local.probe_child --model <name or .gguf>``.

See :mod:`grapheval_plugins.local.probe` for what it prints and how the parent reads it. It is a module of its own
so that the parent side (which the runtime uses to guard extra buffer types) imports nothing from the runtime.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence

__all__ = ["PROMPT", "main"]

PROMPT = "Reply with one word: OK."


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m grapheval_plugins.local.probe_child``."""
    parser = argparse.ArgumentParser(prog="python -m grapheval_plugins.local.probe_child",
                                     description="One tiny real decode of a local model.")
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
