"""Stopping a degenerate loop (``ChatLocalLlama(loop_repeats=4)``, the default) against decoding to ``max_tokens``.

    .venv/bin/python benchmarks/bench_loop_stop.py replay
    nice -n 10 .venv/bin/python benchmarks/bench_loop_stop.py run --dataset qags_c --rows 16 --seed 0 --threads 1

``replay`` (no generation): every distinct extraction answer of the committed knowledge-graph file of ``--model``
(the dev sets' outputs, prompt A, greedy, 512 tokens) is re-tokenized with the model's own tokenizer and decoded
back token by token, as :class:`~grapheval_plugins.local.chat.ChatLocalLlama` does while generating; the answer
stops at the first token after which :func:`~grapheval_plugins.local.chat.ends_in_loop` holds. Greedy decoding
makes the stopped answer a prefix of the full one, so the replay gives what the stop would have generated. Reported
per data set: answers, how many stop, how many of those parse to the same knowledge graph as the full answer
(:func:`~grapheval_plugins.extract.parser.parse_triples`, the engine's parser), and the answer tokens with and
without the stop. Writes ``benchmarks/results/loop-stop-replay-<model>.json``.

``run``: ``--rows`` rows of a set drawn with ``random.Random(seed)``; each output's extraction
(:class:`~grapheval_plugins.extract.TripleExtractor`, no cache) is generated with the stop and without it, in
alternating order, on one loaded model; before each call the KV cache is cut back to prompt A's fixed prefix (and
no saved prompt is restored), so both sides evaluate the output's part of the prompt alike: llama.cpp's CPU kernels
give slightly different logits for a token evaluated in another batch, which would otherwise flip near-ties.
Reported: seconds a row, answer characters, whether the answer ends in a loop (with the stop: it stopped there;
without: it ran into one and on to ``max_tokens``), and whether each row's parsed graph is the same both ways.
Writes ``benchmarks/results/loop-stop-run-<model>-<set>-<rows>.json``.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from datetime import date
from pathlib import Path
from typing import Annotated, Any

import typer

os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import harness as bench  # noqa: E402

from grapheval_plugins.extract.parser import parse_triples  # noqa: E402
from grapheval_plugins.inputs import normalize_output  # noqa: E402
from grapheval_plugins.local.chat import ends_in_loop  # noqa: E402

RESULTS = HERE / "results"
SETS = ("summeval", "qags_c", "qags_x")
REPEATS = 4
app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def _graph(text: str) -> list[list[str]]:
    return [t.as_list() for t in parse_triples(text).triples]


def stop_at(tokens: list[int], detokenize: Any, repeats: int = REPEATS) -> int:
    """How many of ``tokens`` a loop stop keeps: the first ``n`` after which the decoded text ends in a loop
    (``len(tokens)`` when it never does).

    >>> stop_at(list(b"ab-xyzwvuts" * 5), lambda ts: bytes(ts))  # an 11-byte stretch, its fourth time ends at 44
    44
    """
    for n in range(1, len(tokens) + 1):
        text = detokenize(tokens[:n])
        if isinstance(text, bytes):
            text = text.decode("utf-8", errors="ignore")
        if ends_in_loop(text, repeats):
            return n
    return len(tokens)


def _tokenizer(model: str) -> Any:
    from llama_cpp import Llama

    from grapheval_plugins.local.weights import resolve_model_path

    return Llama(model_path=str(resolve_model_path(model)), vocab_only=True, verbose=False)


@app.command()
def replay(
    model: Annotated[str, typer.Option(help="Local model whose committed KG file is replayed.")] = "qwen2.5-coder-1.5b",
    repeats: Annotated[int, typer.Option(help="ChatLocalLlama's loop_repeats.")] = REPEATS,
) -> None:
    """The stop replayed on every committed extraction answer (no generation)."""
    vocab = _tokenizer(model)
    by_text: dict[str, str] = {}
    for name in SETS:
        for row in bench.load_dataset(name):
            by_text.setdefault(normalize_output(row["output"]), name)
    seen: set[str] = set()
    per_set: dict[str, dict[str, int]] = {}
    examples: list[dict[str, Any]] = []
    for entry in bench.read_jsonl(RESULTS / f"kg-local-{model}.jsonl"):
        answer = entry.get("raw_text") or ""
        if not answer or answer in seen:
            continue
        seen.add(answer)
        stats = per_set.setdefault(by_text.get(entry["text"], "other"), dict.fromkeys(
            ("answers", "stopped", "same_graph", "tokens_full", "tokens_stopped"), 0))
        tokens = vocab.tokenize(answer.encode("utf-8"), add_bos=False, special=False)
        kept = stop_at(tokens, vocab.detokenize, repeats)
        stats["answers"] += 1
        stats["tokens_full"] += len(tokens)
        stats["tokens_stopped"] += kept
        if kept < len(tokens):
            stopped = vocab.detokenize(tokens[:kept]).decode("utf-8", errors="ignore")
            stats["stopped"] += 1
            same = _graph(stopped) == _graph(answer)
            stats["same_graph"] += same
            if not same or len(examples) < 3:
                examples.append({"text": entry["text"][:120], "tokens": len(tokens), "kept": kept, "same": same,
                                 "stopped_tail": stopped[-160:]})
    total = {k: sum(s[k] for s in per_set.values()) for k in next(iter(per_set.values()))}
    typer.echo(f"model {model}, loop_repeats {repeats}, distinct answers of kg-local-{model}.jsonl\n")
    typer.echo("| set | answers | stopped | same graph | answer tokens | with the stop | fewer by |")
    typer.echo("|---|---|---|---|---|---|---|")
    for name, s in [*sorted(per_set.items()), ("all", total)]:
        typer.echo(f"| {name} | {s['answers']} | {s['stopped']} | {s['same_graph']} of {s['stopped']} "
                   f"| {s['tokens_full']:,} | {s['tokens_stopped']:,} | {s['tokens_full'] / s['tokens_stopped']:.2f}× |")
    out = RESULTS / f"loop-stop-replay-{model}.json"
    out.write_text(json.dumps({"date": date.today().isoformat(), "model": model, "repeats": repeats,
                               "per_set": per_set, "all": total, "examples": examples}, indent=1) + "\n")
    typer.echo(f"\n-> {out}")


@app.command()
def run(
    dataset: Annotated[str, typer.Option(help="summeval, qags_c or qags_x.")] = "qags_c",
    rows: Annotated[int, typer.Option(help="Rows drawn at random (seeded).")] = 16,
    seed: Annotated[int, typer.Option(help="random.Random seed of the draw.")] = 0,
    model: Annotated[str, typer.Option(help="Local chat model.")] = "qwen2.5-coder-1.5b",
    threads: Annotated[int, typer.Option(help="llama.cpp threads.")] = 1,
) -> None:
    """Extraction with the loop stop and without it, side by side on the same rows and model."""
    from grapheval_plugins.extract import TripleExtractor
    from grapheval_plugins.local.chat import ChatLocalLlama

    sample = bench.sample_rows(dataset, rows, seed)
    from grapheval_plugins.extract.prompts import KG_PROMPT
    from grapheval_plugins.local.runtime import _common_prefix

    stopping = ChatLocalLlama(model=model, n_threads=threads)
    plain = ChatLocalLlama.from_session(stopping.session, model=model, n_threads=threads, loop_repeats=None)
    sides = {"stop": TripleExtractor(stopping), "no stop": TripleExtractor(plain)}
    session = stopping.session
    session.load()
    session.prefix_slots = 0  # no saved prompt of the other side to return to: each side evaluates the same way
    # prompt A's fixed prefix: what the prompts of any two outputs share
    prefix = stopping.prompt_tokens(KG_PROMPT.messages("Alpha."))
    prefix = prefix[: _common_prefix(prefix, stopping.prompt_tokens(KG_PROMPT.messages("Beta.")))]
    records: list[dict[str, Any]] = []
    for i, row in enumerate(sample):
        order = list(sides) if i % 2 == 0 else list(reversed(sides))
        got: dict[str, Any] = {}
        for side in order:
            session.prefill(prefix)  # both sides start from the same KV cache: the fixed prefix, nothing after it
            started = time.perf_counter()
            extraction = sides[side].extract(normalize_output(row["output"]))
            seconds = time.perf_counter() - started
            got[side] = {"seconds": round(seconds, 3), "graph": [t.as_list() for t in extraction.triples],
                         "answer_chars": len(extraction.raw_text or ""),
                         "ends_in_loop": ends_in_loop(extraction.raw_text or "", REPEATS)}
        same = got["stop"]["graph"] == got["no stop"]["graph"]
        records.append({"id": row["id"], "same_graph": same, **{k: {kk: vv for kk, vv in v.items() if kk != "graph"}
                                                                   for k, v in got.items()}})
        typer.echo(f"{row['id']}: stop {got['stop']['seconds']:.1f} s ({got['stop']['answer_chars']} chars"
                   f"{', stopped' if got['stop']['ends_in_loop'] else ''}), no stop {got['no stop']['seconds']:.1f} s "
                   f"({got['no stop']['answer_chars']} chars), same graph {same}", err=True)
    mean = {side: sum(r[side]["seconds"] for r in records) / len(records) for side in sides}
    summary = {"rows": len(records), "seconds_stop": round(mean["stop"], 2), "seconds_no_stop": round(mean["no stop"], 2),
               "speed": round(mean["no stop"] / mean["stop"], 2), "stopped": sum(r["stop"]["ends_in_loop"] for r in records),
               "same_graph": sum(r["same_graph"] for r in records)}
    out = RESULTS / f"loop-stop-run-{model}-{dataset}-{rows}.json"
    out.write_text(json.dumps({
        "date": date.today().isoformat(), "cpu": bench.cpu_model(), "python": platform.python_version(),
        "command": " ".join(["benchmarks/bench_loop_stop.py", *sys.argv[1:]]), "threads": threads,
        "load_average": list(os.getloadavg()), "summary": summary, "rows": records}, indent=1) + "\n")
    typer.echo(json.dumps(summary))
    typer.echo(f"-> {out}")


if __name__ == "__main__":
    app()
