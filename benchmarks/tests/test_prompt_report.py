"""Lever 2's report (``detection.py prompt-report``, ``fidelity --prompt``): its numbers on toy rows and the rows it
covers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grapheval_plugins.extract.prompts import KG_PROMPT_KEEP_QUALIFIERS


def _detection_script():  # type: ignore[no-untyped-def]
    from bench_scripts import load_script

    return load_script("benchmarks/detection.py", "bench_detection_script")


def test_the_prompt_report_numbers_on_toy_rows() -> None:
    module = _detection_script()
    assert "keep-qualifiers" in module.PROMPTS and module.PROMPTS["keep-qualifiers"] is KG_PROMPT_KEEP_QUALIFIERS

    def row(label: int, p_raw: float, triples: list[tuple[float, float | None]]) -> tuple[dict, dict]:
        d = {"label": label, "p_raw": p_raw, "triples": [["s", "r", "o", pc] for pc, _ in triples]}
        f = {"triples": [["s", "r", "o", pc, po] for pc, po in triples]}
        return d, f

    rows = [
        row(0, 0.1, [(0.9, 0.8), (0.2, 0.1)]),  # a false alarm that the fidelity drop removes
        row(0, 0.2, []),  # no triple: the whole output decides
        row(1, 0.7, [(0.6, 0.3), (0.4, None)]),  # an unjudged triple is kept, not counted in the round trip
        row(1, 0.3, [(0.8, 0.2)]),
    ]
    st = module.prompt_stats(rows)
    assert st["rows"] == 4 and st["triples_per_row"] == 5 / 4 and st["no_triple"] == 1
    assert st["round_trip"] == 3 / 4 and st["unjudged"] == 1
    assert st["fa_triples"] == 0.5 and st["fa_fidelity"] == 0.0 and st["fa_raw"] == 0.0
    assert st["auc_fidelity"] == 1.0 and st["auc_triples"] == 0.5
    assert module.prompt_tables({"toy": {"a": rows, "b": rows}}, n_boot=50).count("| toy |") == 2


def test_fidelity_and_prompt_report_all_cover_every_row_of_the_prompts_file_lab_rows_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``fidelity --prompt keep-qualifiers --all`` scores every row of that prompt's per-row file (the lab rows first,
    then the set's run order, resumable); ``prompt-report --all`` reports every row both prompts' files hold and
    says which; without ``--all`` both stay on the lab rows."""
    from typer.testing import CliRunner

    from grapheval_plugins.score_cache import CachedScorer, SQLiteScoreCache
    from grapheval_plugins.testing import FunctionScorer

    module = _detection_script()
    data = [{"id": f"t{i}", "context": f"Context {i}.", "output": f"Output {i}.", "label": i % 2} for i in range(8)]
    lab = ["t5", "t2", "t0", "t1"]
    monkeypatch.setattr(module, "RESULTS", tmp_path)
    monkeypatch.setattr(module, "LAB_FILE", tmp_path / "lab.json")
    (tmp_path / "lab.json").write_text(json.dumps({"sets": {"toy": lab}}))
    monkeypatch.setattr(module.bench, "load_dataset", lambda name, *a, **k: [dict(r) for r in data])
    monkeypatch.setattr(module, "bench_scorer", lambda spec, cache, threads: CachedScorer(
        FunctionScorer(lambda p, h: 0.9, name=spec), SQLiteScoreCache(tmp_path / "scores.sqlite")))
    llm, scorer = module.LAB_LLM, module.LAB_SCORER

    def per_row(tag: str, ids: list[str]) -> None:
        rows = [{"id": i, "dataset": "toy", "label": int(i[1:]) % 2, "p_raw": 0.1 + 0.1 * int(i[1:]), "error": None,
                 "triples": [["s", "r", i, 0.05 * int(i[1:]) + (0.3 if tag == "keep-qualifiers" else 0.0)]],
                 "prompt": tag, "render": "concat"} for i in ids]
        module.result_path("toy", llm, scorer, tag, "concat").write_text("".join(json.dumps(r) + "\n" for r in rows))

    every = [r["id"] for r in data]
    per_row(module.DEFAULT_TAG, every)
    per_row("keep-qualifiers", [i for i in every if i != "t3"])  # t3 not extracted yet
    runner = CliRunner()
    run = runner.invoke(module.app, ["fidelity", "toy", "--prompt", "keep-qualifiers", "--limit", "2"])
    assert run.exit_code == 0, run.output
    fid_file = module.fidelity_path("toy", llm, scorer, "keep-qualifiers")
    assert [r["id"] for r in module.bench.load_results(fid_file)] == ["t5", "t2"]  # lab rows only
    run = runner.invoke(module.app, ["fidelity", "toy", "--prompt", "keep-qualifiers", "--all"])
    assert run.exit_code == 0, run.output
    order = module.lab_first(lab, module.dataset_rows("toy", None, 0))
    assert [r["id"] for r in module.bench.load_results(fid_file)] == [i for i in order if i != "t3"]
    assert order[:4] == lab and sorted(order) == every
    again = runner.invoke(module.app, ["fidelity", "toy", "--prompt", "keep-qualifiers", "--all"])
    assert "0 row(s) scored, 7 already done" in again.output
    # the default's fidelity file, on every row
    module.fidelity_path("toy", llm, scorer).write_text("".join(
        json.dumps({"id": i, "triples": [["s", "r", i, 0.05 * int(i[1:]), 0.2]], "error": None}) + "\n"
        for i in every))

    lab_only = runner.invoke(module.app, ["prompt-report", "--datasets", "toy", "--n-boot", "20"])
    assert lab_only.exit_code == 0, lab_only.output
    assert "lab subset lab.json" in lab_only.stdout and "| toy | keep-qualifiers | 4 (2) |" in lab_only.stdout
    assert "− raw" not in lab_only.stdout and "toy: 4 lab rows: t5 t2 t0 t1" in lab_only.stderr
    full = runner.invoke(module.app, ["prompt-report", "--datasets", "toy", "--n-boot", "20", "--all"])
    assert full.exit_code == 0, full.output
    assert "Rows used: toy: 7 of the set's 8 rows (4 lab rows, 3 others)." in full.stdout
    assert "| toy | keep-qualifiers | 7 (3) |" in full.stdout and "| toy | examples-first+pairs | 7 (3) |" in full.stdout
    assert "toy, keep-qualifiers: AUC triples only − raw = " in full.stdout
    assert f"toy: 7 rows: {' '.join(i for i in order if i != 't3')}" in full.stderr
