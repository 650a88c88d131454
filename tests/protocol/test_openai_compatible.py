"""An OpenAI-compatible server with a real model: llama-cpp-python's own ``llama_cpp.server`` serving the 0.5B GGUF
on 127.0.0.1 (one subprocess for the session), reached the way users reach such a server: LangChain's
``ChatOpenAI(base_url=...)``, DeepEval's ``LocalModel(base_url=...)`` and Ragas's ``llm_factory`` over an
``openai.OpenAI`` client. One short row each, bounded ``max_tokens``.

The server loads the model with ``logits_all`` (token log-probabilities in chat completions) and with llama.cpp's
weight repacking off (``llama_server.py``), as grapheval's own loader does."""

from __future__ import annotations

import math
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from grapheval_plugins import GraphEval
from grapheval_plugins.check.judge import VERDICT_P_UNSUPPORTED
from grapheval_plugins.check.llm_judge import LLMJudge

pytestmark = pytest.mark.integration

MODEL = "qwen2.5-coder-0.5b"
CONTEXT = "The Eiffel Tower stands in Paris. It opened in 1889."
OUTPUT = "The Eiffel Tower stands in Rome."
MAX_TOKENS = 128
HERE = Path(__file__).resolve().parent


def _die_with_parent() -> None:
    """In the server's process before it starts (Linux): killed when the test process ends, even by a signal that
    skips the fixture's teardown."""
    import ctypes
    import signal

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # pragma: no cover - not Linux: the fixture's teardown still stops it
        pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def openai_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``llama_cpp.server`` on a free port of 127.0.0.1, stopped at the end of the session; its base URL."""
    pytest.importorskip("llama_cpp.server.app", reason="needs llama-cpp-python's server extra (dev extra)")
    from grapheval_plugins.local.weights import resolve_model_path

    gguf = resolve_model_path(MODEL, hub=False, show_progress=False)
    port = _free_port()
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    command = [sys.executable, str(HERE / "llama_server.py"), "--model", str(gguf), "--model_alias", MODEL,
               "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "2048", "--n_threads", "2",
               "--logits_all", "true", "--seed", "0"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    base_url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited with {process.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{base_url}/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"llama_cpp.server did not answer within 120 s: {log.read_text()[-2000:]}")
                time.sleep(0.25)
        yield base_url
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)


@pytest.fixture(scope="session")
def chat(openai_server: str):  # type: ignore[no-untyped-def]
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(base_url=openai_server, api_key="test", model=MODEL, temperature=0, max_tokens=MAX_TOKENS,
                      timeout=300, max_retries=1)


def test_langchain_openai_extracts_judges_with_logprobs_and_corrects(chat) -> None:  # type: ignore[no-untyped-def]
    """Extraction, the chat judge with the server's real token log-probabilities, and a correction."""
    from grapheval_plugins.correct import GraphCorrect

    judge = LLMJudge(chat, request_logprobs=5)
    engine = GraphEval(llm=chat, scorer=judge, rule="paper")
    report = engine.evaluate(context=CONTEXT, output=OUTPUT)

    assert report.extraction is not None and report.extraction.triples, report.extraction
    judged = [c for c in report.claims if not math.isnan(c.p_unsupported)]
    assert judged, report.errors
    # read from the label log-probabilities, not the fixed P(unsupported) of a bare verdict
    assert all(round(c.p_unsupported, 6) not in set(VERDICT_P_UNSUPPORTED.values()) for c in judged), judged

    corrected = GraphCorrect(grapheval=engine, llm=chat, strategy="direct").correct(CONTEXT, OUTPUT, report=report)
    assert not corrected.errors, corrected.errors
    assert corrected.corrected.strip()


def test_deepeval_local_model(openai_server: str, chat) -> None:  # type: ignore[no-untyped-def]
    """DeepEval's own OpenAI-compatible model class extracts (its ``(text, cost)`` answers are read) and judges."""
    from deepeval.models import LocalModel
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    model = LocalModel(model=MODEL, base_url=openai_server, api_key="test", temperature=0,
                       generation_kwargs={"max_tokens": MAX_TOKENS})
    metric = GraphEvalMetric(model=model, rule="paper")
    score = metric.measure(LLMTestCase(input="Where is the Eiffel Tower?", actual_output=OUTPUT,
                                       retrieval_context=[CONTEXT]))

    assert metric.error is None, metric.error
    assert 0.0 <= score <= 1.0 and metric.reason
    # the one model also judged, with the server's token log-probabilities (through LocalModel's own client)
    assert metric.engine.scorer.logprobs_returned is True
    assert metric.evaluation_cost == 0.0  # LocalModel's own price


def test_ragas_llm_factory(openai_server: str, chat) -> None:  # type: ignore[no-untyped-def]
    """Ragas's ``llm_factory`` over an ``openai`` client (Instructor, JSON mode) fills the triples and judges."""
    import openai
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms import llm_factory

    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness

    ragas_llm = llm_factory(MODEL, client=openai.AsyncOpenAI(base_url=openai_server, api_key="test"),
                            max_tokens=MAX_TOKENS, temperature=0)
    metric = GraphEvalFaithfulness(llm=ragas_llm, rule="paper")
    sample = SingleTurnSample(user_input="Where is the Eiffel Tower?", response=OUTPUT, retrieved_contexts=[CONTEXT])
    score = metric.single_turn_score(sample)

    assert 0.0 <= score <= 1.0
    # the one model also judged, with the server's token log-probabilities (through the client Instructor wraps)
    assert metric._held.scorer.logprobs_returned is True


def test_langchain_runnable(chat) -> None:  # type: ignore[no-untyped-def]
    """The LangChain host: the runnable after a RAG chain's answer."""
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable

    runnable = GraphEvalRunnable(llm=chat, rule="paper")
    result = runnable.invoke({"answer": OUTPUT, "context": CONTEXT})

    report = result["grapheval"]
    assert report.extraction is not None and report.extraction.triples
