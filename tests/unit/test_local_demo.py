"""``grapheval demo`` and its bundled examples, run with fake models (the real run is an integration test)."""

from __future__ import annotations

import json
from importlib.resources import files
from pathlib import Path

from typer.testing import CliRunner

from grapheval_plugins.cli import app

FAKES = [
    "--llm", "py:grapheval_plugins.testing:naive_triples_chat_model",
    "--scorer", "py:grapheval_plugins.testing:KeywordScorer",
]


def bundled() -> list[dict[str, str]]:
    text = files("grapheval_plugins").joinpath("data", "demo.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_bundled_examples_mix_faithful_and_planted_errors() -> None:
    rows = bundled()
    assert 4 <= len(rows) <= 10
    assert {r["expected"] for r in rows} == {"faithful", "hallucinated"}
    for row in rows:
        assert row["context"].strip() and row["output"].strip() and row["id"]
        assert len(row["output"].split()) < 40  # short: the demo must stay quick on a CPU
        if row["expected"] == "hallucinated":
            assert row["note"].startswith("planted error")


def test_demo_prints_verdicts_and_flags_the_planted_errors() -> None:
    result = CliRunner().invoke(app, ["demo", *FAKES])
    assert result.exit_code == 0, result.output
    out = result.output
    for row in bundled():
        assert row["id"] in out
    assert "Vienna" in out and "40 million" in out  # the unsupported triples are shown
    assert "verdicts match the expected ones" in out
    assert "Loading the extraction model" in out


def test_demo_accepts_own_examples(tmp_path: Path) -> None:
    path = tmp_path / "mine.jsonl"
    path.write_text(
        json.dumps({"id": "mine-1", "expected": "hallucinated", "context": "The sky is blue today.",
                    "output": "The sky is green today."}) + "\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["demo", *FAKES, "--examples", str(path)])
    assert result.exit_code == 0, result.output
    assert "mine-1" in result.output and "1/1 verdicts match" in result.output


def test_demo_reports_a_model_error_without_a_traceback() -> None:
    result = CliRunner().invoke(app, ["demo", "--llm", "local:no-such-model"])
    assert result.exit_code == 2
    assert "unknown local model" in result.output


def test_known_false_positives_are_marked_not_counted_as_surprises(tmp_path: Path) -> None:
    rows = bundled()
    known = [r for r in rows if r.get("known_false_positive")]
    assert [r["id"] for r in known] == ["library-ok"] and known[0]["expected"] == "faithful"
    path = tmp_path / "known.jsonl"
    path.write_text(
        json.dumps({"id": "sky-ok", "expected": "faithful", "context": "The sky is blue today.",
                    "output": "The sky is green today.", "known_false_positive": "a test row"}) + "\n",
        encoding="utf-8",
    )
    result = CliRunner().invoke(app, ["demo", *FAKES, "--examples", str(path)])
    assert result.exit_code == 0, result.output
    assert "0/1 verdicts match the expected ones; 1 known false positive(s) of the local models: sky-ok" in (
        " ".join(result.output.split())
    )


def test_an_example_that_cannot_be_checked_fails_the_demo(tmp_path: Path) -> None:
    path = tmp_path / "broken.jsonl"
    path.write_text(json.dumps({"id": "empty", "expected": "faithful", "context": "", "output": ""}) + "\n",
                    encoding="utf-8")
    result = CliRunner().invoke(app, ["demo", *FAKES, "--examples", str(path)])
    assert result.exit_code == 1, result.output
    assert "could not be checked" in result.output
