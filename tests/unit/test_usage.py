"""Cost per row: every report carries the chat-model calls and tokens of each stage (from usage_metadata)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from typer.testing import CliRunner

from grapheval_plugins import GraphEval
from grapheval_plugins.check.llm_judge import LLMJudge
from grapheval_plugins.messages import message_text
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
from grapheval_plugins.types import Report, StageUsage, total_usage, usage_cost

KG = '<python>[["Paris", "is in", "France"], ["Paris", "has", "ten million people"]]</python>'


class MeteredChatModel(ScriptedChatModel):
    """A scripted chat model whose answers carry usage_metadata: input = the prompt's characters, output = the
    answer's (so every call's tokens differ and the test can add them up per stage from ``calls``)."""

    def _result(self, messages: list[BaseMessage]) -> ChatResult:
        text = self._answer(messages)
        prompt = sum(len(message_text(m)) for m in messages)
        usage = {"input_tokens": prompt, "output_tokens": len(text), "total_tokens": prompt + len(text)}
        message = AIMessage(text, usage_metadata=usage, response_metadata={"model_name": self.model_label})
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return self._result(messages)

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        return self._result(messages)


def _judge_answer(messages: list[BaseMessage]) -> str:
    """A claim about ten million people is contradicted unless the context says so too."""
    user = message_text(messages[-1])
    claims = re.findall(r"^(\d+)\. (.*)$", user, flags=re.M)
    stated = "ten million" in user.split("Claims:")[0]
    return "\n".join(f"{n}: {'contradicted' if 'ten million' in c and not stated else 'supported'}"
                      for n, c in claims)


def _tokens(llm: MeteredChatModel, calls: list[list[BaseMessage]]) -> StageUsage:
    answers = [(_judge_answer(m) if llm.respond else KG) for m in calls]
    return StageUsage(calls=len(calls), input_tokens=sum(sum(len(message_text(x)) for x in m) for m in calls),
                      output_tokens=sum(len(a) for a in answers))


def _is_fidelity(call: list[BaseMessage], output: str) -> bool:
    return f"Context:\n{output}\n" in message_text(call[-1])


CONTEXT = "Paris is the capital of France. About two million people live there."
OUTPUT = "Paris is in France and has ten million people."


def test_each_stage_counts_exactly_its_own_calls_and_tokens() -> None:
    extractor = MeteredChatModel(responses=[KG])
    judge = MeteredChatModel(respond=_judge_answer)
    engine = GraphEval(llm=extractor, scorer=LLMJudge(judge), rule="paper", fidelity="drop", cache=False)
    report = engine.evaluate(CONTEXT, OUTPUT)
    assert report.ok and report.hallucinated
    check = [c for c in judge.calls if not _is_fidelity(c, OUTPUT)]
    fidelity = [c for c in judge.calls if _is_fidelity(c, OUTPUT)]
    assert fidelity, "the round trip asked the judge about the output"
    assert report.usage == {
        "extract": _tokens(extractor, extractor.calls),
        "check": _tokens(judge, check),
        "fidelity": _tokens(judge, fidelity),
    }
    # The JSON carries it, and reads back.
    data = json.loads(report.model_dump_json())
    assert data["usage"]["extract"] == {"calls": 1, "input_tokens": report.usage["extract"].input_tokens,
                                        "output_tokens": len(KG), "cost": None}
    assert Report.model_validate(data).usage == report.usage


def test_batch_totals_are_exact_and_agree_with_langchains_own_counter() -> None:
    extractor = MeteredChatModel(responses=[KG])
    judge = MeteredChatModel(respond=_judge_answer)
    engine = GraphEval(llm=extractor, scorer=LLMJudge(judge), rule="paper", cache=False)
    rows = [{"id": str(i), "context": f"{CONTEXT} Row {i}.", "output": OUTPUT} for i in range(3)]
    with get_usage_metadata_callback() as langchain_counter:
        reports = engine.evaluate_many(rows, show_progress=False)
    every = _tokens(extractor, extractor.calls) + _tokens(judge, judge.calls)
    assert total_usage(r.usage for r in reports) == every
    assert [r.usage["extract"].calls for r in reports] == [1, 1, 1]
    assert sum(r.usage["check"].calls for r in reports) == len(judge.calls) == 3
    counted = sum(u["input_tokens"] for u in langchain_counter.usage_metadata.values())
    assert counted == every.input_tokens  # a user's own get_usage_metadata_callback still sees every call


def test_cached_extraction_costs_nothing_and_raw_mode_has_no_extract_stage() -> None:
    extractor = MeteredChatModel(responses=[KG])
    engine = GraphEval(llm=extractor, scorer=KeywordScorer(), rule="paper")
    engine.evaluate(CONTEXT, OUTPUT)
    again = engine.evaluate(CONTEXT, OUTPUT)
    assert again.usage["extract"] == StageUsage() and again.usage["check"] == StageUsage()
    raw = GraphEval(llm=extractor, scorer=KeywordScorer(), mode="raw").evaluate(CONTEXT, OUTPUT)
    assert set(raw.usage) == {"check"}


def test_two_stage_rows_carry_the_extraction_usage_into_the_report() -> None:
    extractor = MeteredChatModel(responses=[KG])
    engine = GraphEval(llm=extractor, scorer=KeywordScorer(), rule="paper", cache=False)
    [row] = engine.extract_rows([{"context": CONTEXT, "output": OUTPUT}])
    assert not isinstance(row, Report)
    row = type(row).model_validate_json(row.model_dump_json())  # as if checked in another process
    [report] = engine.check_rows([row])
    assert report.usage["extract"] == _tokens(extractor, extractor.calls)


def test_a_model_without_usage_metadata_counts_calls_and_unknown_tokens() -> None:
    engine = GraphEval(llm=ScriptedChatModel(responses=[KG]), scorer=KeywordScorer(), rule="paper")
    report = engine.evaluate(CONTEXT, OUTPUT)
    assert report.usage["extract"] == StageUsage(calls=1, input_tokens=None, output_tokens=None)
    assert report.cost({"input": 1.0, "output": 1.0}) is None


def test_cost_from_prices_and_from_reported_costs() -> None:
    usage = {"extract": StageUsage(calls=2, input_tokens=2_000_000, output_tokens=500_000),
             "check": StageUsage(calls=1, input_tokens=None, output_tokens=None, cost=0.25)}
    assert usage_cost(usage, {"input": 0.5, "output": 2.0}) == pytest.approx(1.0 + 1.0 + 0.25)
    assert usage_cost(usage) is None
    assert usage_cost({}) == 0.0
    shares = StageUsage(calls=3, input_tokens=10, output_tokens=7, cost=0.3).split([2, 1, 1])
    assert sum(shares, StageUsage()).model_dump() == pytest.approx(
        StageUsage(calls=3, input_tokens=10, output_tokens=7, cost=0.3).model_dump())


def test_cli_summary_shows_the_runs_totals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grapheval_plugins import cli, models

    extractor = MeteredChatModel(responses=[KG])
    monkeypatch.setattr(models, "resolve_llm", lambda spec=None, **_: extractor)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps({"id": str(i), "context": CONTEXT, "output": f"{OUTPUT} {i}"}) + "\n"
                              for i in range(2)))
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(cli.app, ["evaluate", str(source), "-o", str(out), "--llm", "fake", "--rule",
                                          "paper", "--scorer", "py:grapheval_plugins.testing:KeywordScorer"])
    assert result.exit_code == 0, result.output
    total = _tokens(extractor, extractor.calls)
    text = " ".join(result.output.split())
    assert f"chat-model calls │ {total.calls}" in text
    assert f"prompt tokens │ {total.input_tokens}" in text
    assert f"completion tokens │ {total.output_tokens}" in text
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert sum(r["usage"]["extract"]["input_tokens"] for r in written) == total.input_tokens
    assert "cost" not in text  # the fake model reports no cost, and no prices were given


def test_cli_summary_prices_the_runs_tokens(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grapheval_plugins import cli, models

    extractor = MeteredChatModel(responses=[KG])
    monkeypatch.setattr(models, "resolve_llm", lambda spec=None, **_: extractor)
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": "1", "context": CONTEXT, "output": OUTPUT}) + "\n")
    result = CliRunner().invoke(cli.app, ["evaluate", str(source), "-o", str(tmp_path / "out.jsonl"), "--llm", "fake",
                                          "--rule", "paper", "--prices", "0.5", "2",
                                          "--scorer", "py:grapheval_plugins.testing:KeywordScorer"])
    assert result.exit_code == 0, result.output
    total = _tokens(extractor, extractor.calls)
    expected = (total.input_tokens * 0.5 + total.output_tokens * 2.0) / 1e6
    assert f"cost (USD, at --prices) │ {expected:.6f}" in " ".join(result.output.split())


def test_the_html_run_page_shows_the_totals() -> None:
    pytest.importorskip("jinja2")
    from grapheval_plugins.report import run_html

    extractor = MeteredChatModel(responses=[KG])
    engine = GraphEval(llm=extractor, scorer=KeywordScorer(), rule="paper", cache=False)
    reports = engine.evaluate_many([(CONTEXT, OUTPUT), (CONTEXT, OUTPUT + " Really.")], show_progress=False)
    total = _tokens(extractor, extractor.calls)
    page = " ".join(run_html(reports).split())
    assert (f'<b>2</b><span>chat-model calls · {total.input_tokens:,} prompt / {total.output_tokens:,} completion '
            "tokens</span>") in page
    assert "Chat-model calls by stage: extract 2 (" in page and "check 0 (0 prompt" in page
    old = [r.model_copy(update={"usage": {}}) for r in reports]  # reports written before usage was recorded
    assert "chat-model calls" not in run_html(old)


FACTS = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
BAD = "Marie Curie was born in Warsaw and won three Nobel Prizes."


def _correcting(messages: list[BaseMessage]) -> str:
    """Prompt A extracts; prompts B and C (GraphCorrect as published) answer with the fix."""
    last = message_text(messages[-1])
    if "<old_triple>" in last:
        return "<context>Marie Curie was born in Warsaw and won two Nobel Prizes.</context>"
    if "<triple>" in last:
        return '["Marie Curie", "won", "two Nobel Prizes"]'
    number = "three" if "three Nobel" in last else "two"
    return f'<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "{number} Nobel Prizes"]]</python>'


def _spent(llm: MeteredChatModel, calls: list[list[BaseMessage]]) -> StageUsage:
    return StageUsage(calls=len(calls), input_tokens=sum(sum(len(message_text(x)) for x in m) for m in calls),
                      output_tokens=sum(len(_correcting(m)) for m in calls))


def test_a_correction_counts_its_own_calls_and_the_detection_keeps_its_own() -> None:
    pytest.importorskip("grapheval_plugins.correct")
    from grapheval_plugins.correct import GraphCorrect

    llm = MeteredChatModel(respond=_correcting)
    engine = GraphEval(llm=llm, scorer=KeywordScorer(), rule="paper", cache=False)
    result = GraphCorrect(engine, strategy="paper", rouge=False).correct(FACTS, BAD)
    assert result.status == "corrected" and result.detection is not None
    assert result.detection.usage["extract"] == _spent(llm, llm.calls[:1])
    assert result.usage == {"correct": _spent(llm, llm.calls[1:])}  # prompts B, C and the re-check's extraction
    assert result.usage["correct"].calls == len(llm.calls) - 1 >= 3


def test_cli_correct_summary_shows_the_runs_totals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("grapheval_plugins.correct")
    from grapheval_plugins import cli, models

    llm = MeteredChatModel(respond=_correcting)
    monkeypatch.setattr(models, "resolve_llm", lambda spec=None, **_: llm)
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps({"id": "1", "context": FACTS, "output": BAD}) + "\n")
    result = CliRunner().invoke(cli.app, ["correct", str(source), "-o", str(tmp_path / "out.jsonl"), "--llm", "fake",
                                          "--strategy", "paper", "--scorer", "py:grapheval_plugins.testing:KeywordScorer"])
    assert result.exit_code == 0, result.output
    total = _spent(llm, llm.calls)
    text = " ".join(result.output.split())
    assert f"chat-model calls │ {total.calls}" in text and f"prompt tokens │ {total.input_tokens}" in text


def test_parquet_output_keeps_the_usage(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    from grapheval_plugins.integrations.ray import _write_parquet, read_reports

    extractor = MeteredChatModel(responses=[KG])
    report = GraphEval(llm=extractor, scorer=KeywordScorer(), rule="paper").evaluate(CONTEXT, OUTPUT)
    path = tmp_path / "reports.parquet"
    _write_parquet(path, [report])
    assert read_reports(path)[0].usage == report.usage == {"extract": _tokens(extractor, extractor.calls),
                                                          "check": StageUsage()}


def test_a_reports_own_page_lists_its_calls_by_stage() -> None:
    pytest.importorskip("jinja2")
    report = Report(output="x", mode="raw", threshold=0.5, hallucinated=False, score=0.9,
                    usage={"check": StageUsage(calls=2, input_tokens=1200, output_tokens=None)})
    page = " ".join(report.to_html().split())
    assert "Chat-model calls: check 2 (1,200 prompt / not reported completion tokens)" in page
