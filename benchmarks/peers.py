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

Over an OpenAI-compatible server (the comparison an API user makes; the ``api-*`` commands)::

    .venv/bin/python benchmarks/peers.py api-rows        # the planned rows -> benchmarks/api_peers_rows.json
    nice -n 15 .venv/bin/python benchmarks/peers.py serve --port 8766 --n-ctx 8192 --threads 1 &   # the 1.5B
    nice -n 15 .venv/bin/python benchmarks/peers.py api-run -c 1 --until 16:40 --stop-at 16:46
    nice -n 15 .venv/bin/python benchmarks/peers.py api-run -c 8 --first 8 --until 17:08 --stop-at 17:13
    .venv/bin/python benchmarks/peers.py api-table       # no model, no server: the per-row files

Five methods, each through its own host's client stack, one model (qwen2.5-coder-1.5b Q4_K_M) for every LLM call,
temperature 0 and the same ``max_tokens`` everywhere: ``GraphEval(llm=ChatOpenAI(base_url=...))`` (it extracts and
judges; the judge asks for log-probabilities itself), the same with ``mode="raw"``, Ragas's
``ragas.metrics.collections.Faithfulness`` over ``llm_factory(model, client=openai.AsyncOpenAI(base_url=...))``
(Ragas's own way to reach an OpenAI-compatible endpoint, Instructor underneath), DeepEval's ``FaithfulnessMetric``
and ``HallucinationMetric`` over DeepEval's own ``LocalModel(base_url=...)`` (``async_mode=True``,
``include_reason=False``). Every client's ``httpx`` transport is :func:`counting_transport`: each
``/chat/completions`` answer adds one call and its ``usage`` (prompt and completion tokens, as the server counted
them) to the row being scored (a ``ContextVar`` per task), the same way for every method, retries included. Per-row
files: ``benchmarks/results/api-peers/<method>-c<concurrency>.jsonl`` (a failure is a result: ``p_hallucination``
null and the error). At concurrency 1 each row gets all five methods before the next row; at concurrency N each
method in turn has N rows in flight (each row its own metric or engine, so nothing is batched across rows).
"""

from __future__ import annotations

import asyncio
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


# ================================================================================================ over an API server
# The comparison an API user makes: every method reaches one OpenAI-compatible server (llama_cpp.server serving the
# 1.5B GGUF on 127.0.0.1) through its own client stack; every HTTP answer's ``usage`` is counted by one transport
# under every client, per row.
API_MODEL = "qwen2.5-coder-1.5b"
API_ROWS = HERE / "api_peers_rows.json"
API_OUT = RESULTS / "api-peers"
API_SETS = (("qags_c", 17), ("qags_x", 17), ("summeval", 16))
API_METHODS = ("grapheval", "raw", "ragas", "deepeval-faithfulness", "deepeval-hallucination")
API_LABELS = {"grapheval": "GraphEval (default)", "raw": "GraphEval raw", "ragas": "Ragas Faithfulness",
              "deepeval-faithfulness": "DeepEval FaithfulnessMetric",
              "deepeval-hallucination": "DeepEval HallucinationMetric"}
PEER_METHODS = ("ragas", "deepeval-faithfulness", "deepeval-hallucination")


def api_row_list(seed: int = 0) -> list[dict[str, Any]]:
    """The planned rows (id, set, label): per set a label-stratified draw (:func:`harness.stratified_sample`,
    ``seed``; 17 QAGS-C, 17 QAGS-X, 16 SummEval, the rows of ``bench_judge_logprobs.py``), interleaved over
    (set, label) so that a run stopped early holds every set and both labels."""
    groups: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for name, n in API_SETS:
        for row in bench.stratified_sample(bench.load_dataset(name), n, seed=seed):
            groups.setdefault((name, int(row["label"])), []).append(
                {"id": row["id"], "set": name, "label": int(row["label"])})
    out: list[dict[str, Any]] = []
    for i in range(max(len(g) for g in groups.values())):
        out += [g[i] for g in groups.values() if i < len(g)]
    return out


def planned_rows(path: Path = API_ROWS) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text(encoding="utf-8"))["rows"])


def api_path(method: str, concurrency: int, out: Path = API_OUT) -> Path:
    return out / f"{method}-c{concurrency}.jsonl"


class RowUsage:
    """What the server answered for one row: chat-completion calls, their ``usage`` tokens, HTTP errors."""

    def __init__(self) -> None:
        import threading

        self.calls = self.prompt_tokens = self.completion_tokens = self.http_errors = self.without_usage = 0
        self._lock = threading.Lock()

    def add(self, status: int, body: Optional[dict[str, Any]]) -> None:
        with self._lock:
            self.calls += 1
            if status >= 400:
                self.http_errors += 1
                return
            usage = (body or {}).get("usage") or {}
            if not usage:
                self.without_usage += 1
            self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
            self.completion_tokens += int(usage.get("completion_tokens") or 0)

    def as_dict(self) -> dict[str, int]:
        return {"llm_calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "http_errors": self.http_errors,
                "calls_without_usage": self.without_usage}


def _usage_var() -> Any:
    from contextvars import ContextVar

    return ContextVar("api_peers_row_usage", default=None)


ROW_USAGE = _usage_var()
"""The :class:`RowUsage` of the row being scored in this task (asyncio tasks inherit it)."""
UNATTRIBUTED = RowUsage()
"""Calls made outside any row (should stay at zero)."""


def counting_transport(inner: Any = None) -> Any:
    """An ``httpx`` transport (sync and async) that passes every request to ``inner`` (default: a fresh
    ``httpx.AsyncHTTPTransport`` / ``httpx.HTTPTransport``) and counts each ``…/chat/completions`` answer in the
    current row's :class:`RowUsage`: one call, and the ``usage`` of its JSON body. Closing it closes nothing (the
    clients that DeepEval builds per call would close a shared connection pool)."""
    import httpx

    class CountingTransport(httpx.AsyncBaseTransport, httpx.BaseTransport):
        def __init__(self) -> None:
            self.inner_async = inner if inner is not None else httpx.AsyncHTTPTransport()
            self.inner_sync = inner if inner is not None else httpx.HTTPTransport()

        @staticmethod
        def _count(request: Any, response: Any, raw: bytes) -> Any:
            answer = httpx.Response(response.status_code, headers=response.headers, stream=httpx.ByteStream(raw),
                                    extensions={k: v for k, v in response.extensions.items()
                                                if k in ("http_version", "reason_phrase")}, request=request)
            if request.url.path.endswith("/chat/completions"):
                body = None
                try:
                    decoded = httpx.Response(200, headers=response.headers, stream=httpx.ByteStream(raw))
                    decoded.read()
                    body = decoded.json()
                except (ValueError, httpx.DecodingError):
                    pass
                (ROW_USAGE.get() or UNATTRIBUTED).add(response.status_code, body if isinstance(body, dict) else None)
            return answer

        async def handle_async_request(self, request: Any) -> Any:
            response = await self.inner_async.handle_async_request(request)
            try:
                raw = b"".join([chunk async for chunk in response.aiter_raw()])
            except httpx.StreamConsumed:  # a transport that read the answer already (httpx.MockTransport)
                raw = response.content
            finally:
                await response.aclose()
            return self._count(request, response, raw)

        def handle_request(self, request: Any) -> Any:
            response = self.inner_sync.handle_request(request)
            try:
                raw = b"".join(response.iter_raw())
            except httpx.StreamConsumed:
                raw = response.content
            finally:
                response.close()
            return self._count(request, response, raw)

        async def aclose(self) -> None:
            return None

        def close(self) -> None:
            return None

    return CountingTransport()


class ApiClients:
    """Every method's client, built the way its host's users build it, over one counting transport."""

    def __init__(self, base_url: str, max_tokens: int, timeout: float, transport: Any) -> None:
        self.base_url, self.max_tokens, self.timeout, self.transport = base_url, max_tokens, timeout, transport

    def _httpx(self, kind: str) -> Any:
        import httpx

        cls = httpx.AsyncClient if kind == "async" else httpx.Client
        return cls(transport=self.transport, timeout=self.timeout)

    def chat(self) -> Any:
        """``langchain_openai.ChatOpenAI(base_url=...)``: GraphEval's one model."""
        from langchain_openai import ChatOpenAI

        # langchain-openai sends ``max_completion_tokens``, which llama_cpp.server ignores: the cap goes in the body
        return ChatOpenAI(base_url=self.base_url, api_key="none", model=API_MODEL, temperature=0,
                          max_tokens=self.max_tokens, extra_body={"max_tokens": self.max_tokens},
                          timeout=self.timeout, max_retries=1,
                          http_client=self._httpx("sync"), http_async_client=self._httpx("async"))

    def ragas_llm(self) -> Any:
        """Ragas's own way: ``llm_factory`` over an ``openai.AsyncOpenAI`` client (Instructor)."""
        import openai
        from ragas.llms import llm_factory

        client = openai.AsyncOpenAI(base_url=self.base_url, api_key="none", timeout=self.timeout,
                                    http_client=self._httpx("async"))
        return llm_factory(API_MODEL, client=client, max_tokens=self.max_tokens, temperature=0)

    def deepeval_model(self) -> Any:
        """DeepEval's own OpenAI-compatible class, ``LocalModel(base_url=...)``; its clients get the transport."""
        import openai
        from deepeval.models import LocalModel

        clients = self

        class CountedLocalModel(LocalModel):  # type: ignore[misc]
            def _build_client(self, cls: Any) -> Any:
                self.kwargs["http_client"] = clients._httpx("async" if cls is openai.AsyncOpenAI else "sync")
                self.kwargs["timeout"] = clients.timeout
                return super()._build_client(cls)

        return CountedLocalModel(model=API_MODEL, base_url=self.base_url, api_key="none", temperature=0,
                                 generation_kwargs={"max_tokens": self.max_tokens})


async def api_grapheval(clients: ApiClients, row: dict[str, Any], mode: str = "graph") -> tuple[float, dict]:
    from grapheval_plugins import GraphEval

    report = await GraphEval(llm=clients.chat(), mode=mode, cache=False).aevaluate(row["context"], row["output"])
    if report.errors or report.score is None:
        raise RuntimeError("; ".join(f"{e.stage}: {e.type}: {e.message}" for e in report.errors) or "no score")
    own = [u for u in report.usage.values()]
    return 1.0 - float(report.score), {
        "claims": len(report.claims), "rule": report.method,
        "own_usage": {"calls": sum(u.calls for u in own), "input_tokens": sum(u.input_tokens or 0 for u in own),
                      "output_tokens": sum(u.output_tokens or 0 for u in own)}}


async def api_raw(clients: ApiClients, row: dict[str, Any]) -> tuple[float, dict]:
    return await api_grapheval(clients, row, mode="raw")


async def api_ragas(clients: ApiClients, row: dict[str, Any]) -> tuple[float, dict]:
    from ragas.metrics.collections import Faithfulness

    result = await Faithfulness(llm=clients.ragas_llm()).ascore(
        user_input=INPUT, response=row["output"], retrieved_contexts=[row["context"]])
    if result.value is None or math.isnan(float(result.value)):
        raise ValueError("the tool returned NaN (no statement to judge)")
    return 1.0 - float(result.value), {"score": float(result.value)}


async def api_deepeval_faithfulness(clients: ApiClients, row: dict[str, Any]) -> tuple[float, dict]:
    from deepeval.metrics import FaithfulnessMetric
    from deepeval.test_case import LLMTestCase

    metric = FaithfulnessMetric(model=clients.deepeval_model(), async_mode=True, include_reason=False)
    case = LLMTestCase(input=INPUT, actual_output=row["output"], retrieval_context=[row["context"]])
    score = await metric.a_measure(case, _show_indicator=False)
    if metric.error:
        raise RuntimeError(str(metric.error))
    return 1.0 - float(score), {"score": float(score), "claims": len(getattr(metric, "claims", []) or []),
                                "truths": len(getattr(metric, "truths", []) or [])}


async def api_deepeval_hallucination(clients: ApiClients, row: dict[str, Any]) -> tuple[float, dict]:
    """DeepEval 4's HallucinationMetric scores the share of contexts the output agrees with (one context here;
    success iff score >= threshold): P = 1 − score."""
    from deepeval.metrics import HallucinationMetric
    from deepeval.test_case import LLMTestCase

    metric = HallucinationMetric(model=clients.deepeval_model(), async_mode=True, include_reason=False)
    case = LLMTestCase(input=INPUT, actual_output=row["output"], context=[row["context"]])
    score = await metric.a_measure(case, _show_indicator=False)
    if metric.error:
        raise RuntimeError(str(metric.error))
    return 1.0 - float(score), {"score": float(score)}


API_SCORERS = {"grapheval": api_grapheval, "raw": api_raw, "ragas": api_ragas,
               "deepeval-faithfulness": api_deepeval_faithfulness,
               "deepeval-hallucination": api_deepeval_hallucination}


def api_error_kind(exc: BaseException) -> str:
    name, text = type(exc).__name__, str(exc)
    if "context" in text.lower() and ("window" in text.lower() or "length" in text.lower() or "exceed" in text):
        return "context"
    if "timeout" in name.lower() or "Timeout" in text:
        return "timeout"
    if ("JSON" in text or "json" in name.lower() or "ValidationError" in name or "Parse" in name
            or "InstructorRetryException" in name or isinstance(exc, (KeyError, TypeError))):
        return "parse"
    return "other"


async def api_score(clients: ApiClients, method: str, row: dict[str, Any], concurrency: int,
                    scorers: Optional[dict[str, Any]] = None) -> dict[str, Any]:
    """One method on one row, in its own task: the per-row result, the calls and tokens the server answered with
    for it (a failure is a result: ``p_hallucination`` null and the error)."""
    usage = RowUsage()
    ROW_USAGE.set(usage)
    started = time.time()
    t0 = time.perf_counter()
    p: Optional[float] = None
    extra: dict[str, Any] = {}
    error = kind = None
    try:
        p, extra = await (scorers or API_SCORERS)[method](clients, row)
    except Exception as exc:  # noqa: BLE001 - every failure of a method is a result to count
        error, kind = f"{type(exc).__name__}: {str(exc)[:300]}", api_error_kind(exc)
    seconds = time.perf_counter() - t0
    return {"id": row["id"], "set": row["set"], "label": row["label"], "method": method,
            "concurrency": concurrency, "p_hallucination": p, "error": error, "error_kind": kind,
            "seconds": round(seconds, 3), "started": round(started, 3), "ended": round(started + seconds, 3),
            **usage.as_dict(), **extra, "loadavg": [round(x, 2) for x in os.getloadavg()]}


def _deadline(hhmm: Optional[str]) -> Optional[float]:
    """Today's ``HH:MM`` UTC as a Unix time (``None``: no deadline)."""
    if not hhmm:
        return None
    import datetime as dt

    now = dt.datetime.now(dt.timezone.utc)
    hour, minute = (int(x) for x in hhmm.split(":"))
    return now.replace(hour=hour, minute=minute, second=0, microsecond=0).timestamp()


async def api_run_async(clients: ApiClients, rows: list[dict[str, Any]], methods: list[str], concurrency: int,
                        out: Path, until: Optional[float] = None, stop_at: Optional[float] = None,
                        scorers: Optional[dict[str, Any]] = None, log: Any = None) -> int:
    """Score ``rows`` with ``methods`` at ``concurrency``; resumable (rows in a method's file are skipped). At
    concurrency 1: row by row, every method on a row before the next row. Above: method by method, ``concurrency``
    rows of it in flight. No job starts after ``until``; jobs still running at ``stop_at`` are cancelled and not
    written (they are not results, they never ran to an end). Returns the rows written."""
    from grapheval_plugins.jsonl import JsonlStore

    out.mkdir(parents=True, exist_ok=True)
    stores = {m: JsonlStore(api_path(m, concurrency, out)) for m in methods}
    written = 0
    semaphore = asyncio.Semaphore(concurrency)

    async def job(method: str, row: dict[str, Any]) -> None:
        nonlocal written
        async with semaphore:
            if until is not None and time.time() >= until:
                return
            result = await api_score(clients, method, row, concurrency, scorers)
            stores[method].append({**result, "base_url": clients.base_url, "model": API_MODEL,
                                   "max_tokens": clients.max_tokens})
            written += 1
            if log:
                log(f"c{concurrency} {method:22s} {row['set']:8s} {row['id']}: P {result['p_hallucination']} "
                    f"({result['seconds']:.0f} s, {result['llm_calls']} calls, {result['prompt_tokens']}+"
                    f"{result['completion_tokens']} tok, load {result['loadavg'][0]})"
                    + (f" ERROR {result['error_kind']}: {result['error']}" if result["error"] else ""))

    def todo(method: str, row: dict[str, Any]) -> bool:
        return row["id"] not in stores[method].rows

    if concurrency == 1:
        plan = [[(m, r)] for r in rows for m in methods if todo(m, r)]
    else:
        plan = [[(m, r) for r in rows if todo(m, r)] for m in methods]
    try:
        for group in plan:
            if not group or (until is not None and time.time() >= until):
                continue
            tasks = [asyncio.ensure_future(job(m, r)) for m, r in group]
            timeout = None if stop_at is None else max(0.0, stop_at - time.time())
            done, pending = await asyncio.wait(tasks, timeout=timeout)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            for task in done:
                task.result()
            if pending:
                break
    finally:
        for store in stores.values():
            store.close()
    return written



@app.command()
def api_rows(seed: Annotated[int, typer.Option()] = 0) -> None:
    """Write the planned rows (``benchmarks/api_peers_rows.json``), before any run."""
    rows = api_row_list(seed)
    lines = ",\n  ".join(json.dumps(r) for r in rows)
    API_ROWS.write_text(f'{{"seed": {seed}, "sets": {json.dumps(dict(API_SETS))},\n "rows": [\n  {lines}\n]}}\n',
                        encoding="utf-8")
    typer.echo(f"{len(rows)} rows written to {API_ROWS}")


@app.command()
def serve(
    port: Annotated[int, typer.Option()] = 8766,
    threads: Annotated[int, typer.Option(help="llama.cpp threads (1 survives a busy machine best).")] = 1,
    n_ctx: Annotated[int, typer.Option(help="Context window (tokens).")] = 8192,
) -> None:
    """llama_cpp.server on 127.0.0.1 with the 1.5B GGUF, log-probabilities on (``logits_all``), llama.cpp's extra
    buffer types off (their AMX repack crashes on some CPUs, as ``bench_judge_logprobs.py serve`` says)."""
    import llama_cpp
    from llama_cpp.server.__main__ import main as server_main

    from grapheval_plugins.local.runtime import llama_without_extra_buffers
    from grapheval_plugins.local.weights import resolve_model_path

    llama_cpp.Llama = llama_without_extra_buffers(llama_cpp.Llama)  # the server creates its model through it
    sys.argv = ["llama_cpp.server", "--model", str(resolve_model_path(API_MODEL, hub=False)), "--model_alias",
                API_MODEL, "--n_ctx", str(n_ctx), "--logits_all", "true", "--n_threads", str(threads),
                "--seed", "0", "--host", "127.0.0.1", "--port", str(port)]
    server_main()


@app.command()
def api_run(
    port: Annotated[int, typer.Option()] = 8766,
    concurrency: Annotated[int, typer.Option("-c", help="Rows in flight at once.")] = 1,
    methods: Annotated[str, typer.Option(help="Comma-separated.")] = ",".join(API_METHODS),
    first: Annotated[int, typer.Option(help="The first N planned rows.")] = 50,
    max_tokens: Annotated[int, typer.Option(help="Most tokens per answer, every method.")] = 1024,
    timeout: Annotated[float, typer.Option(help="Seconds per HTTP request.")] = 1800.0,
    until: Annotated[Optional[str], typer.Option(help="HH:MM UTC: start no row after.")] = None,
    stop_at: Annotated[Optional[str], typer.Option(help="HH:MM UTC: cancel what still runs.")] = None,
) -> None:
    """Score the planned rows with every method over the server (resumable)."""
    for name, value in (("HF_HUB_OFFLINE", "1"), ("DEEPEVAL_TELEMETRY_OPT_OUT", "YES"),
                        ("RAGAS_DO_NOT_TRACK", "true"), ("DEEPEVAL_DISABLE_TIMEOUTS", "YES")):
        os.environ.setdefault(name, value)
    plan = planned_rows()[:first]
    data = {name: {r["id"]: r for r in bench.load_dataset(name)} for name, _ in API_SETS}
    rows = []
    for p in plan:
        row = data[p["set"]][p["id"]]
        assert int(row["label"]) == p["label"], p
        rows.append({**p, "context": row["context"], "output": row["output"]})
    clients = ApiClients(f"http://127.0.0.1:{port}/v1", max_tokens, timeout, counting_transport())
    typer.echo(f"machine: {bench.cpu_model()}, {os.cpu_count()} CPUs, load {os.getloadavg()}", err=True)
    written = asyncio.run(api_run_async(
        clients, rows, methods.split(","), concurrency, API_OUT, _deadline(until), _deadline(stop_at),
        log=lambda line: typer.echo(f"[{time.strftime('%H:%M:%S', time.gmtime())}] {line}", err=True)))
    typer.echo(f"{written} rows written; calls outside any row: {UNATTRIBUTED.as_dict()}", err=True)


def api_results(out: Path = API_OUT) -> dict[int, dict[str, dict[str, dict[str, Any]]]]:
    """concurrency -> method -> id -> per-row result, from the per-row files under ``out``."""
    found: dict[int, dict[str, dict[str, dict[str, Any]]]] = {}
    for path in sorted(out.glob("*-c*.jsonl")):
        method, _, level = path.stem.rpartition("-c")
        if method in API_METHODS and level.isdigit():
            found.setdefault(int(level), {})[method] = {r["id"]: r for r in bench.load_results(path)}
    return found


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.nan


def api_table_text(out: Path = API_OUT, rows_file: Path = API_ROWS) -> str:
    """The comparison as markdown, from the per-row files alone (no model, no server)."""
    plan = planned_rows(rows_file)
    results = api_results(out)
    lines: list[str] = []
    one = results.get(1, {})
    # a method that failed on every row it ran (and was then stopped) is reported by its failures, not intersected
    failed = [m for m in API_METHODS if one.get(m) and all(r.get("error") for r in one[m].values())]
    compared = [m for m in API_METHODS if m not in failed]
    common = [p for p in plan if all(p["id"] in one.get(m, {}) for m in compared)]
    labels = [p["label"] for p in common]
    lines.append(f"Concurrency 1: {len(common)} of the {len(plan)} planned rows have a result of every method "
                 f"({sum(labels)} hallucinated; "
                 + ", ".join(f"{n} {s}" for s, n in sorted(_count_sets(common).items())) + ").\n")
    for method in failed:
        kinds = sorted({str(r.get("error_kind") or "error") for r in one[method].values()})
        lines.append(f"{API_LABELS[method]} failed on each of the {len(one[method])} rows it ran "
                     f"({', '.join(kinds)}), and is left out of the rows below.\n")
    lines.append("| method | rows scored | failures | ROC AUC | BA | LLM calls/row | prompt tok/row "
                 "| completion tok/row | total tok/row | s/row (c=1) |")
    lines.append("|---|---|---|---|---|---|---|---|---|---|")
    summary: dict[str, dict[str, float]] = {}
    for method in compared:
        got = [one[method][p["id"]] for p in common]
        stats = method_stats(labels, [r["p_hallucination"] if not r.get("error") else None for r in got],
                             [r["seconds"] for r in got])
        tok = {k: _mean([float(r[k]) for r in got]) for k in ("llm_calls", "prompt_tokens", "completion_tokens")}
        total = tok["prompt_tokens"] + tok["completion_tokens"]
        summary[method] = {"auc": stats["auc"], "tokens": total}
        lines.append(f"| {API_LABELS[method]} | {stats['rows']} | {stats['failures']} | {_fmt(100 * stats['auc'])} "
                     f"| {_fmt(100 * stats['ba'])} | {_fmt(tok['llm_calls'], 2)} | {_fmt(tok['prompt_tokens'], 0)} "
                     f"| {_fmt(tok['completion_tokens'], 0)} | {_fmt(total, 0)} | {_fmt(stats['seconds'])} |")
    for level in sorted(k for k in results if k != 1):
        lines.append(f"\nConcurrency {level} (the rows each method completed; s/row: mean seconds from a row's start "
                     f"to its end, and wall-clock seconds of the whole batch per row):\n")
        lines.append("| method | rows | failures | s/row (latency) | wall s/row | same rows at c=1: s/row "
                     "| tok/row (c=1 on the same rows) |")
        lines.append("|---|---|---|---|---|---|---|")
        for method in API_METHODS:
            got = [results[level][method][p["id"]] for p in plan if p["id"] in results[level].get(method, {})]
            if not got:
                lines.append(f"| {API_LABELS[method]} | 0 | — | — | — | — | — |")
                continue
            wall = (max(r["ended"] for r in got) - min(r["started"] for r in got)) / len(got)
            same = [one[method][r["id"]] for r in got if r["id"] in one.get(method, {})]
            tok_same = _mean([float(r["prompt_tokens"] + r["completion_tokens"]) for r in same])
            tok_here = _mean([float(r["prompt_tokens"] + r["completion_tokens"]) for r in got])
            lines.append(f"| {API_LABELS[method]} | {len(got)} | {sum(bool(r.get('error')) for r in got)} "
                         f"| {_fmt(_mean([r['seconds'] for r in got]))} | {_fmt(wall)} "
                         f"| {_fmt(_mean([r['seconds'] for r in same]))} ({len(same)} rows) "
                         f"| {_fmt(tok_here, 0)} ({_fmt(tok_same, 0)}) |")
    if common:
        peers_ = [summary[m] for m in PEER_METHODS if m in summary]
        best = max((s["auc"] for s in peers_ if not math.isnan(s["auc"])), default=math.nan)
        mine = summary["grapheval"]
        fewer = all(mine["tokens"] < s["tokens"] for s in peers_)
        if math.isnan(mine["auc"]) or math.isnan(best):
            level = "not measurable on these rows (an AUC needs both labels and a score from each method)"
        else:
            level = f"{'yes' if mine['auc'] >= best else 'no'} ({_fmt(100 * mine['auc'])} vs {_fmt(100 * best)})"
        lines.append(f"\nGoal on these {len(common)} rows: fewer tokens per row than every peer: "
                     f"{'yes' if fewer else 'no'}; ROC AUC at least level with the best peer: {level}.")
        scored = [p for p in common if all(not one[m][p["id"]].get("error") for m in compared)]
        if scored:  # a failed row often ended early: the cost of a score is read on the rows every method scored
            cost = {m: _mean([float(one[m][p["id"]]["prompt_tokens"] + one[m][p["id"]]["completion_tokens"])
                              for p in scored]) for m in compared}
            lines.append(f"On the {len(scored)} rows every method scored, total tokens per row: "
                         + ", ".join(f"{API_LABELS[m]} {_fmt(cost[m], 0)}" for m in compared) + ".")
        lines.append("\nP(hallucination) per row at concurrency 1 (— : the method failed on the row):\n")
        lines.append("| row | label | " + " | ".join(API_LABELS[m] for m in API_METHODS) + " |")
        lines.append("|---|---|" + "---|" * len(API_METHODS))
        for p in plan:
            if any(p["id"] in one.get(m, {}) for m in API_METHODS):
                cells = [_fmt(one[m][p["id"]].get("p_hallucination"), 2) if p["id"] in one.get(m, {}) else " "
                         for m in API_METHODS]
                lines.append(f"| {p['id']} | {p['label']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _count_sets(rows: list[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["set"]] = counts.get(r["set"], 0) + 1
    return counts


@app.command()
def api_table() -> None:
    """The API comparison's tables from the committed per-row files (no model, no server)."""
    typer.echo(api_table_text())


if __name__ == "__main__":
    app()
