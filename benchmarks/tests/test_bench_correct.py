"""The correction study (``benchmarks/bench_correct.py``): a run on three rows with fakes, resumable, and its report;
detection rows rebuilt by the rule of the study's engine."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from grapheval_plugins import GraphEval

_STUDY_ROW = {"id": "q1", "p_raw": 0.5, "p_graph": 0.45, "triples": [["Ann", "won", "gold", 0.45]], "fallback": False,
              "llm_calls": 1, "cached": False, "render": "concat", "prompt": "kg-a/1-examples-first",
              "llm": "local:qwen2.5-coder-1.5b", "scorer": "judge:local:qwen2.5-coder-1.5b"}


def test_benchmark_script_runs_on_three_rows_with_fakes(tmp_path: Path) -> None:
    from bench_scripts import load_script
    from shared_files import bench_data

    module = load_script("benchmarks/bench_correct.py", "bench_correct")
    wanted = {"qags_c-000", "qags_c-015", "qags_c-018"}  # one the fake leaves alone, two it flags
    rows = [
        line for line in bench_data("qags_c.jsonl").read_text(encoding="utf-8").splitlines()
        if json.loads(line)["id"] in wanted
    ]
    (tmp_path / "three.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    runner = CliRunner()
    for variant in ("paper", "direct"):
        res = runner.invoke(
            module.app,
            [
                "run",
                str(tmp_path / "three.jsonl"),
                "--fake",
                "--variant",
                variant,
                "--results-dir",
                str(tmp_path / "results"),
            ],
        )
        assert res.exit_code == 0, res.output
    files = sorted(p.name for p in (tmp_path / "results").glob("correct-*.jsonl"))
    assert files == [
        "correct-three-fake-keyword-overlap-direct.jsonl",
        "correct-three-fake-keyword-overlap-paper.jsonl",
    ]
    paper = {r["id"]: r for r in map(json.loads, (tmp_path / "results" / files[1]).read_text().splitlines())}
    assert sorted(paper) == sorted(wanted)
    assert (paper["qags_c-000"]["flagged"], paper["qags_c-000"]["llm_calls"]) == (False, 0)
    assert paper["qags_c-018"]["status"] == "corrected" and paper["qags_c-018"]["rouge1"] < 1.0
    assert paper["qags_c-015"]["status"] == "unchanged" and paper["qags_c-015"]["changes"][0]["reason"]
    again = runner.invoke(
        module.app,
        ["run", str(tmp_path / "three.jsonl"), "--fake", "--results-dir", str(tmp_path / "results")],
    )
    assert "0 corrected, 3 already done" in again.output  # resumable
    report = runner.invoke(
        module.app, ["report", "three", "--fake", "--results-dir", str(tmp_path / "results")]
    )
    assert report.exit_code == 0, report.output
    assert (
        "| paper | 3 | 2 (2) | 50.0 | 50.0 |" in report.output and "| direct | 3 | 2 (2) |" in report.output
    )
    assert "`fake`" in report.output and "`keyword-overlap`" in report.output


def test_the_correction_study_rebuilds_detection_rows_by_its_engines_rule(tmp_path: Path) -> None:
    from bench_scripts import load_script

    module = load_script("benchmarks/bench_correct.py", "bench_correct")
    llm, scorer = _STUDY_ROW["llm"], _STUDY_ROW["scorer"]
    name = f"detect-qc-{module.bench.slug(llm)}-{module.bench.slug(scorer)}-examples-first-concat.jsonl"
    (tmp_path / name).write_text(json.dumps(_STUDY_ROW) + "\n", encoding="utf-8")
    rows = [{"id": "q1", "output": "Ann won gold."}]
    found = module.detection_study_reports(tmp_path, "qc", llm, scorer, rows,
                                           GraphEval(llm=llm, scorer=scorer, fidelity="off"))
    assert found["q1"].method == "hybrid" and found["q1"].hallucinated is True
    found = module.detection_study_reports(tmp_path, "qc", llm, scorer, rows,
                                           GraphEval(llm=llm, scorer=scorer, method="paper"))
    assert found["q1"].method == "paper" and found["q1"].hallucinated is False
    # the default engine drops unfaithful triples: the row holds no round trip, so it is not rebuilt
    assert GraphEval(llm=llm, scorer=scorer).fidelity_in_force() == "drop"
    assert module.detection_study_reports(tmp_path, "qc", llm, scorer, rows, GraphEval(llm=llm, scorer=scorer)) == {}
