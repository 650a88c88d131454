"""Bad input files for ``grapheval evaluate``: every bad line is reported with its number, good rows still run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grapheval_plugins.cli import app, read_rows

HERE = Path(__file__).resolve().parent


def row(i: int) -> str:
    return json.dumps({"id": f"r{i}", "context": "The sky is blue.", "output": f"The sky is blue on day {i}."})


def run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, list[dict]]:
    monkeypatch.syspath_prepend(str(HERE))
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["evaluate", str(path), "-o", str(out), "--llm",
                                      "py:grapheval_plugins.testing:naive_triples_chat_model",
                                      "--scorer", "py:fake_models:keyword_scorer"])
    assert result.exit_code == 0, result.output
    return result.output, [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()]


def test_bad_jsonl_lines_are_reported_by_number_and_nothing_is_dropped(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "in.jsonl"
    big = json.dumps({"id": "big", "context": "The sky is blue. " * 600_000, "output": "The sky is blue."})
    lines = [
        "\ufeff".encode() + row(1).encode(),  # line 1: a BOM
        b'{"id": "r2", "context": "x", "output": ',  # 2: malformed
        json.dumps({"id": "r3", "context": "The sky is blue."}).encode(),  # 3: missing field
        json.dumps({"id": "r4", "context": 5, "output": ["a"]}).encode(),  # 4: wrong types
        b'{"id": "r5", "context": "caf\xe9", "output": "x"}',  # 5: not UTF-8
        b"[1, 2]",  # 6: not an object
        big.encode(),  # 7: a 10 MB row
        row(8).encode(),
    ]
    path.write_bytes(b"\n".join(lines) + b"\n")
    output, reports = run(path, tmp_path, monkeypatch)
    flat = " ".join(output.split())
    assert "line 2: invalid JSON" in flat and "line 5: not UTF-8" in flat and "line 6: not a JSON object" in flat
    ids = [r["id"] for r in reports]
    assert ids == ["r1", "r3", "r4", "big", "r8"]  # each readable row has a report
    by_id = {r["id"]: r for r in reports}
    assert by_id["r1"]["ok"] and by_id["r8"]["ok"] and by_id["big"]["ok"]
    for rid in ("r3", "r4"):
        assert not by_id[rid]["ok"] and by_id[rid]["errors"][0]["stage"] == "input"
    # every line is accounted for: a report or a numbered problem
    assert len(reports) + sum(f"line {n}:" in flat for n in (2, 5, 6)) == len(lines)


def test_csv_quirks(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text('\ufeffid,context,output\n1,"The sky,\nis blue.","The sky is ""blue""."\n', encoding="utf-8")
    got = list(read_rows(path))
    assert got == [(2, {"id": "1", "context": "The sky,\nis blue.", "output": 'The sky is "blue".'}, None)]
