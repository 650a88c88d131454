"""Side by side with the peers on the same local model: Ragas ``Faithfulness`` and DeepEval ``FaithfulnessMetric``
with the local 1.5B chat model as their LLM, on the lab subset, beside GraphEval's default and raw.

Commands (run from the repository root):

    # score the first K lab ids of each set with both tools (resumable: rows already in a per-row file are skipped);
    # one process, one model, one llama.cpp thread; the rows are walked id by id, both tools on each before the next
    DEEPEVAL_TELEMETRY_OPT_OUT=YES RAGAS_DO_NOT_TRACK=true HF_HUB_OFFLINE=1 \\
        nice -n 10 .venv/bin/python benchmarks/peers.py run -k 5 --threads 1
    # the table (no model: the per-row files of both peers and the committed GraphEval per-row files)
    .venv/bin/python benchmarks/peers.py table -k 5

Per-row files: ``benchmarks/results/peers-<tool>-<llm>.jsonl`` (id, set, label, score, error, error_kind, seconds,
llm_calls, ...). A row whose tool raised or returned NaN is written with ``score: null`` and its error: a failure is
a result, and a re-run does not redo it.

How each tool is driven:

* Ragas 0.4.3: the legacy ``ragas.metrics.Faithfulness`` (the one ``ragas.evaluate`` accepts) with
  ``LangchainLLMWrapper(chat, bypass_temperature=True)`` (greedy decoding, as GraphEval's runs; Ragas would set
  temperature 0.01), ``single_turn_ascore`` on ``SingleTurnSample(user_input=INPUT, response=output,
  retrieved_contexts=[context])``. Score 1 = faithful; NaN when no statement came out; parser exceptions raise.
* DeepEval 4.3.1: ``FaithfulnessMetric(model=<thin DeepEvalBaseLLM over the chat model>, async_mode=False,
  include_reason=False)`` (the reason costs a call and does not change the score), default threshold 0.5,
  ``measure(LLMTestCase(input=INPUT, actual_output=output, retrieval_context=[context]))``. The wrapper's
  ``generate(prompt)`` takes no ``schema``, so DeepEval parses the text as JSON (its path for custom models).

P(hallucination) = 1 − score; every method decides "hallucinated" iff P > 0.5 (Ragas: score < 0.5; DeepEval: score
below its default threshold 0.5, i.e. ``not metric.success``).
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the harness beside this script
import harness as bench  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
LLM = "local:qwen2.5-coder-1.5b"
SCORER = "judge:local:qwen2.5-coder-1.5b"
TOOLS = ("ragas", "deepeval")
SETS = ("summeval", "qags_c", "qags_x")
INPUT = "Summarize the article."
"""The question both peers require (the rows are summaries of the context, with no question of their own)."""
THRESHOLD = 0.5

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__)


def result_path(tool: str, llm: str = LLM) -> Path:
    return RESULTS / f"peers-{tool}-{bench.slug(llm)}.jsonl"


# ------------------------------------------------------------------------------------------------ the models
def counting_chat_model(llm: str, threads: Optional[int], n_ctx: int, max_tokens: int) -> Any:
    """The local chat model (``grapheval_plugins.local.chat.ChatLocalLlama``), counting its calls, generated tokens and
    answers cut at ``max_tokens`` in ``model.counts``."""
    from grapheval_plugins.local.chat import ChatLocalLlama

    class CountingChatLocalLlama(ChatLocalLlama):
        counts: dict[str, int] = {}
        last_answer: str = ""

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            result = super()._generate(messages, stop, run_manager, **kwargs)
            message = result.generations[0].message
            self.counts["calls"] = self.counts.get("calls", 0) + 1
            self.counts["output_tokens"] = (self.counts.get("output_tokens", 0)
                                            + message.usage_metadata["output_tokens"])
            self.last_answer = str(message.content)
            if message.response_metadata.get("finish_reason") == "length":
                self.counts["cut_at_max_tokens"] = self.counts.get("cut_at_max_tokens", 0) + 1
            return result

    return CountingChatLocalLlama(model=llm, n_threads=threads, n_ctx=n_ctx, max_tokens=max_tokens, hub=False,
                                  counts={})


def deepeval_llm(chat: Any) -> Any:
    """A thin ``DeepEvalBaseLLM`` over a LangChain chat model (DeepEval ships none): text in, text out."""
    from deepeval.models import DeepEvalBaseLLM

    class LangChainDeepEvalLLM(DeepEvalBaseLLM):
        def __init__(self, chat_model: Any) -> None:
            self.chat = chat_model
            super().__init__(model=chat_model.model_label)

        def load_model(self, *args: Any, **kwargs: Any) -> Any:
            return self.chat

        def generate(self, prompt: str) -> str:
            return str(self.chat.invoke(prompt).content)

        async def a_generate(self, prompt: str) -> str:
            return str((await self.chat.ainvoke(prompt)).content)

        def get_model_name(self) -> str:
            return str(self.chat.model_label)

    return LangChainDeepEvalLLM(chat)


def error_kind(exc: BaseException) -> str:
    """``parse`` (the tool could not read the model's answer), ``context`` (prompt longer than the window), ``other``."""
    from grapheval_plugins.local.runtime import ContextOverflowError

    name = type(exc).__name__
    text = str(exc)
    if isinstance(exc, ContextOverflowError):
        return "context"
    if ("OutputParser" in name or "invalid JSON" in text or isinstance(exc, (json.JSONDecodeError, KeyError))
            or name == "ValidationError"):
        return "parse"
    return "other"


def score_ragas(chat: Any, row: dict[str, Any]) -> tuple[Optional[float], dict[str, Any]]:
    import asyncio

    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import Faithfulness
    from ragas.run_config import RunConfig

    metric = Faithfulness(llm=LangchainLLMWrapper(chat, bypass_temperature=True))
    metric.init(RunConfig())
    sample = SingleTurnSample(user_input=INPUT, response=row["output"], retrieved_contexts=[row["context"]])
    score = asyncio.run(metric.single_turn_ascore(sample))
    return float(score), {}


def score_deepeval(chat: Any, row: dict[str, Any]) -> tuple[Optional[float], dict[str, Any]]:
    from deepeval.metrics import FaithfulnessMetric
    from deepeval.test_case import LLMTestCase

    metric = FaithfulnessMetric(model=deepeval_llm(chat), async_mode=False, include_reason=False)
    case = LLMTestCase(input=INPUT, actual_output=row["output"], retrieval_context=[row["context"]])
    score = metric.measure(case, _show_indicator=False)
    claims = list(getattr(metric, "claims", []) or [])
    verdicts = [v for v in (getattr(metric, "verdicts", []) or []) if v is not None]
    return float(score), {"threshold": metric.threshold, "success": bool(metric.success),
                          "truths": len(getattr(metric, "truths", []) or []), "claims": len(claims),
                          "verdicts": len(verdicts)}


SCORERS = {"ragas": score_ragas, "deepeval": score_deepeval}


def score_row(tool: str, chat: Any, row: dict[str, Any], dataset: str) -> dict[str, Any]:
    """One tool on one row: the per-row result (a failure is recorded, not raised)."""
    chat.counts.clear()
    chat.last_answer = ""
    started = time.perf_counter()
    score: Optional[float] = None
    extra: dict[str, Any] = {}
    error: Optional[str] = None
    kind: Optional[str] = None
    try:
        score, extra = SCORERS[tool](chat, row)
        if score is None or math.isnan(score):
            score, error, kind = None, "the tool returned NaN (no statement / claim to judge)", "nan"
    except Exception as exc:  # noqa: BLE001 - every failure of the tool is a result to count
        error, kind = f"{type(exc).__name__}: {str(exc)[:300]}", error_kind(exc)
        extra = {"last_answer": chat.last_answer[:8000]}  # the last answer: what the tool could not read
    return {"id": row["id"], "set": dataset, "label": row["label"], "score": score, "error": error,
            "error_kind": kind, "seconds": round(time.perf_counter() - started, 3),
            "llm_calls": chat.counts.get("calls", 0), "output_tokens": chat.counts.get("output_tokens", 0),
            "cut_at_max_tokens": chat.counts.get("cut_at_max_tokens", 0), **extra, "tool": tool,
            "llm": chat.model_label, "n_threads": chat.n_threads, "n_ctx": chat.n_ctx, "max_tokens": chat.max_tokens}


def lab_ids(dataset: str) -> list[str]:
    """The lab subset's ids of ``dataset`` in their run order (``benchmarks/lab_subset.json``)."""
    return json.loads((HERE / "lab_subset.json").read_text(encoding="utf-8"))["sets"][dataset]


@app.command()
def run(
    k: Annotated[int, typer.Option("-k", help="First K lab ids of each set.")] = 5,
    tools: Annotated[str, typer.Option(help="Comma-separated: ragas, deepeval.")] = ",".join(TOOLS),
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = ",".join(SETS),
    llm: Annotated[str, typer.Option()] = LLM,
    threads: Annotated[Optional[int], typer.Option(help="llama.cpp threads.")] = 1,
    n_ctx: Annotated[int, typer.Option(help="Context window (tokens).")] = 8192,
    max_tokens: Annotated[int, typer.Option(help="Most tokens per answer.")] = 1024,
) -> None:
    """Score the first K lab ids of each set with each tool; id by id (set by set, tool by tool), so that an
    interrupted run leaves both tools on (nearly) the same rows."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
    from grapheval_plugins.jsonl import JsonlStore

    names, tool_names = datasets.split(","), tools.split(",")
    data = {name: {r["id"]: r for r in bench.load_dataset(name)} for name in names}
    stores = {tool: JsonlStore(result_path(tool, llm)) for tool in tool_names}
    chat = counting_chat_model(llm, threads, n_ctx, max_tokens)
    t_all = time.perf_counter()
    for i in range(k):
        for name in names:
            rid = lab_ids(name)[i]
            for tool in tool_names:
                if rid in stores[tool].rows:
                    continue
                result = score_row(tool, chat, data[name][rid], name)
                stores[tool].append(result)
                typer.echo(f"[{time.perf_counter() - t_all:7.0f} s] {tool:8s} {name} #{i + 1} {rid}: "
                           f"score {result['score']} ({result['seconds']:.0f} s, {result['llm_calls']} calls)"
                           + (f" ERROR {result['error_kind']}: {result['error']}" if result["error"] else ""),
                           err=True)
    for store in stores.values():
        store.close()


# ------------------------------------------------------------------------------------------------ the table
def _fmt(x: Optional[float], digits: int = 1) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def method_stats(labels: list[int], p: list[Optional[float]], seconds: list[Optional[float]],
                 failure_as_faithful: bool = False) -> dict[str, Any]:
    """AUC, BA, TPR, TNR (hallucinated iff P > 0.5), mean seconds, over the rows with a P (``None``: a failure),
    or over every row with a failure counted as faithful (P = 0) when ``failure_as_faithful``.

    >>> s = method_stats([1, 0, 1, 0], [0.9, 0.1, None, 0.6], [1.0, 3.0, 2.0, 2.0])
    >>> s["rows"], s["failures"], round(s["auc"], 3), s["ba"], s["seconds"]
    (3, 1, 1.0, 0.75, 2.0)
    >>> t = method_stats([1, 0, 1, 0], [0.9, 0.1, None, 0.6], [1.0, 3.0, 2.0, 2.0], failure_as_faithful=True)
    >>> t["rows"], round(t["auc"], 3), t["ba"]
    (4, 0.5, 0.5)
    """
    failures = sum(v is None for v in p)
    if failure_as_faithful:
        pairs = [(y, 0.0 if v is None else v) for y, v in zip(labels, p)]
    else:
        pairs = [(y, v) for y, v in zip(labels, p) if v is not None]
    y = [a for a, _ in pairs]
    s = [b for _, b in pairs]
    secs = [v for v in seconds if v is not None]
    if not pairs:
        return {"rows": 0, "failures": failures, "auc": math.nan, "ba": math.nan, "tpr": math.nan,
                "tnr": math.nan, "seconds": sum(secs) / len(secs) if secs else math.nan}
    pred = [v > THRESHOLD for v in s]
    tpr, tnr = bench.rates(y, pred)
    return {"rows": len(pairs), "failures": failures, "auc": bench.roc_auc(y, s),
            "ba": bench.balanced_accuracy(y, pred), "tpr": tpr, "tnr": tnr,
            "seconds": sum(secs) / len(secs) if secs else math.nan}


def peer_p(row: Optional[dict[str, Any]]) -> Optional[float]:
    """P(hallucination) of a peer's per-row result: 1 − score; ``None`` for a failure."""
    if row is None or row.get("score") is None or row.get("error"):
        return None
    return 1.0 - float(row["score"])


def comparison_rows(sets: dict[str, list[dict[str, Any]]]) -> list[tuple[str, str, dict[str, Any]]]:
    """(set, method, stats) per set and pooled. Each row of ``sets[name]`` holds ``label`` and ``methods``:
    method name -> ``(P or None, seconds or None, is_peer)``; a peer's method gets two lines, over the rows it scored
    and over every row with a failure counted as faithful."""
    out: list[tuple[str, str, dict[str, Any]]] = []
    groups = list(sets.items())
    if len(sets) > 1:
        groups.append(("pooled", [r for rows in sets.values() for r in rows]))
    for name, rows in groups:
        if not rows:
            continue
        labels = [r["label"] for r in rows]
        for method in rows[0]["methods"]:
            p = [r["methods"][method][0] for r in rows]
            secs = [r["methods"][method][1] for r in rows]
            peer = rows[0]["methods"][method][2]
            if peer:
                out.append((name, f"{method} (rows it scored)", method_stats(labels, p, secs)))
                out.append((name, f"{method} (failure = faithful)",
                            method_stats(labels, p, secs, failure_as_faithful=True)))
            else:
                out.append((name, method, method_stats(labels, p, secs)))
    return out


def markdown_table(rows: list[tuple[str, str, dict[str, Any]]], sizes: dict[str, tuple[int, int]]) -> str:
    lines = ["| set | method | rows | AUC | BA | TPR / TNR | s/row | failures |", "|---|---|---|---|---|---|---|---|"]
    last = None
    for name, method, s in rows:
        n, pos = sizes[name]
        label = f"{name} ({n}; {pos} halluc.)" if name != last else ""
        last = name
        lines.append(f"| {label} | {method} | {s['rows']} | {_fmt(100 * s['auc'])} | {_fmt(100 * s['ba'])} "
                     f"| {_fmt(s['tpr'], 2)} / {_fmt(s['tnr'], 2)} | {_fmt(s['seconds'])} | {s['failures']} |")
    return "\n".join(lines)


def graph_methods(names: list[str], llm: str, scorer: str) -> dict[str, dict[str, dict[str, tuple]]]:
    """Per set and id: raw and GraphEval's default from the committed per-row files, derived with
    ``detection.py``'s own functions (``hybrid_score``: the core's ``HybridWeights.probability``; ``fit_weights``:
    ``calibrate.fit_hybrid``), and their seconds as ``detection.py hybrid`` counts them."""
    import detection

    from grapheval_plugins.calibrate import fit_hybrid

    paper = detection._load_sets(llm, scorer, detection.PAPER_TAG, "concat", list(SETS))
    default = detection._load_sets(llm, scorer, detection.DEFAULT_TAG, "concat", list(SETS))
    fidelity = {n: {r["id"]: r for r in detection.bench.load_results(detection.fidelity_path(n, llm, scorer))
                    if not r.get("error")} for n in SETS}
    # the weights the files' judge wording was shipped with (none without fidelity files)
    shipped = detection.files_weights(llm, scorer, True) if any(fidelity.values()) else None

    def scores(row: dict[str, Any], fid: bool) -> tuple[float, list[float]]:
        return detection.lab_scores(row, fidelity[row["dataset"]].get(row["id"]) if fid else None)

    def fit(rows: list[dict[str, Any]], fid: bool, fitted_on: str) -> Any:
        xs = [scores(r, fid) for r in rows]
        return fit_hybrid([r["label"] for r in rows], [w for w, _ in xs], [max(c) for _, c in xs], fitted_on=fitted_on)

    out: dict[str, dict[str, dict[str, tuple]]] = {}
    for name in names:
        base = {r["id"]: r for r in paper.get(name, [])}
        others = [r for other, rs in default.items() if other != name for r in rs]
        fitted_on = "+".join(o for o in default if o != name)
        loso, loso_off = fit(others, True, fitted_on), fit(others, False, fitted_on)
        out[name] = {}
        for r in default.get(name, []):
            # seconds of the first (uncached) run, as `detection.py hybrid` counts them: raw = its check; the
            # default = extraction + the triples' check + the whole output's check (+ the fidelity pass).
            fresh = base.get(r["id"]) if base.get(r["id"]) and not base[r["id"]].get("cached") else r
            t = fresh["timings"]
            graph = t["extract"] + t["check_graph"] + t["check_raw"]
            fid_s = fidelity[name].get(r["id"], {}).get("seconds", 0.0)
            out[name][r["id"]] = {
                "raw": (r["p_raw"], t["check_raw"], False),
                "GraphEval default (weights fitted on the other two sets)": (loso.probability(*scores(r, True)),
                                                                            graph + fid_s, False),
                "GraphEval default, shipped weights (in-sample)": (shipped.probability(*scores(r, True)) if shipped
                                                                   else None, graph + fid_s, False),
                "GraphEval, fidelity off (weights fitted on the other two sets)": (
                    loso_off.probability(*scores(r, False)), graph, False),
            }
    return out


@app.command()
def table(
    k: Annotated[int, typer.Option("-k", help="First K lab ids of each set.")] = 5,
    datasets: Annotated[str, typer.Option(help="Comma-separated data sets.")] = ",".join(SETS),
    llm: Annotated[str, typer.Option()] = LLM,
    scorer: Annotated[str, typer.Option(help="GraphEval's judge in the committed per-row files.")] = SCORER,
) -> None:
    """Per set and pooled: AUC / BA / TPR / TNR / s per row / failures of raw, GraphEval's default, Ragas and
    DeepEval on the first K lab ids each set where both peers have a result (scored or failed)."""
    names = datasets.split(",")
    peers = {tool: {r["id"]: r for r in bench.load_results(result_path(tool, llm))} for tool in TOOLS}
    graph = graph_methods(names, llm, scorer)
    sets: dict[str, list[dict[str, Any]]] = {}
    missing: list[str] = []
    for name in names:
        rows = []
        for rid in lab_ids(name)[:k]:
            if not all(rid in peers[t] for t in TOOLS) or rid not in graph[name]:
                missing.append(rid)
                continue
            methods = dict(graph[name][rid])
            methods["Ragas Faithfulness"] = (peer_p(peers["ragas"][rid]), peers["ragas"][rid]["seconds"], True)
            methods["DeepEval FaithfulnessMetric"] = (peer_p(peers["deepeval"][rid]),
                                                      peers["deepeval"][rid]["seconds"], True)
            rows.append({"id": rid, "label": peers["ragas"][rid]["label"], "methods": methods})
        sets[name] = rows
    sizes = {name: (len(rows), sum(r["label"] for r in rows)) for name, rows in sets.items()}
    sizes["pooled"] = (sum(n for n, _ in sizes.values()), sum(p for _, p in sizes.values()))
    typer.echo(f"LLM `{llm}` for the peers; GraphEval: the committed per-row files of `{llm}` + `{scorer}`; first {k} "
               f"lab ids per set; hallucinated iff P(hallucination) > {THRESHOLD}\n")
    typer.echo(markdown_table(comparison_rows(sets), sizes))
    if missing:
        typer.echo(f"\nleft out (a peer has no result yet): {len(missing)} of the first {k} ids: {missing}")
    typer.echo("")
    for tool in TOOLS:
        chosen = [peers[tool][r["id"]] for rows in sets.values() for r in rows]
        kinds: dict[str, int] = {}
        for r in chosen:
            if r.get("error"):
                kinds[r["error_kind"]] = kinds.get(r["error_kind"], 0) + 1
        calls = [r["llm_calls"] for r in chosen]
        cut = sum(r.get("cut_at_max_tokens", 0) for r in chosen)
        typer.echo(f"{tool}: {len(chosen)} rows, failures {sum(kinds.values())} {kinds or ''}; "
                   f"LLM calls/row {_fmt(sum(calls) / len(calls) if calls else math.nan, 2)}; "
                   f"answers cut at max_tokens: {cut}")


if __name__ == "__main__":
    app()
