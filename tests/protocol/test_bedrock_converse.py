"""The paper's Bedrock setup over the real boto3 + langchain-aws stack, against a Converse emulator on 127.0.0.1."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import PAPER_MODEL
from protocol_servers import BedrockConverseServer

from grapheval_plugins import GraphEval
from grapheval_plugins.bedrock import chat_bedrock
from grapheval_plugins.retry import RetryPolicy

ROWS = [
    {"id": "curie", "context": "Marie Curie was born in Warsaw. She won two Nobel Prizes.",
     "output": "Marie Curie was born in Warsaw."},
    {"id": "tower", "context": "The Eiffel Tower stands in Paris. It opened in 1889.",
     "output": "The Eiffel Tower stands in Rome."},
    {"id": "river", "context": "The Nile flows through Egypt and Sudan.",
     "output": "The Nile flows through Egypt."},
]
EXPECTED = {"curie": False, "tower": True, "river": False}
"""The scripted verdicts: the tower row's triple names a city the context does not."""

QUICK = RetryPolicy(attempts=2, initial_s=0.01, jitter_s=0.0)
"""Extraction retries kept short in fault tests (two attempts, 10 ms apart)."""


def _verdicts(reports: list) -> dict[str, bool | None]:
    return {r.id: r.hallucinated for r in reports}


def test_paper_preset_by_spec_runs_end_to_end(bedrock: BedrockConverseServer) -> None:
    """``bedrock:anthropic.claude-v2`` (the docs' and CLI's spec), reached by boto3 through
    ``AWS_ENDPOINT_URL_BEDROCK_RUNTIME``, extracts and judges every row."""
    spec = f"bedrock:{PAPER_MODEL}"
    engine = GraphEval(llm=spec)
    reports = engine.evaluate_many(ROWS, id_key="id", show_progress=False)

    assert _verdicts(reports) == EXPECTED
    assert all(r.ok for r in reports)
    tower = next(r for r in reports if r.id == "tower")
    assert [c.triple.as_list() for c in tower.unsupported] == [["The Eiffel", "Tower", "stands in Rome"]]
    assert set(bedrock.model_ids()) == {PAPER_MODEL}
    extraction = bedrock.calls("<input>")
    assert len(extraction) == len(ROWS)  # one Converse call per row, no retry
    first = extraction[0]
    assert first.body["inferenceConfig"] == {"maxTokens": 2048, "temperature": 0.0}
    assert first.body["system"] and first.body["messages"][-1]["role"] == "user"
    assert "Credential=test/" in first.headers["authorization"] and "/us-east-1/bedrock/" in first.headers["authorization"]
    # the judge's calls went to the same endpoint; Converse gives no log-probabilities, so each prompt is asked five
    # times in all, the four more sampled at temperature 1.0
    temperatures: dict[str, list[float]] = {}
    for call in bedrock.calls("Claims:\n"):
        temperatures.setdefault(call.prompt, []).append(call.body["inferenceConfig"]["temperature"])
    assert temperatures and all(sorted(t) == [0.0, 1.0, 1.0, 1.0, 1.0] for t in temperatures.values()), temperatures


def test_paper_sampling_reaches_the_service(bedrock: BedrockConverseServer) -> None:
    """The paper's sampling (temperature 1, top_p 1, top_k 250) arrives in the Converse request as the service
    expects it: ``inferenceConfig`` and Anthropic's ``top_k`` in ``additionalModelRequestFields``."""
    chat = chat_bedrock(PAPER_MODEL, sampling="paper", region_name="us-east-1", endpoint_url=bedrock.url,
                        aws_access_key_id="test", aws_secret_access_key="test")
    engine = GraphEval(llm=chat)
    report = engine.evaluate(context=ROWS[1]["context"], output=ROWS[1]["output"])

    assert report.hallucinated is True
    body = bedrock.calls("<input>")[0].body
    assert body["inferenceConfig"] == {"maxTokens": 2048, "temperature": 1.0, "topP": 1.0}
    assert body["additionalModelRequestFields"] == {"top_k": 250}


@pytest.mark.parametrize("fault", ["throttle", "500", "503", "reset", "truncated"])
def test_a_transient_fault_is_retried_and_the_row_completes(bedrock: BedrockConverseServer, fault: str) -> None:
    """429 (ThrottlingException with Retry-After), 500, 503, a reset connection and a truncated body, once, on one
    row's extraction: the call is made again and every row gets the verdict it gets without the fault."""
    bedrock.fault(fault, times=1, when="<input>The Eiffel")
    chat = chat_bedrock(PAPER_MODEL, region_name="us-east-1", max_attempts=3)
    reports = GraphEval(llm=chat, retry=QUICK).evaluate_many(ROWS, id_key="id", show_progress=False)

    assert _verdicts(reports) == EXPECTED
    tower = bedrock.calls("<input>The Eiffel")
    assert [c.fault for c in tower] == [fault, None]


def test_a_throttle_s_retry_after_is_waited_before_the_retry(bedrock: BedrockConverseServer) -> None:
    """A 429 ``ThrottlingException`` with ``Retry-After: 2`` (botocore's own retries off): the extractor's retry,
    whose backoff is 10 ms, waits the two seconds the service asked for, read from the error's HTTP headers."""
    bedrock.fault("throttle", times=1, when="<input>The Eiffel", seconds=2)
    chat = chat_bedrock(PAPER_MODEL, region_name="us-east-1", max_attempts=1)
    report = GraphEval(llm=chat, retry=QUICK).evaluate(context=ROWS[1]["context"], output=ROWS[1]["output"])

    assert report.hallucinated is True
    throttled, retried = bedrock.calls("<input>The Eiffel")
    assert (throttled.fault, retried.fault) == ("throttle", None)
    assert retried.at - throttled.at >= 2.0, retried.at - throttled.at


def test_a_timeout_is_retried(bedrock: BedrockConverseServer) -> None:
    """An answer slower than the client's read timeout: botocore gives up on it and asks again."""
    from botocore.config import Config

    bedrock.timeout_s = 3.0
    bedrock.fault("timeout", times=1, when="<input>The Eiffel")
    chat = chat_bedrock(PAPER_MODEL, region_name="us-east-1", max_attempts=2,
                        config=Config(read_timeout=0.5, connect_timeout=1))
    started = time.monotonic()
    report = GraphEval(llm=chat, retry=QUICK).evaluate(
        context=ROWS[1]["context"], output=ROWS[1]["output"])

    assert report.hallucinated is True
    assert [c.fault for c in bedrock.calls("<input>The Eiffel")] == ["timeout", None]
    assert time.monotonic() - started < 3.0  # the client did not wait for the slow answer


@pytest.mark.parametrize("fault", ["500", "throttle", "reset"])
def test_a_lasting_fault_ends_in_a_row_error_and_the_batch_goes_on(
        bedrock: BedrockConverseServer, quick_botocore_backoff: None, fault: str) -> None:
    """A fault on every call about one row: bounded attempts (botocore's 2 × the extractor's 2), then that row's
    report carries the error and its reason; the other rows are decided as usual."""
    bedrock.fault(fault, times=1000, when="Rome")
    chat = chat_bedrock(PAPER_MODEL, region_name="us-east-1", max_attempts=2)
    reports = GraphEval(llm=chat, retry=QUICK).evaluate_many(ROWS, id_key="id", show_progress=False)

    by_id = {r.id: r for r in reports}
    assert {k: v for k, v in _verdicts(reports).items() if k != "tower"} == {"curie": False, "river": False}
    failed = by_id["tower"]
    assert not failed.ok and failed.score is None
    reason = {"500": "InternalServerException", "throttle": "ThrottlingException", "reset": "Connection"}[fault]
    assert reason in failed.errors[0].message, failed.errors[0].message
    assert len(bedrock.calls("<input>The Eiffel")) == 2 * 2


@pytest.mark.parametrize("fault", ["empty", "refusal"])
def test_an_unusable_answer_ends_in_a_row_error_with_its_reason(bedrock: BedrockConverseServer, fault: str) -> None:
    """An empty answer, or a refusal (``stopReason: content_filtered``), to every call about one row: the
    extractor asks again, then falls back to the whole output as one claim; the judge asks again once, then the
    claim has no verdict, so the row has none, with the answer quoted; the other rows are decided."""
    bedrock.fault(fault, times=1000, when="Rome")
    chat = chat_bedrock(PAPER_MODEL, region_name="us-east-1", max_attempts=2)
    reports = GraphEval(llm=chat, retry=QUICK).evaluate_many(ROWS, id_key="id", show_progress=False)

    by_id = {r.id: r for r in reports}
    assert by_id["curie"].hallucinated is False and by_id["river"].hallucinated is False
    failed = by_id["tower"]
    assert not failed.ok
    assert any("no verdict" in e.message for e in failed.errors), failed.errors
    if fault == "refusal":  # the answer and the provider's stop reason are quoted
        assert any("I'm sorry" in e.message and "content_filtered" in e.message for e in failed.errors), failed.errors
    assert len(bedrock.calls("Rome")) <= 2 + 2  # two extraction attempts, the judge's call and its one retry


def test_content_as_a_list_of_blocks(bedrock: BedrockConverseServer) -> None:
    """Answers split over several text blocks after a reasoning block read as their joined text."""
    bedrock.fault("blocks", times=1000)
    chat = chat_bedrock(PAPER_MODEL, region_name="us-east-1")
    reports = GraphEval(llm=chat).evaluate_many(ROWS, id_key="id", show_progress=False)

    assert _verdicts(reports) == EXPECTED
    assert all(c.fault == "blocks" for c in bedrock.calls())


def test_a_resumed_cli_run_completes_exactly_the_failed_rows(
        bedrock: BedrockConverseServer, quick_botocore_backoff: None, tmp_path: Path) -> None:
    """``grapheval evaluate --llm bedrock:...``: a row whose calls all fail is written with its error, the others
    with their verdicts; run again, only the failed row is asked about, and the file then holds every verdict."""
    from typer.testing import CliRunner

    from grapheval_plugins.cli import app

    rows, out = tmp_path / "rows.jsonl", tmp_path / "reports.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    spec = f"bedrock:{PAPER_MODEL}"
    args = ["evaluate", str(rows), "-o", str(out), "--llm", spec]
    bedrock.fault("503", times=10**6, when="Rome")

    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["id"]: r["ok"] for r in written} == {"curie": True, "tower": False, "river": True}
    assert "ServiceUnavailableException" in next(r for r in written if r["id"] == "tower")["errors"][0]["message"]

    bedrock.clear()
    second = CliRunner().invoke(app, args)
    assert second.exit_code == 0, second.output
    asked = bedrock.calls()
    assert asked and all("Rome" in c.prompt for c in asked)  # only the failed row
    final = {r["id"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert sorted(final) == sorted(EXPECTED)
    assert {k: r["hallucinated"] for k, r in final.items()} == EXPECTED


def test_the_rate_limit_holds_under_concurrency(bedrock: BedrockConverseServer) -> None:
    """Eight rows at eight calls in flight through one :class:`RateLimitedChatModel` at 300 requests a minute
    (a burst of 2): the server sees at most 5 requests a second after the burst."""
    from grapheval_plugins.ratelimit import RateLimitedChatModel

    rpm, burst = 300.0, 2
    chat = RateLimitedChatModel(chat_bedrock(PAPER_MODEL, region_name="us-east-1"), requests_per_minute=rpm,
                                burst_seconds=burst * 60 / rpm)
    rows = [dict(ROWS[i % 3], id=f"r{i}", output=ROWS[i % 3]["output"].replace(".", f" in {1900 + i}."))
            for i in range(8)]
    engine = GraphEval(llm=chat, max_concurrency=8, cache=False)
    reports = engine.evaluate_many(rows, id_key="id", show_progress=False)

    assert all(r.ok for r in reports)
    times = sorted(c.at for c in bedrock.calls())
    assert len(times) >= 9
    # n requests need (n - burst) refills at rpm/60 a second: the measured span may not be shorter
    span = times[-1] - times[0]
    assert span >= (len(times) - burst) / (rpm / 60) * 0.95, (len(times), span)
    for i in range(len(times) - 6):  # any 6 consecutive requests span at least (6 - burst) refills
        assert times[i + 5] - times[i] >= (6 - burst) / (rpm / 60) * 0.9


def test_a_rejected_request_is_not_retried(bedrock: BedrockConverseServer) -> None:
    """A 400 ``ValidationException`` cannot succeed on a second identical call: one request, then the row's error
    (botocore's ``ClientError`` carries its status in ``response["ResponseMetadata"]``)."""
    bedrock.fault("invalid", times=1000, when="<input>The Eiffel")
    chat = chat_bedrock(PAPER_MODEL, region_name="us-east-1")
    report = GraphEval(llm=chat).evaluate(context=ROWS[1]["context"], output=ROWS[1]["output"])

    assert not report.ok and "ValidationException" in report.errors[0].message
    assert len(bedrock.calls("<input>The Eiffel")) == 1
