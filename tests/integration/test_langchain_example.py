"""examples/langchain/rag_chain.py end to end with the real local 0.5B model: retrieve, answer, check, correct.

Slow on a small CPU (minutes): one question plus the planted wrong answer.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

MODEL = "local:qwen2.5-coder-0.5b"
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langchain" / "rag_chain.py"


@pytest.fixture(scope="module")
def example() -> Any:
    pytest.importorskip("rank_bm25", reason="the example's BM25 retriever needs rank-bm25")
    pytest.importorskip("langchain_community", reason="the example's BM25 retriever needs langchain-community")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from grapheval_plugins import GraphEvalError, resolve_llm

    try:
        resolve_llm(MODEL).load()
    except (GraphEvalError, ImportError, OSError, ValueError) as exc:
        pytest.skip(f"the local model {MODEL} cannot be loaded here: {type(exc).__name__}: {exc}")
    spec = importlib.util.spec_from_file_location("rag_chain_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_rag_example_runs_offline_end_to_end(example: Any, capsys: pytest.CaptureFixture[str]) -> None:
    question = "Who founded Nordlys Bikes, and when?"
    assert example.main(["--json", "--llm", MODEL, "--scorer", f"judge:{MODEL}", "--question", question]) == 0
    results = json.loads(capsys.readouterr().out)
    asked, planted = results

    assert asked["question"] == question
    assert "history" in asked["documents"]  # BM25 found the founding document
    assert asked["answer"].strip()
    assert asked["hallucinated"] in (True, False) and 0.0 <= asked["score"] <= 1.0

    # The planted error (150 km; the documents say 90 km) is flagged, and GraphCorrect ran on it.
    assert planted["original_answer"] == example.PLANTED["answer"]
    assert planted["original_verdict"].startswith("hallucination")
    assert planted["correction_status"] in ("corrected", "still_flagged", "unchanged", "recheck_failed")
    if planted["correction_status"] == "unchanged":
        assert planted["answer"] == example.PLANTED["answer"] and planted["correction_notes"]
    else:
        assert planted["answer"] != example.PLANTED["answer"] and planted["diff"]
