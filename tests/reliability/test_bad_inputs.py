"""Bad input files for ``grapheval evaluate``: every bad line is reported with its number, good rows still run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grapheval_plugins.cli import app
from grapheval_plugins.jsonl import read_rows

HERE = Path(__file__).resolve().parent


def row(i: int) -> str:
    return json.dumps({"id": f"r{i}", "context": "The sky is blue.", "output": f"The sky is blue on day {i}."})


def run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *options: str, command: str = "evaluate",
        exit_code: int = 0) -> tuple[str, list[dict]]:
    monkeypatch.syspath_prepend(str(HERE))
    out = tmp_path / "out.jsonl"
    llm = "py:fake_models:correcting_llm" if command == "correct" else "py:grapheval_plugins.testing:naive_triples_chat_model"
    result = CliRunner().invoke(app, [command, str(path), "-o", str(out), "--llm", llm,
                                      "--scorer", "py:fake_models:keyword_scorer", *options])
    assert result.exit_code == exit_code, result.output
    reports = [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] if out.exists() else []
    return " ".join(result.output.split()), reports


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
    flat, reports = run(path, tmp_path, monkeypatch)
    assert "line 2: invalid JSON" in flat and "line 5: not UTF-8" in flat and "line 6: not a JSON object" in flat
    ids = [r["id"] for r in reports]
    assert ids == ["r1", "r3", "r4", "big", "r8"]  # each readable row has a report
    by_id = {r["id"]: r for r in reports}
    assert by_id["r1"]["ok"] and by_id["r8"]["ok"] and by_id["big"]["ok"]
    for rid in ("r3", "r4"):
        assert not by_id[rid]["ok"] and by_id[rid]["errors"][0]["stage"] == "input"
    # every line is accounted for: a report or a numbered problem
    assert len(reports) + sum(f"line {n}:" in flat for n in (2, 5, 6)) == len(lines)


CSV_LINES = [
    "\ufeffid;context;output",  # 1: a BOM, and ';' as the delimiter (sniffed)
    'c1;"The sky is blue.";"The sky is ""blue""."',  # 2: escaped quotes
    'c2;"The sky is blue.',  # 3-5: a quoted field spanning three lines
    "",
    'It is clear.";The sky is clear.',
    "c3;The sky is blue.;too;many",  # 6: four fields, the header has three
    "c4;The sky is blue.",  # 7: two fields
    "",  # 8: a blank line (no record)
    'c5;"The sky" is blue;x',  # 9: text after a closing quote
    "c6;caf\udce9;The sky is blue.",  # 10: not UTF-8 (written as the raw byte 0xE9)
    "c7;" + "The sky is blue. " * 20_000 + ";The sky is blue.",  # 11: a 340 kB field (over csv's 128 kB default)
    "c1;The sky is blue.;A repeated id.",  # 12: duplicate id
    "c8;The sky is blue.;The sky is blue.",  # 13
]


def _write_csv(path: Path, lines: list[str], delimiter: str = ";") -> None:
    text = "\n".join(line.replace(";", delimiter) for line in lines) + "\n"
    path.write_bytes(text.encode("utf-8", errors="surrogateescape"))


@pytest.mark.parametrize("command", ["evaluate", "correct"])
def test_csv_quirks_are_reported_by_line_and_every_record_is_accounted_for(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "in.csv"
    _write_csv(path, CSV_LINES)
    flat, reports = run(path, tmp_path, monkeypatch, command=command)
    assert [r["id"] for r in reports] == ["c1", "c2", "c7", "c8"]
    by_id = {r["id"]: r for r in reports}
    original = "output" if command == "evaluate" else "original"
    assert by_id["c1"][original] == 'The sky is "blue".' and by_id["c2"].get("status") != "error"
    assert by_id["c2"][original] == "The sky is clear."
    problems = {
        6: "line 6: CSV record has 4 fields, the header has 3",
        7: "line 7: CSV record has 2 fields, the header has 3",
        9: "line 9: CSV error:",
        10: "line 10: not UTF-8 text (line 10, byte",
        12: "line 12: duplicate id 'c1' (skipped)",
    }
    for message in problems.values():
        assert message in flat
    assert f"skipped (unreadable) │ {len(problems)} │" in flat
    records = [2, 3, 6, 7, 9, 10, 11, 12, 13]  # the lines records start on (3-5 is one record; 8 is blank)
    assert len(records) == len(reports) + len(problems)  # nothing silently dropped


@pytest.mark.parametrize(("suffix", "delimiter", "options"), [
    (".tsv", "\t", ()), (".csv", "\t", ()), (".csv", "|", ()), (".csv", "|", ("--delimiter", "|")),
    (".txt", "\t", ("--delimiter", "tab")),
])
def test_other_delimiters_are_sniffed_or_given(suffix: str, delimiter: str, options: tuple[str, ...],
                                               tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / f"in{suffix}"
    lines = ["id;context;output", 'a;"The sky, blue; and clear.";The sky is blue.', "b;Grass is green.;Grass is red."]
    _write_csv(path, lines, delimiter)
    if suffix == ".txt":  # neither CSV nor TSV by name: read as JSONL, each line reported
        flat, reports = run(path, tmp_path, monkeypatch, *options)
        assert reports == [] and "line 1: invalid JSON" in flat
        return
    flat, reports = run(path, tmp_path, monkeypatch, *options)
    assert [r["id"] for r in reports] == ["a", "b"] and reports[0]["ok"], flat
    assert reports[1]["output"] == "Grass is red."


def test_a_bad_delimiter_option_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "in.csv"
    _write_csv(path, ["id;context;output", "a;b;c"])
    flat, _ = run(path, tmp_path, monkeypatch, "--delimiter", ";;", exit_code=2)
    assert "one character" in flat


@pytest.mark.parametrize("command", ["evaluate", "correct"])
def test_stop_on_error_stops_at_the_first_bad_record_and_a_rerun_resumes(
    command: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "in.jsonl"
    lines = [row(1), row(2), '{"id": "r3", "context": ', row(4)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    flat, reports = run(path, tmp_path, monkeypatch, "--stop-on-error", command=command, exit_code=1)
    assert "line 3: invalid JSON" in flat and "stopped (--stop-on-error)" in flat
    assert [r["id"] for r in reports] == ["r1", "r2"]  # the rows before it, none after it
    lines[2] = row(3)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    flat, reports = run(path, tmp_path, monkeypatch, "--stop-on-error", command=command)
    assert [r["id"] for r in reports] == ["r1", "r2", "r3", "r4"]
    assert "skipped (already done) │ 2" in flat


def test_read_rows_numbers_a_csv_record_by_its_first_line(tmp_path: Path) -> None:
    path = tmp_path / "in.csv"
    path.write_text('\ufeffid,context,output\n1,"The sky,\nis blue.","The sky is ""blue""."\n2,a,b\n',
                    encoding="utf-8")
    got = list(read_rows(path))
    assert got == [(2, {"id": "1", "context": "The sky,\nis blue.", "output": 'The sky is "blue".'}, None),
                   (4, {"id": "2", "context": "a", "output": "b"}, None)]
