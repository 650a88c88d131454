"""``benchmarks/peers.py``'s comparison over an OpenAI-compatible server, without a server: the counting transport
over ``httpx.MockTransport`` (an in-process fake of the chat-completions endpoint), DeepEval's own
``LocalModel`` through it, the resumable run with scripted methods, and the table from per-row files."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from bench_scripts import load_harness, load_script

load_harness()
peers = load_script("benchmarks/peers.py", "peers_api_under_test")


def fake_server(answer: str, prompt_tokens: int = 100, completion_tokens: int = 7) -> Any:
    """An OpenAI-compatible chat-completions endpoint in the process: every request answered with ``answer``."""
    seen: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if not request.url.path.endswith("/chat/completions"):
            return httpx.Response(200, json={"object": "list", "data": []})
        body = json.loads(request.content)
        seen.append(body)
        if (body.get("messages") or [{}])[-1].get("content") == "fail":
            return httpx.Response(500, json={"error": {"message": "boom"}})
        return httpx.Response(200, json={
            "id": "x", "object": "chat.completion", "created": 0, "model": body.get("model", "m"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}})

    return httpx.MockTransport(handle), seen


def test_planned_rows_are_the_committed_list() -> None:
    plan = peers.planned_rows()
    assert plan == peers.api_row_list(0)
    assert len(plan) == 50 and len({r["id"] for r in plan}) == 50
    assert {s: sum(r["set"] == s for r in plan) for s, _ in peers.API_SETS} == dict(peers.API_SETS)
    # the first six rows hold every set and both labels
    assert {(r["set"], r["label"]) for r in plan[:6]} == {(s, y) for s, _ in peers.API_SETS for y in (0, 1)}


def test_counting_transport_counts_each_rows_calls_and_passes_the_answer_through() -> None:
    mock, _ = fake_server("hello", prompt_tokens=11, completion_tokens=3)
    transport = peers.counting_transport(mock)

    async def row(n_calls: int, fail: bool) -> Any:
        usage = peers.RowUsage()
        peers.ROW_USAGE.set(usage)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:1/v1") as client:
            for _ in range(n_calls):
                r = await client.post("/chat/completions", json={"messages": [{"role": "user", "content": "hi"}]})
                assert r.json()["choices"][0]["message"]["content"] == "hello"
            if fail:
                r = await client.post("/chat/completions", json={"messages": [{"role": "user", "content": "fail"}]})
                assert r.status_code == 500 and r.json()["error"]["message"] == "boom"
            await client.get("/models")  # not a chat completion: not counted
        return usage.as_dict()

    async def both() -> list[Any]:
        return await asyncio.gather(row(2, False), row(3, True))

    a, b = asyncio.run(both())
    assert a == {"llm_calls": 2, "prompt_tokens": 22, "completion_tokens": 6, "http_errors": 0,
                 "calls_without_usage": 0}
    assert b == {"llm_calls": 4, "prompt_tokens": 33, "completion_tokens": 9, "http_errors": 1,
                 "calls_without_usage": 0}
    # the sync path counts too
    usage = peers.RowUsage()
    peers.ROW_USAGE.set(usage)
    with httpx.Client(transport=transport) as client:
        client.post("http://127.0.0.1:1/v1/chat/completions", json={"messages": []})
    assert usage.as_dict()["llm_calls"] == 1 and usage.as_dict()["prompt_tokens"] == 11


def test_deepeval_hallucination_metric_through_local_model_and_the_transport(monkeypatch: pytest.MonkeyPatch) -> None:
    """DeepEval's own ``LocalModel`` reaches the fake server through the counting transport; its one verdict call
    is counted in the row, and a contradicted context is P = 1."""
    monkeypatch.setenv("DEEPEVAL_DISABLE_TIMEOUTS", "YES")
    mock, seen = fake_server(json.dumps({"verdicts": [{"verdict": "no", "reason": "contradicts"}]}))  # disagrees
    clients = peers.ApiClients("http://127.0.0.1:1/v1", 64, 30.0, peers.counting_transport(mock))
    row = {"id": "r1", "set": "qags_c", "label": 1, "context": "Paris is in France.", "output": "Paris is in Spain."}
    result = asyncio.run(peers.api_score(clients, "deepeval-hallucination", row, 1))
    assert result["error"] is None, result
    assert result["p_hallucination"] == 1.0
    assert (result["llm_calls"], result["prompt_tokens"], result["completion_tokens"]) == (1, 100, 7)
    assert seen[0]["model"] == peers.API_MODEL and seen[0]["max_tokens"] == 64


def test_an_unreadable_answer_is_a_result_with_its_error() -> None:
    mock, _ = fake_server("not json at all")
    clients = peers.ApiClients("http://127.0.0.1:1/v1", 64, 30.0, peers.counting_transport(mock))
    row = {"id": "r1", "set": "qags_c", "label": 0, "context": "c.", "output": "o."}
    result = asyncio.run(peers.api_score(clients, "deepeval-hallucination", row, 1))
    assert result["p_hallucination"] is None and result["error"] and result["error_kind"]
    assert result["llm_calls"] >= 1  # the calls it cost are still counted


def scripted(log: list[tuple[str, str]]) -> dict[str, Any]:
    async def method(name: str, clients: Any, row: dict[str, Any]) -> tuple[float, dict]:
        log.append((name, row["id"]))
        await asyncio.sleep(0)
        if row["id"] == "b" and name == "ragas":
            raise ValueError("invalid JSON")
        return (0.9 if row["label"] else 0.1), {}

    return {m: (lambda c, r, m=m: method(m, c, r)) for m in peers.API_METHODS}


def test_run_order_resume_and_deadline(tmp_path: Path) -> None:
    clients = peers.ApiClients("http://127.0.0.1:1/v1", 64, 30.0, None)
    rows = [{"id": i, "set": "qags_c", "label": y, "context": "c", "output": "o"} for i, y in (("a", 0), ("b", 1))]
    log: list[tuple[str, str]] = []
    methods = list(peers.API_METHODS)
    n = asyncio.run(peers.api_run_async(clients, rows, methods, 1, tmp_path, scorers=scripted(log)))
    assert n == 10
    assert [rid for _, rid in log] == ["a"] * 5 + ["b"] * 5  # concurrency 1: every method on a row first
    failed = peers.bench.load_results(peers.api_path("ragas", 1, tmp_path))
    assert [(r["id"], r["p_hallucination"], r["error_kind"]) for r in failed] == [("a", 0.1, None), ("b", None, "parse")]
    # resumed: nothing left to do (the failure is a result, not redone)
    assert asyncio.run(peers.api_run_async(clients, rows, methods, 1, tmp_path, scorers=scripted(log))) == 0
    # concurrency 2: method by method; a deadline already past starts nothing
    log.clear()
    assert asyncio.run(peers.api_run_async(clients, rows, methods, 2, tmp_path, until=time.time() - 1,
                                           scorers=scripted(log))) == 0
    assert asyncio.run(peers.api_run_async(clients, rows, methods, 2, tmp_path, scorers=scripted(log))) == 10
    assert [m for m, _ in log] == [m for m in methods for _ in range(2)]


def test_table_from_the_per_row_files(tmp_path: Path) -> None:
    plan = [{"id": "a", "set": "qags_c", "label": 0}, {"id": "b", "set": "qags_x", "label": 1},
            {"id": "c", "set": "summeval", "label": 1}]
    rows_file = tmp_path / "rows.json"
    rows_file.write_text(json.dumps({"rows": plan}), encoding="utf-8")
    tokens = {"grapheval": 100, "raw": 50, "ragas": 300, "deepeval-faithfulness": 400, "deepeval-hallucination": 200}
    for method in peers.API_METHODS:
        for level, ids in ((1, "ab"), (8, "ab")):
            with peers.api_path(method, level, tmp_path).open("w", encoding="utf-8") as fh:
                for k, rid in enumerate(ids):
                    label = plan[k]["label"]
                    p = None if (method == "ragas" and rid == "b") else (0.8 if label else 0.3)
                    fh.write(json.dumps({
                        "id": rid, "set": plan[k]["set"], "label": label, "p_hallucination": p,
                        "error": None if p is not None else "ValueError: x", "seconds": 10.0 * (k + 1),
                        "started": 100.0 + k, "ended": 110.0 + 11 * k, "llm_calls": 2,
                        "prompt_tokens": tokens[method] - 10, "completion_tokens": 10}) + "\n")
    text = peers.api_table_text(tmp_path, rows_file)
    assert "Concurrency 1: 2 of the 3 planned rows" in text
    assert "| GraphEval (default) | 2 | 0 | 100.0 | 100.0 | 2.00 | 90 | 10 | 100 | 15.0 |" in text
    assert "| Ragas Faithfulness | 1 | 1 |" in text
    assert "| GraphEval raw | 2 | 0 | 15.0 | 10.5 | 15.0 (2 rows) | 50 (50) |" in text  # wall: (121 - 100) / 2
    assert "fewer tokens per row than every peer: yes" in text
    assert "at least level with the best peer: yes (100.0 vs 100.0)" in text
    assert "| a | 0 | 0.30 | 0.30 | 0.30 | 0.30 | 0.30 |" in text and "| b | 1 | 0.80 | 0.80 | — | 0.80 | 0.80 |" in text


def test_a_method_that_failed_on_every_row_is_reported_and_not_intersected(tmp_path: Path) -> None:
    plan = [{"id": "a", "set": "qags_c", "label": 0}, {"id": "b", "set": "qags_x", "label": 1},
            {"id": "c", "set": "summeval", "label": 1}]
    rows_file = tmp_path / "rows.json"
    rows_file.write_text(json.dumps({"rows": plan}), encoding="utf-8")
    for method in peers.API_METHODS:
        stopped = method == "deepeval-hallucination"
        with peers.api_path(method, 1, tmp_path).open("w", encoding="utf-8") as fh:
            for k, p in enumerate(plan[:1] if stopped else plan):
                fh.write(json.dumps({
                    "id": p["id"], "set": p["set"], "label": p["label"],
                    "p_hallucination": None if stopped else (0.8 if p["label"] else 0.3),
                    "error": "ValidationError: x" if stopped else None, "error_kind": "parse" if stopped else None,
                    "seconds": 10.0, "started": 100.0 + k, "ended": 110.0 + k, "llm_calls": 1,
                    "prompt_tokens": 90, "completion_tokens": 10}) + "\n")
    text = peers.api_table_text(tmp_path, rows_file)
    assert "Concurrency 1: 3 of the 3 planned rows" in text
    assert "DeepEval HallucinationMetric failed on each of the 1 rows it ran (parse)" in text
    assert "| DeepEval HallucinationMetric |" not in text.split("P(hallucination) per row")[0]
    assert "| GraphEval (default) | 3 | 0 | 100.0 | 100.0 |" in text
