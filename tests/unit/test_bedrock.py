"""The Bedrock path, offline: the Converse request sent, the reply parsed, throttling retried by botocore.

Two stubs, no network: a ``MagicMock`` client (as langchain-aws's own unit tests do) for the request arguments,
and a real ``bedrock-runtime`` client whose HTTP send is answered by a ``before-send`` hook, so botocore's own
serialisation, retry handler and response parser run.
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any
from unittest.mock import MagicMock

import pytest

pytest.importorskip("langchain_aws")
pytest.importorskip("boto3")

import botocore.endpoint  # noqa: E402
from botocore.awsrequest import AWSResponse  # noqa: E402
from botocore.exceptions import ClientError  # noqa: E402
from langchain_aws import ChatBedrockConverse  # noqa: E402

from grapheval_plugins import GraphEval, InputError, MissingDependencyError, ModelLoadError, resolve_llm  # noqa: E402
from grapheval_plugins.bedrock import (  # noqa: E402
    PAPER_SAMPLING,
    REPEATABLE_SAMPLING,
    Sampling,
    chat_bedrock,
    top_k_request_fields,
)
from grapheval_plugins.integrations.langchain import GraphEvalRunnable  # noqa: E402
from grapheval_plugins.testing import KeywordScorer  # noqa: E402

MODEL = "anthropic.claude-v2"
TRIPLES = '<python>[["Marie Curie", "born in", "Berlin"]]</python>'


@pytest.fixture(autouse=True)
def fake_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Fake credentials and region; no shared config files, no instance metadata lookups."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def converse_reply(text: str) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": text}]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 12, "outputTokens": 7, "totalTokens": 19},
        "metrics": {"latencyMs": 42},
    }


def mock_client(text: str = TRIPLES) -> MagicMock:
    client = MagicMock()
    client.converse.return_value = converse_reply(text)
    return client


# --------------------------------------------------------------------------------------------- request shape
def test_paper_sampling_request_and_reply() -> None:
    client = mock_client("hello")
    llm = chat_bedrock(MODEL, sampling=PAPER_SAMPLING, client=client, bedrock_client=MagicMock())
    answer = llm.invoke("Say hello.")
    assert answer.content == "hello"
    assert answer.usage_metadata["total_tokens"] == 19
    request = client.converse.call_args.kwargs
    assert request["modelId"] == MODEL
    assert request["messages"] == [{"role": "user", "content": [{"text": "Say hello."}]}]
    assert request["inferenceConfig"] == {"maxTokens": 2048, "temperature": 1.0, "topP": 1.0}
    assert request["additionalModelRequestFields"] == {"top_k": 250}


def test_default_sampling_is_repeatable_and_overrides_apply() -> None:
    client = mock_client("x")
    chat_bedrock(MODEL, client=client, bedrock_client=MagicMock()).invoke("q")
    request = client.converse.call_args.kwargs
    assert request["inferenceConfig"] == {"maxTokens": 2048, "temperature": 0.0}
    assert "additionalModelRequestFields" not in request
    assert REPEATABLE_SAMPLING.as_dict() == {"temperature": 0.0}

    client = mock_client("x")
    chat_bedrock(MODEL, sampling="paper", temperature=0.3, max_tokens=None, client=client,
                 bedrock_client=MagicMock(), additional_model_request_fields={"stop_sequences": ["\n\nHuman:"]}).invoke("q")
    request = client.converse.call_args.kwargs
    assert request["inferenceConfig"] == {"temperature": 0.3, "topP": 1.0}
    assert request["additionalModelRequestFields"] == {"top_k": 250, "stop_sequences": ["\n\nHuman:"]}


def test_model_defaults_preset_sends_no_sampling() -> None:
    client = mock_client("x")
    chat_bedrock(MODEL, sampling="default", max_tokens=None, client=client, bedrock_client=MagicMock()).invoke("q")
    request = client.converse.call_args.kwargs
    assert request.get("inferenceConfig") == {} and "additionalModelRequestFields" not in request


@pytest.mark.parametrize(
    ("model_id", "fields"),
    [
        ("anthropic.claude-3-haiku-20240307-v1:0", {"top_k": 250}),
        ("us.anthropic.claude-3-5-haiku-20241022-v1:0", {"top_k": 250}),
        ("mistral.mistral-large-2402-v1:0", {"top_k": 250}),
        ("cohere.command-r-v1:0", {"k": 250}),
        ("eu.amazon.nova-pro-v1:0", {"inferenceConfig": {"topK": 250}}),
    ],
)
def test_top_k_goes_where_the_provider_reads_it(model_id: str, fields: dict[str, Any]) -> None:
    assert top_k_request_fields(model_id, 250) == fields


def test_top_k_for_a_provider_without_it_is_an_error() -> None:
    with pytest.raises(InputError, match="no known top-k parameter for Bedrock provider 'meta'"):
        chat_bedrock("meta.llama3-8b-instruct-v1:0", sampling=PAPER_SAMPLING, client=mock_client(),
                     bedrock_client=MagicMock())
    # an ARN names no provider: the caller's provider= is used
    assert top_k_request_fields("arn:aws:bedrock:us-east-1:1:provisioned-model/x", 5, provider="anthropic") == {
        "top_k": 5}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sampling": "greedy"}, "unknown preset 'greedy'"),
        ({"sampling": {"temperature": 0.5, "top_q": 1}}, r"unknown settings \['top_q'\]"),
        ({"temperature": 1.5}, r"temperature: must be in \[0, 1\]"),
        ({"top_k": 0}, "top_k: must be a positive integer"),
        ({"max_attempts": 0}, "max_attempts: must be >= 1"),
        ({"sampling": 0.5}, "expected a Sampling"),
    ],
)
def test_bad_settings_are_input_errors(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        chat_bedrock(MODEL, client=mock_client(), bedrock_client=MagicMock(), **kwargs)
    with pytest.raises(InputError, match="must be in"):
        Sampling(top_p=-0.1)


def test_bedrock_spec_resolves_with_options() -> None:
    client = mock_client("x")
    llm = resolve_llm(f"bedrock:{MODEL}", sampling="paper", client=client, bedrock_client=MagicMock())
    assert isinstance(llm, ChatBedrockConverse)
    assert llm.model_id == MODEL and llm.temperature == 1.0 and llm.top_p == 1.0
    assert llm.additional_model_request_fields == {"top_k": 250}
    # a model id with a colon survives the spec prefix
    llm = resolve_llm("bedrock:anthropic.claude-3-haiku-20240307-v1:0", client=client, bedrock_client=MagicMock())
    assert llm.model_id == "anthropic.claude-3-haiku-20240307-v1:0"


def test_created_client_retries_throttling_adaptively() -> None:
    llm = chat_bedrock(MODEL, region_name="eu-west-1")
    assert llm.client.meta.region_name == "eu-west-1"
    assert llm.client.meta.config.retries == {"mode": "adaptive", "total_max_attempts": 8}
    from botocore.config import Config

    mine = chat_bedrock(MODEL, config=Config(retries={"mode": "standard", "total_max_attempts": 3},
                                             read_timeout=300))
    assert mine.client.meta.config.retries == {"mode": "standard", "total_max_attempts": 3}
    assert mine.client.meta.config.read_timeout == 300


def test_missing_region_is_a_model_load_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    with pytest.raises(ModelLoadError, match="AWS_REGION"):
        chat_bedrock(MODEL)


def test_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_aws", None)
    with pytest.raises(MissingDependencyError, match=r"grapheval-plugins\[aws\]"):
        chat_bedrock(MODEL)


# --------------------------------------------------------------------------------------------- wire level
class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def stream(self, **kwargs: Any) -> Any:
        yield self.data

    def read(self, *args: Any, **kwargs: Any) -> bytes:
        return self.data


class FakeBedrock:
    """Answers the Converse HTTP calls of a real botocore client: scripted throttles, then a reply."""

    def __init__(self, throttles: int, text: str = TRIPLES) -> None:
        self.throttles = throttles
        self.text = text
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, request: Any, **kwargs: Any) -> AWSResponse:
        self.requests.append((request.url, json.loads(request.body)))
        if len(self.requests) <= self.throttles:
            body = json.dumps({"message": "Too many requests, please wait before trying again."}).encode()
            headers = {"x-amzn-ErrorType": "ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/",
                       "Content-Type": "application/json"}
            return AWSResponse(request.url, 429, headers, _Body(body))
        body = json.dumps(converse_reply(self.text)).encode()
        return AWSResponse(request.url, 200, {"Content-Type": "application/json"}, _Body(body))


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """botocore's retry backoff delays, recorded instead of slept."""
    delays: list[float] = []

    class _Clock:  # only botocore.endpoint's view of ``time``: other threads keep the real sleep
        sleep = staticmethod(delays.append)

        def __getattr__(self, name: str) -> Any:
            return getattr(time, name)

    monkeypatch.setattr(botocore.endpoint, "time", _Clock())
    return delays


def wired(fake: FakeBedrock, **kwargs: Any) -> ChatBedrockConverse:
    llm = chat_bedrock(MODEL, sampling=PAPER_SAMPLING, **kwargs)
    llm.client.meta.events.register("before-send.bedrock-runtime.Converse", fake)
    return llm


def test_throttled_once_then_success(sleeps: list[float]) -> None:
    fake = FakeBedrock(throttles=1, text="hello")
    answer = wired(fake).invoke("Say hello.")
    assert answer.content == "hello"
    assert len(fake.requests) == 2 and len(sleeps) == 1 and 0 <= sleeps[0] <= 1.0  # one backoff, jittered
    url, body = fake.requests[-1]
    assert url == f"https://bedrock-runtime.us-east-1.amazonaws.com/model/{MODEL}/converse"
    assert body == {
        "messages": [{"role": "user", "content": [{"text": "Say hello."}]}],
        "system": [],
        "inferenceConfig": {"maxTokens": 2048, "temperature": 1.0, "topP": 1.0},
        "additionalModelRequestFields": {"top_k": 250},
    }


def test_throttling_gives_up_after_max_attempts(sleeps: list[float]) -> None:
    fake = FakeBedrock(throttles=99)
    with pytest.raises(ClientError, match="ThrottlingException"):
        wired(fake, max_attempts=3, retry_mode="standard").invoke("q")
    assert len(fake.requests) == 3 and len(sleeps) == 2


async def test_grapheval_over_bedrock_end_to_end(sleeps: list[float]) -> None:
    """Extraction through a throttled Bedrock model, async, inside the Runnable: only the output goes to Bedrock."""
    fake = FakeBedrock(throttles=1)
    engine = GraphEval(llm=wired(fake), scorer=KeywordScorer())
    report = await GraphEvalRunnable(engine, report_only=True).ainvoke(
        {"context": "Marie Curie was born in Warsaw.", "answer": "Marie Curie was born in Berlin."})
    assert report.hallucinated is True
    assert [c.triple.as_list() for c in report.unsupported] == [["Marie Curie", "born in", "Berlin"]]
    assert report.llm == f"ChatBedrockConverse({MODEL})"
    sent = json.dumps(fake.requests[-1][1])
    assert "Marie Curie was born in Berlin." in sent and "Warsaw" not in sent  # the context never goes to the LLM
