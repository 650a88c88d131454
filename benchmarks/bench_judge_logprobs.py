"""The chat judge's score with token log-probabilities and without, on the same rows and the same model.

An OpenAI-compatible server (llama-cpp-python's own, ``llama_cpp.server``, its ``server`` extra) serves the 1.5B
GGUF on 127.0.0.1; :class:`~grapheval_plugins.check.llm_judge.ChatLabelLogits` reaches it through
``langchain_openai.ChatOpenAI(base_url=...)`` as a user would, asking for log-probabilities automatically::

    .venv/bin/python benchmarks/bench_judge_logprobs.py serve --port 8765 &    # llama_cpp.server, see below
    nice .venv/bin/python benchmarks/bench_judge_logprobs.py run --port 8765     # resumable: rows done are kept
    .venv/bin/python benchmarks/bench_judge_logprobs.py report

``serve`` runs ``python -m llama_cpp.server --model <the 1.5B GGUF> --n_ctx 4096 --logits_all true --host 127.0.0.1
--port 8765`` (the GGUF from :func:`~grapheval_plugins.local.weights.resolve_model_path`), with llama.cpp's extra
buffer types off as :mod:`grapheval_plugins.local` loads it (their AMX weight-repack path crashes on some CPUs,
this machine's among them: a general protection fault in ``libggml-cpu`` on the first request otherwise).

Rows: 50, stratified by label (:func:`harness.stratified_sample`, seed 0): 17 from QAGS-C, 17 from QAGS-X, 16 from
SummEval, judged in an order that interleaves the sets and labels. Claims: the output's sentences (at most ``--max-claims``, the rest joined into the last), judged in one
call per row (the judge's prompt: the context once, the numbered claims; one retry for claims left without a
verdict, as :class:`~grapheval_plugins.check.judge.JudgeScorer` does). Every answer is read twice:

* ``logprobs``: P(supported) from the label tokens' log-probabilities (what an OpenAI-compatible provider gives);
* ``stated``: the same answer without its log-probabilities, as a provider without them returns it: the
  probability the model wrote after each label (the verdict's fixed value where it wrote none);
* ``verdict``: the verdict's fixed value alone (the judge before stated probabilities), for reference.

At temperature 0 a provider without log-probabilities returns the same text, so one call per row serves all three.
A row's score is its largest P(unsupported) over its claims (the paper's rule); ROC AUC against the label
(1 = hallucination). Per-row JSONL: ``benchmarks/results/judge-logprobs/rows.jsonl``; ``report`` writes
``summary.json`` beside it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import platform
import re
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import cpu_model, load_dataset, stratified_sample  # noqa: E402

from grapheval_plugins._async import run_sync  # noqa: E402
from grapheval_plugins.check.judge import JUDGE_LABELS, LabelReading, p_supported  # noqa: E402
from grapheval_plugins.check.llm_judge import CHAT_JUDGE_PROMPT, ChatLabelLogits  # noqa: E402

OUT = Path(__file__).resolve().parent / "results" / "judge-logprobs"
SETS = (("qags_c", 17), ("qags_x", 17), ("summeval", 16))
MODEL = "qwen2.5-coder-1.5b"
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=\S)")


def rows_to_judge(seed: int) -> list[dict[str, Any]]:
    """The rows, interleaved across sets and labels, so that a run stopped early still holds a balanced share."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for name, n in SETS:
        for row in stratified_sample(load_dataset(name), n, seed=seed):
            groups.setdefault((name, int(row["label"])), []).append({**row, "set": name})
    rows: list[dict[str, Any]] = []
    for i in range(max(len(g) for g in groups.values())):
        rows += [g[i] for g in groups.values() if i < len(g)]
    return rows


def claims_of(output: str, max_claims: int) -> list[str]:
    sentences = [s.strip() for s in _SENTENCE.split(output.strip()) if s.strip()] or [output.strip()]
    if len(sentences) > max_claims:
        sentences = sentences[: max_claims - 1] + [" ".join(sentences[max_claims - 1:])]
    return sentences


def _p_unsupported(reading: LabelReading) -> float | None:
    try:
        return 1.0 - p_supported(reading, JUDGE_LABELS)
    except ValueError:
        return None


def judge_row(backend: ChatLabelLogits, row: dict[str, Any], max_claims: int) -> dict[str, Any]:
    from langchain_core.messages import AIMessage

    claims = claims_of(row["output"], max_claims)
    readings: list[LabelReading | None] = [None] * len(claims)
    calls: list[dict[str, Any]] = []
    todo = list(range(len(claims)))
    for _ in range(2):  # one call, then one retry for the claims left without a verdict
        if not todo:
            break
        asked = [claims[i] for i in todo]
        started = time.perf_counter()
        message = run_sync(backend._aask(CHAT_JUDGE_PROMPT.messages(row["context"], asked, JUDGE_LABELS)))
        seconds = time.perf_counter() - started
        with_lp = ChatLabelLogits.read(message, len(asked), JUDGE_LABELS)
        without = ChatLabelLogits.read(AIMessage(content=message.content), len(asked), JUDGE_LABELS)
        usage = getattr(message, "usage_metadata", None) or {}
        calls.append({"seconds": round(seconds, 3), "answer": message.content,
                      "input_tokens": usage.get("input_tokens"), "output_tokens": usage.get("output_tokens"),
                      "logprobs_returned": backend.logprobs_returned})
        left = []
        for i, a, b in zip(todo, with_lp, without):
            if a.error is not None:
                left.append(i)
                continue
            readings[i] = LabelReading(logprobs=a.logprobs, verdict=a.verdict, stated=b.stated, notes=a.notes)
        todo = left
    per_claim = []
    for claim, reading in zip(claims, readings):
        if reading is None:
            per_claim.append({"claim": claim, "error": "no verdict after one retry"})
            continue
        per_claim.append({
            "claim": claim, "verdict": reading.verdict, "stated": reading.stated,
            "logprobs": _p_unsupported(LabelReading(logprobs=reading.logprobs, verdict=reading.verdict)),
            "stated_p": _p_unsupported(LabelReading(verdict=reading.verdict, stated=reading.stated)),
            "verdict_p": _p_unsupported(LabelReading(verdict=reading.verdict)),
            "notes": list(reading.notes),
        })
    scores: dict[str, float | None] = {}
    for arm in ("logprobs", "stated_p", "verdict_p"):
        values = [c[arm] for c in per_claim if c.get(arm) is not None]
        scores[arm] = max(values) if values else None
    return {"id": row["id"], "set": row["set"], "label": row["label"], "claims": per_claim, "calls": calls,
            "score_logprobs": scores["logprobs"], "score_stated": scores["stated_p"],
            "score_verdict": scores["verdict_p"]}


def run(args: argparse.Namespace) -> None:
    from langchain_openai import ChatOpenAI

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    done = {json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines() if line.strip()} \
        if out.exists() else set()
    llm = ChatOpenAI(base_url=f"http://127.0.0.1:{args.port}/v1", api_key="none", model=MODEL, temperature=0,
                     max_tokens=96, timeout=600, max_retries=1)
    backend = ChatLabelLogits(llm)  # request_logprobs="auto": asked for, and detected from the answer
    rows = [r for r in rows_to_judge(args.seed) if r["id"] not in done]
    print(f"{len(done)} rows done, {len(rows)} to go", flush=True)
    for row in rows:
        record = judge_row(backend, row, args.max_claims)
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
        print(row["id"], record["label"], record["score_logprobs"], record["score_stated"], flush=True)


def sample(args: argparse.Namespace) -> None:
    """Ask each committed row's claims ``--samples`` more times at temperature 1.0, without log-probabilities (what
    :class:`~grapheval_plugins.check.llm_judge.ChatLabelLogits` adds where a provider returns none); resumable."""
    from langchain_openai import ChatOpenAI

    committed = [json.loads(line) for line in Path(args.out).read_text(encoding="utf-8").splitlines() if line.strip()]
    out = Path(args.samples_out)
    done = {json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines() if line.strip()} \
        if out.exists() else set()
    llm = ChatOpenAI(base_url=f"http://127.0.0.1:{args.port}/v1", api_key="none", model=MODEL, temperature=1.0,
                     max_tokens=96, timeout=600, max_retries=1)
    todo = [r for r in committed if r["id"] not in done]
    print(f"{len(done)} rows done, {len(todo)} to go", flush=True)
    by_id = {r["id"]: r for r in rows_to_judge(args.seed)}
    for row in todo:
        claims = [c["claim"] for c in row["claims"]]
        messages = CHAT_JUDGE_PROMPT.messages(by_id[row["id"]]["context"], claims, JUDGE_LABELS)
        answers = []
        for _ in range(args.samples):
            started = time.perf_counter()
            message = llm.invoke(messages)  # no logprobs asked for
            readings = ChatLabelLogits.read(message, len(claims), JUDGE_LABELS)
            answers.append({"seconds": round(time.perf_counter() - started, 3), "answer": message.content,
                            "claims": [None if r.error else {"verdict": r.verdict, "stated": r.stated}
                                       for r in readings]})
        with out.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"id": row["id"], "label": row["label"], "samples": answers}, ensure_ascii=False)
                     + "\n")
        print(row["id"], row["label"], [a["answer"].replace("\n", " | ") for a in answers[:2]], flush=True)


def _mean_p_unsupported(readings: list[dict[str, Any] | None]) -> float | None:
    values = [_p_unsupported(LabelReading(verdict=r["verdict"], stated=r["stated"])) for r in readings if r]
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def sampled_scores(row: dict[str, Any], sampled: dict[str, Any], k: int, with_first: bool,
                   chosen: Sequence[int] | None = None) -> float | None:
    """A row's score from ``k`` answers: the committed temperature-0 answer and ``k - 1`` sampled ones
    (``with_first``), or ``k`` sampled ones (the first ones, or those at the indices ``chosen``); a claim's
    P(unsupported) is the mean over its answers."""
    per_claim = []
    for index, claim in enumerate(row["claims"]):
        first = None if "error" in claim else {"verdict": claim["verdict"], "stated": claim["stated"]}
        answers = [a["claims"][index] for a in sampled["samples"]]
        if chosen is not None:
            answers = [answers[i] for i in chosen]
        readings = ([first] + answers[: k - 1]) if with_first else answers[:k]
        p = _mean_p_unsupported(readings)
        if p is not None:
            per_claim.append(p)
    return max(per_claim) if per_claim else None


def roc_auc(labels: list[int], scores: list[float]) -> float:
    """ROC AUC as the Mann-Whitney statistic (ties count one half)."""
    pos = [s for y, s in zip(labels, scores) if y == 1]
    neg = [s for y, s in zip(labels, scores) if y == 0]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def balanced_accuracy(labels: list[int], scores: list[float], threshold: float = 0.5) -> float:
    tp = sum(1 for y, s in zip(labels, scores) if y == 1 and s > threshold)
    tn = sum(1 for y, s in zip(labels, scores) if y == 0 and s <= threshold)
    return 0.5 * (tp / max(1, labels.count(1)) + tn / max(1, labels.count(0)))


def report(args: argparse.Namespace) -> None:
    rows = [json.loads(line) for line in Path(args.out).read_text(encoding="utf-8").splitlines() if line.strip()]
    arms = {"logprobs": "score_logprobs", "stated": "score_stated", "verdict": "score_verdict"}
    for r in rows:  # the stated and verdict arms again from each claim's answer, under the reading rules in force
        claims = [c for c in r["claims"] if "error" not in c]
        stated = [_p_unsupported(LabelReading(verdict=c["verdict"], stated=c["stated"])) for c in claims]
        r["score_stated"] = max((v for v in stated if v is not None), default=None)
    usable = [r for r in rows if all(r[key] is not None for key in arms.values())]
    labels = [int(r["label"]) for r in usable]
    summary: dict[str, Any] = {
        "command": "benchmarks/bench_judge_logprobs.py run --port 8765 (llama_cpp.server --n_ctx 4096 --logits_all true)",
        "model": f"{MODEL} (Q4_K_M GGUF) via llama_cpp.server, langchain_openai.ChatOpenAI",
        "machine": f"{platform.machine()}, {cpu_model()}", "rows": len(rows), "rows_scored": len(usable),
        "claims": sum(len(r["claims"]) for r in usable),
        "claims_without_verdict": sum(1 for r in usable for c in r["claims"] if "error" in c),
        "claims_without_stated_probability": sum(1 for r in usable for c in r["claims"]
                                                  if "error" not in c and c["stated"] is None),
        "calls": sum(len(r["calls"]) for r in rows),
        "logprobs_returned": sorted({str(c["logprobs_returned"]) for r in rows for c in r["calls"]}),
        "mean_seconds_per_row": round(sum(c["seconds"] for r in rows for c in r["calls"]) / max(1, len(rows)), 2),
        "arms": {},
    }
    for arm, key in arms.items():
        scores = [float(r[key]) for r in usable]
        summary["arms"][arm] = {
            "roc_auc": round(roc_auc(labels, scores), 4) if 0 < sum(labels) < len(labels) else math.nan,
            "balanced_accuracy_at_0.5": round(balanced_accuracy(labels, scores), 4),
            "distinct_scores": len({round(s, 6) for s in scores}),
        }
    samples_path = Path(args.samples_out)
    if samples_path.exists():
        sampled = {json.loads(line)["id"]: json.loads(line)
                   for line in samples_path.read_text(encoding="utf-8").splitlines() if line.strip()}
        both = [r for r in usable if r["id"] in sampled]
        n_samples = min((len(sampled[r["id"]]["samples"]) for r in both), default=0)
        base = [int(r["label"]) for r in both]
        summary["sampled"] = {"rows": len(both), "samples_per_row": n_samples,
                              "logprobs_roc_auc_on_these_rows": round(roc_auc(base, [float(r["score_logprobs"])
                                                                                   for r in both]), 4),
                              "first_plus_sampled": {}, "sampled_only": {}}
        for with_first, key in ((True, "first_plus_sampled"), (False, "sampled_only")):
            for k in range(1, n_samples + (2 if with_first else 1)):
                scores = [sampled_scores(r, sampled[r["id"]], k, with_first) for r in both]
                kept = [(y, s) for y, s in zip(base, scores) if s is not None]
                ys, ss = [y for y, _ in kept], [s for _, s in kept]
                # the same k over every choice of the sampled answers: less noise than the first ones alone
                drawn = k - 1 if with_first else k
                aucs = [roc_auc(base, [sampled_scores(r, sampled[r["id"]], k, with_first, chosen) or 0.0
                                       for r in both])
                        for chosen in itertools.combinations(range(n_samples), drawn)]
                summary["sampled"][key][str(k)] = {
                    "rows_scored": len(kept), "roc_auc": round(roc_auc(ys, ss), 4),
                    "balanced_accuracy_at_0.5": round(balanced_accuracy(ys, ss), 4),
                    "distinct_scores": len({round(s, 6) for s in ss}),
                    "roc_auc_mean_over_choices": round(sum(aucs) / len(aucs), 4), "choices": len(aucs),
                }
    text = json.dumps(summary, indent=2)
    (Path(args.out).parent / "summary.json").write_text(text + "\n", encoding="utf-8")
    print(text)


def serve(args: argparse.Namespace) -> None:
    import llama_cpp
    from llama_cpp.server.__main__ import main as server_main

    from grapheval_plugins.local.runtime import llama_without_extra_buffers
    from grapheval_plugins.local.weights import resolve_model_path

    llama_cpp.Llama = llama_without_extra_buffers(llama_cpp.Llama)  # the server creates its model through it
    sys.argv = ["llama_cpp.server", "--model", str(resolve_model_path(MODEL)), "--model_alias", MODEL,
                "--n_ctx", "4096", "--logits_all", "true", "--n_threads", str(args.threads),
                "--host", "127.0.0.1", "--port", str(args.port)]
    server_main()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    sub = parser.add_subparsers(dest="command", required=True)
    one = sub.add_parser("run")
    one.add_argument("--port", type=int, default=8765)
    one.add_argument("--seed", type=int, default=0)
    one.add_argument("--max-claims", type=int, default=4)
    one.add_argument("--out", default=str(OUT / "rows.jsonl"))
    two = sub.add_parser("report")
    two.add_argument("--out", default=str(OUT / "rows.jsonl"))
    two.add_argument("--samples-out", default=str(OUT / "samples.jsonl"))
    four = sub.add_parser("sample")
    four.add_argument("--port", type=int, default=8765)
    four.add_argument("--seed", type=int, default=0)
    four.add_argument("--samples", type=int, default=6)
    four.add_argument("--out", default=str(OUT / "rows.jsonl"))
    four.add_argument("--samples-out", default=str(OUT / "samples.jsonl"))
    three = sub.add_parser("serve")
    three.add_argument("--port", type=int, default=8765)
    three.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    {"run": run, "report": report, "serve": serve, "sample": sample}[args.command](args)


if __name__ == "__main__":
    main()
