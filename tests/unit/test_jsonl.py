"""The resumable JSONL writer shared by the command line and the benchmark harness."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from grapheval_plugins import jsonl
from grapheval_plugins.cli import app
from grapheval_plugins.exceptions import InputError
from grapheval_plugins.jsonl import JsonlStore


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


def test_rows_are_appended_and_a_reopened_store_knows_them(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "out.jsonl"
    with JsonlStore(path) as store:
        store.append({"id": 1, "v": "é"})
        store.append({"id": "2"})
        store.append({"id": "3"})
        with pytest.raises(ValueError, match="already"):
            store.append({"id": "1"})
        with pytest.raises(ValueError, match="no id"):
            store.append({"v": 0})
    again = JsonlStore(path)
    assert again.ids() == {"1", "2", "3"} and 2 in again and len(again) == 3
    assert [json.loads(line)["id"] for line in _lines(path)] == [1, "2", "3"]
    assert "é" in path.read_text(encoding="utf-8")
    again.close()


def test_a_torn_line_is_cut_duplicates_and_rows_to_redo_stay_and_the_last_row_wins(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    text = '{"id": "a", "v": 1}\n{"id": "b", "error": "boom"}\n{"id": "a", "v": 2}\n'
    path.write_text(text + '{"id": "c", "v')
    with JsonlStore(path, redo=lambda row: bool(row.get("error"))) as store:
        assert store.ids() == {"a"} and store.rows["a"]["v"] == 2
        assert path.read_text() == text + '{"id": "c", "v'  # opening only reads
        store.append({"id": "b", "v": 3})
    assert path.read_text() == text + '{"id": "b", "v": 3}\n'  # only the torn last line is gone
    with JsonlStore(path, redo=lambda row: bool(row.get("error"))) as again:
        assert again.ids() == {"a", "b"} and again.rows["b"] == {"id": "b", "v": 3}


def test_a_store_that_keeps_only_ids_resumes_the_same(tmp_path: Path) -> None:
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
    assert _lines(kept) == _lines(ids_only) == text.splitlines()[:-1] + ['{"id": "b", "v": 4}']


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
        for i in range(3):
            every.append({"id": i})
    assert len(synced) == 2 + 3 + 1


def test_a_key_function_keys_rows_by_several_fields(tmp_path: Path) -> None:
    def key(row):  # type: ignore[no-untyped-def]
        return f"{row['llm']}|{row['text']}" if "llm" in row and "text" in row else None

    with JsonlStore(tmp_path / "kg.jsonl", key=key) as store:
        store.append({"llm": "m", "text": "t", "triples": []})
        assert "m|t" in store
        with pytest.raises(ValueError, match="already"):
            store.append({"llm": "m", "text": "t", "triples": [["a", "b", "c"]]})


def test_the_cli_resumes_through_the_store_after_a_torn_write(tmp_path: Path) -> None:
    rows = [{"id": str(i), "context": "Paris is in France.", "output": "Paris is in France."} for i in range(3)]
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    out.write_text(json.dumps({"id": "0", "hallucinated": False}) + "\n" + '{"id": "1", "hallucina')  # killed mid-write
    spec = "py:grapheval_plugins.testing:naive_triples_chat_model"
    result = CliRunner().invoke(app, ["evaluate", str(source), "-o", str(out), "--llm", spec, "--scorer",
                                      "py:grapheval_plugins.testing:KeywordScorer"])
    assert result.exit_code == 0, result.output
    ids = [json.loads(line)["id"] for line in _lines(out)]
    assert ids == ["0", "1", "2"]  # the torn row redone, the done one skipped, no glued lines
    assert os.path.getsize(out) > 0


# ------------------------------------------------------------------ nothing a user had is destroyed (issue 43)
_FAKES = ["--llm", "py:grapheval_plugins.testing:naive_triples_chat_model",
          "--scorer", "py:grapheval_plugins.testing:KeywordScorer"]
_ROWS = ('{"context": "Ada wrote the first program.", "output": "Ada wrote the first program."}\n'
         '{"context": "Ada wrote the first program.", "output": "Ada wrote the first novel."}\n')


def _said(result: Any) -> str:
    return " ".join(result.output.split())  # the console wraps long lines


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.mark.parametrize("command", ["evaluate", "correct"])
@pytest.mark.parametrize("how", ["same name", "another spelling", "symlink", "hard link"])
def test_input_and_output_the_same_file_is_refused_before_anything_is_written(
    tmp_path: Path, command: str, how: str
) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(_ROWS, encoding="utf-8")
    out = {"same name": rows, "another spelling": tmp_path / "." / "rows.jsonl", "symlink": tmp_path / "link.jsonl",
           "hard link": tmp_path / "hard.jsonl"}[how]
    if how == "symlink":
        out.symlink_to(rows)
    elif how == "hard link":
        os.link(rows, out)
    before = _tree(tmp_path)
    result = CliRunner().invoke(app, [command, str(rows), "-o", str(out), *_FAKES])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "same file as INPUT" in _said(result)
    assert _tree(tmp_path) == before  # the input is intact, nothing was written


def test_a_report_or_cache_path_equal_to_the_input_or_output_is_refused(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(_ROWS, encoding="utf-8")
    for extra in (["--report", str(rows)], ["--cache", str(rows)], ["--report", str(tmp_path / "out.jsonl")]):
        result = CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(tmp_path / "out.jsonl"), *_FAKES, *extra])
        assert result.exit_code == 2 and "same file as" in _said(result), extra
    assert rows.read_text(encoding="utf-8") == _ROWS and not (tmp_path / "out.jsonl").exists()
    result = CliRunner().invoke(app, ["report", str(rows), "-o", str(rows)])
    assert result.exit_code == 2 and rows.read_text(encoding="utf-8") == _ROWS


def test_an_error_of_the_package_in_any_command_is_said_with_exit_code_2_not_a_traceback(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(_ROWS, encoding="utf-8")
    result = CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(tmp_path / "out.jsonl"), "--threshold", "1.5",
                                      *_FAKES])
    assert result.exit_code == 2 and isinstance(result.exception, SystemExit)
    assert "error: hallucination_threshold: must be a number in [0, 1], got 1.5" in _said(result)


def test_refuse_same_files_is_typed() -> None:
    with pytest.raises(jsonl.SameFileError) as info:
        jsonl.refuse_same_files({"INPUT": Path("a.jsonl")}, {"--output": Path("b.jsonl"), "--report": Path("b.jsonl")})
    assert isinstance(info.value, InputError) and info.value.field == "--report"
    jsonl.refuse_same_files({"INPUT": Path("a.jsonl")}, {"--output": Path("b.jsonl"), "--report": None})


@pytest.mark.parametrize("resume", ["--resume", "--no-resume"])
def test_an_output_with_other_content_is_refused_not_erased(tmp_path: Path, resume: str) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(_ROWS, encoding="utf-8")
    notes = tmp_path / "notes.jsonl"
    ours = json.dumps({"id": "a", "hallucinated": False}) + "\n"
    for content in (_ROWS, ours + '{"no id": 1}\n', "plain text, no newline", ours + "not json\n",
                    '{"id": "1", "context": "rows with ids", "output": "are not reports"}\n',
                    json.dumps({"id": "1", "status": "corrected"}) + "\n"):  # a correction report is not ours
        notes.write_text(content, encoding="utf-8")
        result = CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(notes), resume, *_FAKES])
        assert result.exit_code == 2 and "not a row this tool wrote" in _said(result), content
        assert notes.read_text(encoding="utf-8") == content
    notes.write_text('{"no id": 1}\n', encoding="utf-8")
    with pytest.raises(jsonl.NotAStoreError):
        JsonlStore(notes)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.jsonl", "rows.jsonl"]


def test_opening_a_store_never_rewrites_the_file(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    text = '{"id": "a", "v": 1}\n\n{"id": "b", "error": "x"}\n{"id": "a", "v": 2}\n{"id": "c"}'
    path.write_text(text, encoding="utf-8")
    stat = path.stat()
    store = JsonlStore(path, redo=lambda row: bool(row.get("error")))
    store.close()
    assert store.ids() == {"a", "c"} and path.read_text(encoding="utf-8") == text
    assert path.stat().st_mtime_ns == stat.st_mtime_ns and path.stat().st_ino == stat.st_ino


@pytest.mark.parametrize("cut", range(1, 4))
def test_a_write_torn_inside_a_multibyte_character_is_dropped_on_resume(tmp_path: Path, cut: int) -> None:
    path = tmp_path / "out.jsonl"
    done = json.dumps({"id": "a", "v": "日本"}, ensure_ascii=False).encode() + b"\n"
    torn = json.dumps({"id": "b", "v": "Grüße 🙂"}, ensure_ascii=False).encode()
    cut_at = torn.index("🙂".encode()) + cut  # inside the 4-byte character
    path.write_bytes(done + torn[:cut_at])
    with JsonlStore(path) as store:
        assert store.ids() == {"a"}
        store.append({"id": "b", "v": "Grüße 🙂"})
    assert path.read_bytes() == done + torn + b"\n"


def test_the_cli_resumes_after_a_write_torn_inside_a_character(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(_ROWS.replace("Ada", "Ådá 🙂"), encoding="utf-8")
    reference = tmp_path / "reference.jsonl"
    assert CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(reference), *_FAKES]).exit_code == 0
    whole = reference.read_bytes()
    second = whole.index(b"\n") + 1
    out = tmp_path / "out.jsonl"
    out.write_bytes(whole[: whole.index("🙂".encode(), second) + 2])  # killed inside the second row's emoji
    result = CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(out), *_FAKES])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in _lines(out)] == ["1", "2"]


def test_no_resume_replaces_the_old_output_only_when_the_new_one_is_complete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from grapheval_plugins.exceptions import ModelLoadError
    from grapheval_plugins.pipeline import GraphEval

    rows = tmp_path / "rows.jsonl"
    rows.write_text(_ROWS, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    old = json.dumps({"id": "old", "hallucinated": False}) + "\n"
    out.write_text(old, encoding="utf-8")

    def fail(*args: object, **kwargs: object) -> None:
        raise ModelLoadError("the scorer cannot load")

    with monkeypatch.context() as patch:
        patch.setattr(GraphEval, "evaluate_many", fail)
        result = CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(out), "--no-resume", *_FAKES])
    assert result.exit_code == 2 and "cannot load" in _said(result)
    assert out.read_text(encoding="utf-8") == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "rows.jsonl"]  # no partial file left
    result = CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(out), "--no-resume", *_FAKES])
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in _lines(out)] == ["1", "2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "rows.jsonl"]


def test_a_replacing_store_leaves_the_old_file_until_close(tmp_path: Path) -> None:
    path = tmp_path / "out.jsonl"
    path.write_text('{"id": "old"}\n', encoding="utf-8")
    store = JsonlStore(path, replace=True)
    assert store.ids() == set()
    store.append({"id": "new"})
    assert path.read_text(encoding="utf-8") == '{"id": "old"}\n' and store.partial.exists()
    store.close()
    assert path.read_text(encoding="utf-8") == '{"id": "new"}\n' and not store.partial.exists()
    with pytest.raises(RuntimeError), JsonlStore(path, replace=True) as failing:
        failing.append({"id": "lost"})
        raise RuntimeError("killed")
    assert path.read_text(encoding="utf-8") == '{"id": "new"}\n' and not failing.partial.exists()


def test_a_no_resume_run_stopped_at_a_bad_record_keeps_the_old_output(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(_ROWS + "not json\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    old = json.dumps({"id": "old", "hallucinated": False}) + "\n"
    out.write_text(old, encoding="utf-8")
    result = CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(out), "--no-resume", "--stop-on-error",
                                      "--batch-rows", "1", *_FAKES])
    assert result.exit_code == 1 and "the old output is kept" in _said(result)
    assert out.read_text(encoding="utf-8") == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.jsonl", "rows.jsonl"]
    result = CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(out), "--stop-on-error", *_FAKES])
    assert result.exit_code == 1 and "a re-run resumes" in _said(result)
    assert [json.loads(line)["id"] for line in _lines(out)] == ["old", "1", "2"]
