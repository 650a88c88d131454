"""GraphEval as a LangChain Runnable: invoke / batch / async paths, callbacks and config, composition, routing."""

from __future__ import annotations

import asyncio
import json
import re
import threading
from typing import Any
from uuid import UUID

import pytest
from langchain_core.callbacks import AsyncCallbackHandler, BaseCallbackHandler
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from pydantic import PrivateAttr

import grapheval_plugins
from grapheval_plugins import GraphEval, InputError, Report
from grapheval_plugins.correct import CorrectionReport, GraphCorrect
from grapheval_plugins.integrations.langchain import (
    GraphCorrectRunnable,
    GraphEvalRunnable,
    route_on_hallucination,
)
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel, naive_triples_chat_model

CONTEXT = "Marie Curie was born in Warsaw. She won two Nobel Prizes. She worked in Paris."
ROWS: list[dict[str, Any]] = [
    {"context": CONTEXT, "answer": "Marie Curie was born in Warsaw and won two Nobel Prizes."},
    {"context": CONTEXT, "answer": "Marie Curie was born in Berlin."},
    {"documents": [Document(page_content="Tom lives in Oslo."), Document(page_content="He is a baker.")],
     "output": "Tom lives in Oslo. He is a baker."},
    {"context": ["Ada wrote the first program.", "Ada worked with Babbage."],
     "answer": AIMessage("Ada worked with Turing.")},
]


def naive_triples(messages: list[BaseMessage]) -> str:
    """Prompt A answered with crude triples cut from each sentence (deterministic)."""
    respond = naive_triples_chat_model().respond
    assert respond is not None
    return respond(messages)


def make_engine(**kw: Any) -> GraphEval:
    return GraphEval(llm=ScriptedChatModel(respond=naive_triples), scorer=KeywordScorer(), cache=False, **kw)


def comparable(report: Report) -> dict[str, Any]:
    return report.model_dump(exclude={"timings"})


class Recorder(BaseCallbackHandler):
    """Records chain and chat-model starts with their run ids, parents, tags and metadata."""

    def __init__(self) -> None:
        self.chains: dict[UUID, dict[str, Any]] = {}
        self.chat_models: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None,
                       **kwargs: Any) -> None:
        with self.lock:
            self.chains[run_id] = {"name": kwargs.get("name"), "parent": parent_run_id, "tags": kwargs.get("tags")}

    def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID,
                            parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        with self.lock:
            self.chat_models.append({"run_id": run_id, "parent": parent_run_id, "tags": kwargs.get("tags"),
                                     "metadata": kwargs.get("metadata"), "text": str(messages[0][-1].content)})

    def runs_named(self, name: str) -> list[UUID]:
        return [rid for rid, info in self.chains.items() if info["name"] == name]


class AsyncRecorder(AsyncCallbackHandler):
    def __init__(self) -> None:
        self.chat_parents: list[UUID | None] = []
        self.grapheval_runs: list[UUID] = []

    async def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        if kwargs.get("name") == "GraphEval":
            self.grapheval_runs.append(run_id)

    async def on_chat_model_start(self, serialized: Any, messages: Any, *, run_id: UUID,
                                  parent_run_id: UUID | None = None, **kwargs: Any) -> None:
        self.chat_parents.append(parent_run_id)


# --------------------------------------------------------------------------------------------- invoke
def test_invoke_adds_the_report_beside_the_input() -> None:
    out = GraphEvalRunnable(make_engine()).invoke(ROWS[1])
    assert set(out) == {"context", "answer", "grapheval"}
    report = out["grapheval"]
    assert isinstance(report, Report)
    assert report.hallucinated is True
    assert [c.triple.as_list() for c in report.unsupported] == [["Marie Curie", "was", "born in Berlin"]]


def test_report_only_and_custom_keys() -> None:
    check = GraphEvalRunnable(make_engine(), answer_keys="response", context_keys=["passages"], report_only=True)
    report = check.invoke({"passages": ["Tom lives in Oslo."], "response": "Tom lives in Oslo."})
    assert isinstance(report, Report) and report.hallucinated is False
    renamed = check.with_options(report_only=False, report_key="verdict").invoke(
        {"passages": "Tom lives in Oslo.", "response": "Tom lives in Rome."})
    assert renamed["verdict"].hallucinated is True and "grapheval" not in renamed


def test_default_keys_cover_common_rag_chains() -> None:
    check = GraphEvalRunnable(make_engine(), report_only=True)
    # 'output' + 'documents' (Documents), and an AIMessage answer
    assert check.invoke(ROWS[2]).hallucinated is False
    report = check.invoke(ROWS[3])
    assert report.output == "Ada worked with Turing."
    assert report.hallucinated is True


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"context": CONTEXT}, r"no answer found: expected one of the keys \['answer', 'output'\], got \['context'\]"),
        ({"answer": "x y z"}, r"no context found.*context_keys="),
        ({"context": "", "answer": "x y z"}, r"context: is empty"),
        ({"context": "c", "output": None}, r"output: is missing"),
        ("just a string", r"expected a dict"),
    ],
)
def test_bad_input_raises_an_input_error_naming_the_key(row: Any, message: str) -> None:
    with pytest.raises(InputError, match=message):
        GraphEvalRunnable(make_engine()).invoke(row)


def test_constructor_validation() -> None:
    with pytest.raises(InputError, match="not both"):
        GraphEvalRunnable(make_engine(), scorer=KeywordScorer())
    with pytest.raises(InputError, match="answer_keys"):
        GraphEvalRunnable(make_engine(), answer_keys=[])
    with pytest.raises(InputError, match="expected a GraphEval"):
        GraphEvalRunnable("not an engine")  # type: ignore[arg-type]
    built = GraphEvalRunnable(llm=ScriptedChatModel(respond=naive_triples), scorer=KeywordScorer())
    assert built.invoke(ROWS[1])["grapheval"].hallucinated is True


def test_stage_failure_is_reported_not_raised() -> None:
    engine = GraphEval(llm=ScriptedChatModel(responses=[RuntimeError("provider down")]), scorer=KeywordScorer(),
                       max_retries=0)
    report = GraphEvalRunnable(engine, report_only=True).invoke(ROWS[0])
    assert report.ok is False
    assert report.errors[0].stage == "extract" and "provider down" in report.errors[0].message


# --------------------------------------------------------------------------------------------- batch / async
def test_batch_equals_invoke_one_by_one() -> None:
    one_by_one = [GraphEvalRunnable(make_engine()).invoke(r) for r in ROWS]
    batched = GraphEvalRunnable(make_engine()).batch(ROWS, config={"max_concurrency": 2})
    assert [comparable(o["grapheval"]) for o in batched] == [comparable(o["grapheval"]) for o in one_by_one]
    assert [o["grapheval"].hallucinated for o in batched] == [False, True, False, True]


async def test_async_paths_equal_the_sync_ones() -> None:
    sync = [comparable(GraphEvalRunnable(make_engine(), report_only=True).invoke(r)) for r in ROWS]
    check = GraphEvalRunnable(make_engine(), report_only=True)
    one = [comparable(await check.ainvoke(r)) for r in ROWS]
    many = [comparable(r) for r in await GraphEvalRunnable(make_engine(), report_only=True).abatch(ROWS)]
    assert one == sync and many == sync


def test_batch_shares_scorer_passes_across_rows() -> None:
    scorer = KeywordScorer()
    engine = GraphEval(llm=ScriptedChatModel(respond=naive_triples), scorer=scorer, cache=False,
                       batch_wait_s=0.05)
    GraphEvalRunnable(engine).batch(ROWS[:2])
    assert len(scorer.batches) == 1  # both rows' claims scored in one pass
    assert {h for _, h in scorer.batches[0]} == {
        "Marie Curie was born in Berlin", "Marie Curie was born in Warsaw and won two Nobel Prizes"}


class SlowChatModel(ScriptedChatModel):
    """Async answers that take a little while, recording the peak number in flight."""

    _active: int = PrivateAttr(default=0)
    _peak: int = PrivateAttr(default=0)

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        self._active += 1
        self._peak = max(self._peak, self._active)
        await asyncio.sleep(0.02)
        self._active -= 1
        return ChatResult(generations=[ChatGeneration(message=AIMessage(self._answer(messages)))])


@pytest.mark.parametrize(("limit", "expected_peak"), [(2, 2), (None, 3)])
async def test_abatch_honours_max_concurrency(limit: int | None, expected_peak: int) -> None:
    llm = SlowChatModel(respond=naive_triples)
    engine = GraphEval(llm=llm, scorer=KeywordScorer(), cache=False, max_concurrency=3)
    rows = [{"context": CONTEXT, "answer": f"Marie Curie won {i} prizes."} for i in range(6)]
    config = {"max_concurrency": limit} if limit else None
    out = await GraphEvalRunnable(engine, report_only=True).abatch(rows, config=config)
    assert len(out) == 6 and len(llm.calls) == 6
    assert llm._peak == expected_peak  # None falls back to the engine's max_concurrency


def test_batch_return_exceptions_isolates_a_bad_row() -> None:
    rows = [ROWS[0], {"context": CONTEXT}, ROWS[1]]
    out = GraphEvalRunnable(make_engine(), report_only=True).batch(rows, return_exceptions=True)
    assert isinstance(out[1], InputError)
    assert out[0].hallucinated is False and out[2].hallucinated is True
    with pytest.raises(InputError, match="no answer found"):
        GraphEvalRunnable(make_engine()).batch(rows)


# --------------------------------------------------------------------------------------------- callbacks / config
def test_callbacks_tags_and_metadata_reach_the_inner_chat_model() -> None:
    rec = Recorder()
    GraphEvalRunnable(make_engine()).invoke(
        ROWS[1], config={"callbacks": [rec], "tags": ["faithfulness"], "metadata": {"request": "r-1"}})
    [grapheval_run] = rec.runs_named("GraphEval")
    [chat] = rec.chat_models
    assert chat["parent"] == grapheval_run  # the extraction call is nested under the GraphEval run
    assert "faithfulness" in chat["tags"]
    assert chat["metadata"]["request"] == "r-1"
    assert "Marie Curie was born in Berlin." in chat["text"]


def test_run_name_and_with_config_propagate() -> None:
    rec = Recorder()
    check = GraphEvalRunnable(make_engine()).with_config(tags=["bound-tag"], run_name="faithfulness-check")
    check.invoke(ROWS[0], config={"callbacks": [rec]})
    [run] = rec.runs_named("faithfulness-check")
    assert "bound-tag" in rec.chains[run]["tags"]
    assert rec.chat_models[0]["parent"] == run and "bound-tag" in rec.chat_models[0]["tags"]


def test_batch_gives_each_row_its_own_nested_run() -> None:
    rec = Recorder()
    GraphEvalRunnable(make_engine()).batch(ROWS, config={"callbacks": [rec]})
    runs = set(rec.runs_named("GraphEval"))
    assert len(runs) == len(ROWS)
    assert {c["parent"] for c in rec.chat_models} == runs  # one extraction call under each row's run


async def test_async_callbacks_see_the_nested_chat_model_run() -> None:
    rec = AsyncRecorder()
    check = GraphEvalRunnable(make_engine())
    await check.ainvoke(ROWS[0], config={"callbacks": [rec]})
    await check.abatch(ROWS[1:3], config={"callbacks": [rec]})
    assert len(rec.grapheval_runs) == 3
    assert len(rec.chat_parents) == 3
    assert set(rec.chat_parents) == set(rec.grapheval_runs)


async def test_astream_events_show_the_nested_chat_model() -> None:
    events = [
        (e["event"], e["name"], len(e["parent_ids"]))
        async for e in GraphEvalRunnable(make_engine()).astream_events(ROWS[1], version="v2")
    ]
    assert events == [
        ("on_chain_start", "GraphEval", 0),
        ("on_chat_model_start", "ScriptedChatModel", 1),
        ("on_chat_model_end", "ScriptedChatModel", 1),
        ("on_chain_end", "GraphEval", 0),
    ]


# --------------------------------------------------------------------------------------------- composition
def make_rag(answer: str, check: GraphEvalRunnable) -> Any:
    docs = [Document(page_content="Tom lives in Oslo."), Document(page_content="He is a baker.")]
    retriever = RunnableLambda(lambda question: docs).with_config(run_name="retriever")
    prompt = ChatPromptTemplate.from_messages([("human", "Context: {context}\n\nQuestion: {question}")])
    answerer = ScriptedChatModel(responses=[answer], model_label="answerer")
    return {"context": retriever, "question": RunnablePassthrough()} | RunnablePassthrough.assign(
        answer=prompt | answerer | StrOutputParser()
    ) | RunnablePassthrough.assign(grapheval=check.with_options(report_only=True))


def test_passthrough_assign_at_the_end_of_a_rag_chain() -> None:
    rec = Recorder()
    chain = make_rag("Tom lives in Bergen.", GraphEvalRunnable(make_engine()))
    out = chain.invoke("Where does Tom live?", config={"callbacks": [rec]})
    assert set(out) == {"context", "question", "answer", "grapheval"}
    assert out["answer"] == "Tom lives in Bergen."
    assert out["grapheval"].hallucinated is True
    [grapheval_run] = rec.runs_named("GraphEval")
    extraction = [c for c in rec.chat_models if c["parent"] == grapheval_run]
    assert len(rec.chat_models) == 2 and len(extraction) == 1
    assert "Tom lives in Bergen." in extraction[0]["text"] and "Oslo" not in extraction[0]["text"]


async def test_rag_chain_abatch() -> None:
    chain = make_rag("Tom lives in Oslo.", GraphEvalRunnable(make_engine()))
    outs = await chain.abatch(["Where does Tom live?", "Where is Tom?"])
    assert [o["grapheval"].hallucinated for o in outs] == [False, False]


def test_route_on_hallucination() -> None:
    fixer = RunnableLambda(lambda row: {**row, "answer": "Marie Curie was born in Warsaw.", "fixed": True})
    chain = route_on_hallucination(GraphEvalRunnable(make_engine(), report_only=True), fixer)
    flagged = chain.invoke(ROWS[1])
    assert flagged["fixed"] is True and flagged["grapheval"].hallucinated is True
    clean = chain.invoke(ROWS[0])
    assert "fixed" not in clean and clean["answer"] == ROWS[0]["answer"]


def test_route_on_error_branch() -> None:
    engine = GraphEval(llm=ScriptedChatModel(responses=[RuntimeError("down")]), scorer=KeywordScorer(),
                       max_retries=0)
    chain = route_on_hallucination(GraphEvalRunnable(engine), lambda row: "fix", on_error=lambda row: "retry later",
                                   otherwise=lambda row: "ok")
    assert chain.invoke(ROWS[0]) == "retry later"


def test_lazy_export_from_the_package() -> None:
    assert grapheval_plugins.GraphEvalRunnable is GraphEvalRunnable
    assert grapheval_plugins.route_on_hallucination is route_on_hallucination
    assert grapheval_plugins.GraphCorrectRunnable is GraphCorrectRunnable


# --------------------------------------------------------------------------------------------- GraphCorrectRunnable
FIXES = {"Berlin": "Warsaw", "Turing": "Babbage"}


def correcting(messages: list[BaseMessage]) -> str:
    """Prompt A: naive triples; prompt B: the flagged triple with its wrong word fixed; prompt C: the substitution."""
    text = str(messages[-1].content)
    if "<old_triple>" in text:
        summary = re.search(r"<context>(.*?)</context>", text, re.S).group(1)  # type: ignore[union-attr]
        old = json.loads(re.search(r"<old_triple>(.*?)</old_triple>", text, re.S).group(1))  # type: ignore[union-attr]
        new = json.loads(re.search(r"<new_triple>(.*?)</new_triple>", text, re.S).group(1))  # type: ignore[union-attr]
        return f"<context>{summary.replace(old[2], new[2])}</context>"
    if "<triple>" in text:
        triple = json.loads(re.search(r"<triple>(.*?)</triple>", text, re.S).group(1))  # type: ignore[union-attr]
        for wrong, right in FIXES.items():
            triple[2] = triple[2].replace(wrong, right)
        return json.dumps(triple)
    return naive_triples(messages)


def make_corrector() -> tuple[GraphCorrect, ScriptedChatModel]:
    llm = ScriptedChatModel(respond=correcting)
    return GraphCorrect(GraphEval(llm=llm, scorer=KeywordScorer(), cache=False), rouge=False, strategy="paper"), llm


def prompt_a_calls(llm: ScriptedChatModel, text: str) -> int:
    return sum(1 for call in llm.calls if f"<input>{text}</input>" in "".join(str(m.content) for m in call))


def test_correct_runnable_replaces_the_answer_and_reports() -> None:
    corrector, _ = make_corrector()
    out = GraphCorrectRunnable(corrector).invoke(ROWS[1])
    assert out["answer"] == "Marie Curie was born in Warsaw."
    correction = out["correction"]
    assert isinstance(correction, CorrectionReport)
    assert correction.original == "Marie Curie was born in Berlin." and correction.status == "corrected"
    assert "grapheval" not in out  # no report was in the row, none is added
    # an unflagged answer comes back unchanged, without correction calls
    same = GraphCorrectRunnable(corrector).invoke(ROWS[0])
    assert same["answer"] == ROWS[0]["answer"] and same["correction"].status == "unflagged"
    assert same["correction"].llm_calls == 0


def test_correct_runnable_reuses_the_detection_in_the_row() -> None:
    corrector, llm = make_corrector()
    chain = GraphEvalRunnable(corrector.grapheval) | GraphCorrectRunnable(corrector)
    out = chain.invoke(ROWS[1])
    assert prompt_a_calls(llm, "Marie Curie was born in Berlin.") == 1  # detection ran once, not twice
    assert out["correction"].detection_llm_calls == 1
    # the row's report now judges the corrected answer
    assert out["grapheval"].output == "Marie Curie was born in Warsaw." and out["grapheval"].hallucinated is False


def test_correct_runnable_output_modes_and_assign() -> None:
    corrector, _ = make_corrector()
    chain = RunnablePassthrough.assign(answer=GraphCorrectRunnable(corrector, output="answer"))
    assert chain.invoke(ROWS[3])["answer"] == "Ada worked with Babbage."
    report = GraphCorrectRunnable(corrector, output="report").invoke(ROWS[3])
    assert isinstance(report, CorrectionReport) and report.diff == "Ada worked with [-Turing.-]{+Babbage.+}"
    renamed = GraphCorrectRunnable(corrector).with_options(correction_key="fix").invoke(ROWS[2])
    assert renamed["fix"].status == "unflagged" and renamed["output"] == ROWS[2]["output"]
    with pytest.raises(InputError, match="output"):
        GraphCorrectRunnable(corrector, output="text")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="not both"):
        GraphCorrectRunnable(corrector, llm=ScriptedChatModel(responses=["x"]))


def test_correct_batch_equals_invoke_one_by_one() -> None:
    def answers(outs: list[dict[str, Any]]) -> list[tuple[str, str]]:
        return [(o.get("answer", o.get("output")), o["correction"].status) for o in outs]

    one_by_one = [GraphCorrectRunnable(make_corrector()[0]).invoke(r) for r in ROWS]
    batched = GraphCorrectRunnable(make_corrector()[0]).batch(ROWS, config={"max_concurrency": 2})
    assert answers(batched) == answers(one_by_one)
    assert [s for _, s in answers(batched)] == ["unflagged", "corrected", "unflagged", "corrected"]


async def test_correct_async_and_nested_runs() -> None:
    corrector, _ = make_corrector()
    rec = Recorder()
    out = await GraphCorrectRunnable(corrector).ainvoke(ROWS[1], config={"callbacks": [rec], "tags": ["fix"]})
    assert out["answer"] == "Marie Curie was born in Warsaw."
    [run] = rec.runs_named("GraphCorrect")
    # detection (A), step 1 (B), step 2 (C) and the re-check (A) all run under the GraphCorrect run
    assert len(rec.chat_models) == 4
    assert {c["parent"] for c in rec.chat_models} == {run}
    assert all("fix" in c["tags"] for c in rec.chat_models)


def test_route_flagged_answers_to_graphcorrect() -> None:
    corrector, _ = make_corrector()
    chain = route_on_hallucination(GraphEvalRunnable(corrector.grapheval), GraphCorrectRunnable(corrector))
    outs = chain.batch(ROWS[:2])
    assert "correction" not in outs[0] and outs[0]["grapheval"].hallucinated is False
    assert outs[1]["answer"] == "Marie Curie was born in Warsaw."
    assert outs[1]["correction"].detection.output == "Marie Curie was born in Berlin."
    assert outs[1]["grapheval"].hallucinated is False


# --------------------------------------------------------------------------------------------- the example, with fakes
def load_example() -> Any:
    pytest.importorskip("rank_bm25")
    pytest.importorskip("langchain_community")
    from repo_scripts import load_script

    return load_script("examples/langchain/rag_chain.py", "rag_chain_example")


def test_example_chain_runs_offline_with_fakes() -> None:
    example = load_example()

    def respond(messages: list[BaseMessage]) -> str:
        text = str(messages[-1].content)
        if "Question: Who founded" in text:  # the answering prompt
            assert "Ingrid Dahl and Per Holm" in text  # BM25 retrieved the history document
            return "Nordlys Bikes was founded in 2009 by Ingrid Dahl and Per Holm."
        if "<old_triple>" in text:  # prompt C
            return "<context>The Fjord 3 has a range of 90 km.</context>"
        if "<triple>" in text:  # prompt B
            return '["The Fjord 3", "has a range of", "90 km"]'
        return naive_triples(messages)

    results = example.run(["Who founded Nordlys Bikes?"], llm=ScriptedChatModel(respond=respond),
                          scorer=KeywordScorer())
    asked, planted = results
    assert asked["documents"][0] == "history" and asked["hallucinated"] is False
    assert asked["correction_status"] is None
    assert planted["original_answer"] == "The Fjord 3 has a range of 150 km."
    assert planted["answer"] == "The Fjord 3 has a range of 90 km."
    assert planted["correction_status"] == "corrected" and planted["hallucinated"] is False
    assert planted["diff"] == "The Fjord 3 has a range of [-150-]{+90+} km."
