"""The resumable JSONL writer shared by the command line and the benchmark harness."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grapheval_plugins import jsonl
from grapheval_plugins.cli import app
from grapheval_plugins.jsonl import JsonlStore, read_jsonl


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_rows_are_appended_and_a_reopened_store_knows_them(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "out.jsonl"
    with JsonlStore(path) as store:
        store.append({"id": 1, "v": "é"})
        store.extend([{"id": "2"}, {"id": "3"}])
        with pytest.raises(ValueError, match="already"):
            store.append({"id": "1"})
        with pytest.raises(ValueError, match="no id"):
            store.append({"v": 0})
    again = JsonlStore(path)
    assert again.ids() == {"1", "2", "3"} and 2 in again and len(again) == 3
    assert [json.loads(line)["id"] for line in _lines(path)] == [1, "2", "3"]
    assert "é" in path.read_text(encoding="utf-8")
    again.close()


def test_a_torn_line_duplicates_and_rows_to_redo_are_dropped_and_the_file_rewritten(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text(
        '{"id": "a", "v": 1}\n{"id": "b", "error": "boom"}\n[1, 2]\n{"no": "id"}\n{"id": "a", "v": 2}\n{"id": "c", "v'
    )
    with JsonlStore(path, redo=lambda row: bool(row.get("error"))) as store:
        assert store.ids() == {"a"} and store.rows["a"]["v"] == 2
        store.append({"id": "b", "v": 3})
    assert [json.loads(line) for line in _lines(path)] == [{"id": "a", "v": 2}, {"id": "b", "v": 3}]


def test_a_store_that_keeps_only_ids_resumes_and_rewrites_the_same(tmp_path: Path) -> None:
    text = '{"id": "a", "v": 1}\n{"id": "b", "error": "boom"}\n{"id": "a", "v": 2}\n{"id": "c", "v": 3}\n{"id": "d", "v'
    kept, ids_only = tmp_path / "kept.jsonl", tmp_path / "ids.jsonl"
    kept.write_text(text)
    ids_only.write_text(text)
    with JsonlStore(kept, redo=lambda r: bool(r.get("error"))) as a, \
            JsonlStore(ids_only, redo=lambda r: bool(r.get("error")), keep_rows=False) as b:
        assert a.ids() == b.ids() == {"a", "c"} and len(b) == 2 and "c" in b
        assert b.rows == {} and a.rows["a"]["v"] == 2  # only ids held: memory does not grow with the rows
        for store in (a, b):
            store.append({"id": "b", "v": 4})
            with pytest.raises(ValueError, match="already"):
                store.append({"id": "b"})
    assert _lines(kept) == _lines(ids_only)
    assert [json.loads(line) for line in _lines(ids_only)] == [{"id": "a", "v": 2}, {"id": "c", "v": 3},
                                                               {"id": "b", "v": 4}]


def test_a_last_line_without_newline_is_completed_before_appending(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text('{"id": "a"}')
    with JsonlStore(path) as store:
        store.append({"id": "b"})
    assert _lines(path) == ['{"id": "a"}', '{"id": "b"}']


def test_fsync_runs_at_a_bounded_interval_and_on_close(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(jsonl.os, "fsync", lambda fd: synced.append(fd))
    clock = [100.0]
    monkeypatch.setattr(jsonl.time, "monotonic", lambda: clock[0])
    store = JsonlStore(tmp_path / "out.jsonl", fsync_every_s=5.0)
    for i in range(10):  # ten rows within the interval: written and flushed, not synced
        store.append({"id": i})
        assert len(_lines(tmp_path / "out.jsonl")) == i + 1
    assert synced == []
    clock[0] += 5.0
    store.append({"id": "late"})
    assert len(synced) == 1
    store.close()
    assert len(synced) == 2
    with JsonlStore(tmp_path / "every.jsonl", fsync_every_s=0) as every:
        every.extend({"id": i} for i in range(3))
    assert len(synced) == 2 + 3 + 1


def test_a_key_function_keys_rows_by_several_fields(tmp_path: Path) -> None:
    def key(row):  # type: ignore[no-untyped-def]
        return f"{row['llm']}|{row['text']}" if "llm" in row and "text" in row else None

    with JsonlStore(tmp_path / "kg.jsonl", key=key) as store:
        store.append({"llm": "m", "text": "t", "triples": []})
        assert "m|t" in store
        with pytest.raises(ValueError, match="already"):
            store.append({"llm": "m", "text": "t", "triples": [["a", "b", "c"]]})


def test_read_jsonl_skips_what_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\nnot json\n"a string"\n{"b": 2}\n{"c"')
    assert list(read_jsonl(path)) == [{"a": 1}, {"b": 2}]
    assert list(read_jsonl(tmp_path / "missing.jsonl")) == []


def test_the_cli_resumes_through_the_store_after_a_torn_write(tmp_path: Path) -> None:
    rows = [{"id": str(i), "context": "Paris is in France.", "output": "Paris is in France."} for i in range(3)]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"id": "0", "ok": True}) + "\n" + '{"id": "1", "hallucina')  # killed mid-write
    spec = "py:grapheval_plugins.testing:naive_triples_chat_model"
    result = CliRunner().invoke(app, ["evaluate", str(source), "-o", str(out), "--llm", spec, "--scorer",
                                      "py:grapheval_plugins.testing:KeywordScorer"])
    assert result.exit_code == 0, result.output
    ids = [json.loads(line)["id"] for line in _lines(out)]
    assert ids == ["0", "1", "2"]  # the torn row redone, the done one skipped, no glued lines
    assert os.path.getsize(out) > 0
