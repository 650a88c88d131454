"""The benchmark harness (``benchmarks/harness.py``): metrics, threshold fitting, bootstrap, sampling, and
resumable runs (on fakes)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from bench_scripts import load_harness

from grapheval_plugins.cache import SQLiteKGCache
from grapheval_plugins.exceptions import InputError
from grapheval_plugins.testing import FunctionScorer, KeywordScorer, ScriptedChatModel, keyword_support

bench = load_harness()
LiftInput = bench.LiftInput

# ----------------------------------------------------------------------------------------------- metrics


def test_balanced_accuracy_known_values() -> None:
    labels = [1, 1, 1, 0, 0, 0, 0, 0]
    # TPR 2/3, TNR 4/5
    predicted = [1, 1, 0, 0, 0, 0, 0, 1]
    assert bench.balanced_accuracy(labels, predicted) == pytest.approx((2 / 3 + 4 / 5) / 2)
    assert bench.rates(labels, predicted) == pytest.approx((2 / 3, 4 / 5))


def test_balanced_accuracy_constant_predictor_is_half_whatever_the_imbalance() -> None:
    labels = [1] * 3 + [0] * 97
    assert bench.balanced_accuracy(labels, [0] * 100) == 0.5
    assert bench.balanced_accuracy(labels, [1] * 100) == 0.5


def test_balanced_accuracy_missing_class_is_nan() -> None:
    assert math.isnan(bench.balanced_accuracy([1, 1], [1, 0]))


def test_balanced_accuracy_rejects_mismatched_lengths() -> None:
    with pytest.raises(ValueError):
        bench.balanced_accuracy([1, 0], [1])


def _pairwise_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    pos, neg = scores[labels == 1], scores[labels == 0]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def test_roc_auc_matches_pairwise_definition_with_ties() -> None:
    rng = np.random.default_rng(3)
    labels = rng.integers(0, 2, size=300)
    scores = np.round(rng.random(300) * 0.5 + 0.3 * labels, 1)  # coarse: many ties
    assert bench.roc_auc(labels, scores) == pytest.approx(_pairwise_auc(labels, scores))


def test_roc_auc_extremes() -> None:
    assert bench.roc_auc([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert bench.roc_auc([0, 0, 1, 1], [0.9, 0.8, 0.2, 0.1]) == 0.0
    assert bench.roc_auc([0, 1, 0, 1], [0.3] * 4) == 0.5
    assert math.isnan(bench.roc_auc([1, 1], [0.2, 0.3]))


# ----------------------------------------------------------------------------------------------- thresholds


def test_fit_threshold_separates_separable_scores() -> None:
    labels = [0, 0, 0, 1, 1]
    scores = [0.05, 0.1, 0.2, 0.3, 0.35]
    t = bench.fit_threshold(labels, scores)
    assert 0.2 <= t < 0.3
    assert bench.balanced_accuracy(labels, [s > t for s in scores]) == 1.0


def test_fit_threshold_is_at_least_as_good_as_any_other_threshold() -> None:
    rng = np.random.default_rng(7)
    labels = rng.integers(0, 2, size=200)
    scores = np.clip(rng.normal(0.15 + 0.2 * labels, 0.15), 0, 1)
    t = bench.fit_threshold(labels, scores)
    best = bench.balanced_accuracy(labels, scores > t)
    for other in np.linspace(0, 1, 101):
        assert bench.balanced_accuracy(labels, scores > other) <= best + 1e-12
    # The uncalibrated 0.5 is far worse on these low scores: this is what the fitted threshold repairs.
    assert best > bench.balanced_accuracy(labels, scores > 0.5) + 0.1


def test_fit_threshold_prefers_the_threshold_closest_to_half_among_ties() -> None:
    # Every t in [0.2, 0.8) separates the two rows; the midpoint 0.5 is the candidate closest to 0.5.
    labels = [0, 1]
    scores = [0.2, 0.8]
    assert bench.fit_threshold(labels, scores) == pytest.approx(0.5)


def test_fit_threshold_on_one_set_applied_to_another() -> None:
    fit_labels, fit_scores = [0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]
    t = bench.fit_threshold(fit_labels, fit_scores)
    report_labels, report_scores = [0, 1, 1, 0], [0.24, 0.26, 0.9, 0.0]
    assert bench.balanced_accuracy(report_labels, [s > t for s in report_scores]) == 1.0
    assert bench.balanced_accuracy(report_labels, [s > 0.5 for s in report_scores]) == 0.75


# ----------------------------------------------------------------------------------------------- bootstrap


def _noisy_set(name: str, n: int, seed: int, graph_gain: float) -> LiftInput:
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, size=n)
    raw = np.clip(0.5 + 0.2 * (y - 0.5) + rng.normal(0, 0.25, n), 0, 1)
    graph = np.clip(0.5 + (0.2 + graph_gain) * (y - 0.5) + rng.normal(0, 0.25, n), 0, 1)
    return LiftInput(name, y.tolist(), raw.tolist(), graph.tolist())


def test_bootstrap_lift_point_estimate_is_the_size_weighted_mean() -> None:
    a = _noisy_set("a", 300, 1, 0.3)
    b = _noisy_set("b", 100, 2, 0.0)
    result = bench.bootstrap_lift([a, b], n_boot=300, seed=0)
    per = {}
    for s in (a, b):
        y, raw, graph = np.array(s.labels), np.array(s.raw), np.array(s.graph)
        per[s.name] = 100 * (bench.balanced_accuracy(y, graph > 0.5) - bench.balanced_accuracy(y, raw > 0.5))
    assert result.per_dataset == pytest.approx(per)
    assert result.lift == pytest.approx((300 * per["a"] + 100 * per["b"]) / 400)
    assert result.ci_low < result.lift < result.ci_high
    assert result.se > 0


def test_bootstrap_lift_is_reproducible_with_a_seed_and_varies_without() -> None:
    sets = [_noisy_set("a", 150, 4, 0.2)]
    first = bench.bootstrap_lift(sets, n_boot=200, seed=11)
    again = bench.bootstrap_lift(sets, n_boot=200, seed=11)
    other = bench.bootstrap_lift(sets, n_boot=200, seed=12)
    assert (first.se, first.ci_low, first.ci_high) == (again.se, again.ci_low, again.ci_high)
    assert (first.se, first.ci_low) != (other.se, other.ci_low)
    assert first.lift == other.lift


def test_bootstrap_interval_excludes_zero_for_a_real_gain_and_includes_it_for_none() -> None:
    gain = bench.bootstrap_lift([_noisy_set("a", 400, 5, 0.6)], n_boot=400, seed=0)
    assert gain.ci_low > 0
    same = LiftInput("b", *(lambda s: (s.labels, s.raw, s.raw))(_noisy_set("b", 400, 6, 0.0)))
    none = bench.bootstrap_lift([same], n_boot=400, seed=0)
    assert none.lift == 0 and none.ci_low == 0 and none.ci_high == 0


def test_bootstrap_uses_each_sets_thresholds() -> None:
    s = LiftInput("a", [0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4], [0.1, 0.2, 0.3, 0.4], raw_threshold=0.5,
                  graph_threshold=0.25)
    assert bench.bootstrap_lift([s], n_boot=50).lift == pytest.approx(50.0)


# ----------------------------------------------------------------------------------------------- data


def _rows(n: int, positive_every: int = 4) -> list[dict]:
    return [{"id": f"r{i:03d}", "label": int(i % positive_every == 0), "context": f"context {i}",
             "output": f"output {i}"} for i in range(n)]


def test_stratified_sample_keeps_label_shares_order_and_seed() -> None:
    rows = _rows(1000, positive_every=5)  # 20 % positive
    sample = bench.stratified_sample(rows, 400, seed=0)
    assert len(sample) == 400
    assert sum(r["label"] for r in sample) == 80
    ids = [r["id"] for r in sample]
    assert ids == sorted(ids) and len(set(ids)) == 400
    assert ids == [r["id"] for r in bench.stratified_sample(rows, 400, seed=0)]
    assert ids != [r["id"] for r in bench.stratified_sample(rows, 400, seed=1)]
    assert len(bench.stratified_sample(rows, 5000)) == 1000


def test_load_dataset_validates_rows(tmp_path: Path) -> None:
    good = tmp_path / "good.jsonl"
    good.write_text(json.dumps({"id": 1, "context": "c", "output": "o", "label": 1}) + "\n\n")
    assert bench.load_dataset(good) == [{"id": "1", "context": "c", "output": "o", "label": 1}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"id": 1, "context": "c", "output": "o", "label": 2}) + "\n")
    with pytest.raises(InputError, match="bad.jsonl:1"):
        bench.load_dataset(bad)
    dup = tmp_path / "dup.jsonl"
    dup.write_text((json.dumps({"id": 1, "context": "c", "output": "o", "label": 0}) + "\n") * 2)
    with pytest.raises(InputError, match="duplicate"):
        bench.load_dataset(dup)
    with pytest.raises(InputError, match="no such file"):
        bench.load_dataset("nope", data_dir=tmp_path)


# ----------------------------------------------------------------------------------------------- runs


def _triples_llm() -> ScriptedChatModel:
    def respond(messages) -> str:  # type: ignore[no-untyped-def]
        text = str(messages[-1].content).split("<input>")[-1].split("</input>")[0]
        return f'<python>[["{text}", "is", "stated"]]</python>'

    return ScriptedChatModel(respond=respond, model_label="fake-llm")


def _support(premise: str, hypothesis: str) -> float:
    return keyword_support(premise, hypothesis.replace(" is stated", ""))


def _dataset(n: int) -> list[dict]:
    rows = []
    for i in range(n):
        hallucinated = i % 3 == 0
        rows.append({"id": f"row-{i}", "label": int(hallucinated), "context": f"alpha{i} beta{i} gamma",
                     "output": f"alpha{i} delta" if hallucinated else f"alpha{i} beta{i}"})
    return rows


class Stop(Exception):
    """Stands for an interruption (Ctrl-C, a killed process) in the middle of a run."""


def _run(rows: list[dict], tmp: Path, llm=None, scorer=None, **kw):  # type: ignore[no-untyped-def]
    return bench.run_detection(
        rows, tmp / "out.jsonl", dataset="toy", llm=llm or _triples_llm(), scorer=scorer or FunctionScorer(_support),
        kg_cache=tmp / "kg.sqlite", kg_file=tmp / "kg.jsonl", show_progress=False, **kw)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_run_records_raw_and_graph_scores_per_row(tmp_path: Path) -> None:
    rows = _dataset(6)
    summary = _run(rows, tmp_path)
    assert (summary.done, summary.errors, summary.llm_calls) == (6, 0, 6)
    out = {r["id"]: r for r in _lines(tmp_path / "out.jsonl")}
    assert set(out) == {r["id"] for r in rows}
    bad, good = out["row-0"], out["row-1"]
    assert bad["label"] == 1 and bad["p_graph"] == pytest.approx(0.75) and bad["p_raw"] == pytest.approx(0.75)
    assert good["p_graph"] == 0.0 and good["triples"] == [["alpha1 beta1", "is", "stated", 0.0]]
    assert good["llm"] == "fake-llm" and good["scorer"] == "function" and good["error"] is None


def test_interrupted_run_resumes_without_duplicate_or_missing_rows(tmp_path: Path) -> None:
    rows = _dataset(10)
    seen: list[str] = []

    def interrupt_after_four(row: dict) -> None:
        seen.append(row["id"])
        if len(seen) == 4:
            raise Stop

    with pytest.raises(Stop):
        _run(rows, tmp_path, on_row=interrupt_after_four)
    assert len(_lines(tmp_path / "out.jsonl")) == 4
    llm = _triples_llm()
    summary = _run(rows, tmp_path, llm=llm)
    assert (summary.skipped, summary.done) == (4, 6)
    assert len(llm.calls) == 6  # only the rows not done before
    ids = [r["id"] for r in _lines(tmp_path / "out.jsonl")]
    assert sorted(ids) == sorted(r["id"] for r in rows) and len(ids) == len(set(ids))
    # A third run has nothing left to do.
    assert _run(rows, tmp_path).done == 0


def test_torn_last_line_and_errored_rows_are_redone(tmp_path: Path) -> None:
    rows = _dataset(5)

    def flaky(premise: str, hypothesis: str) -> float:
        if "alpha2" in premise:
            raise RuntimeError("scorer crashed")
        return _support(premise, hypothesis)

    summary = _run(rows, tmp_path, scorer=FunctionScorer(flaky))
    assert summary.errors == 1 and summary.error_ids == ["row-2"]
    with (tmp_path / "out.jsonl").open("a") as fh:
        fh.write('{"id": "row-9", "label"')  # a write cut short
    summary = _run(rows, tmp_path)
    assert (summary.skipped, summary.done, summary.errors) == (4, 1, 0)
    lines = _lines(tmp_path / "out.jsonl")  # append-only: the errored row stays, the torn line is cut
    assert [r["id"] for r in lines] == [f"row-{i}" for i in range(5)] + ["row-2"]
    out = bench.load_results(tmp_path / "out.jsonl")  # the last row of an id wins
    assert sorted(r["id"] for r in out) == [f"row-{i}" for i in range(5)]
    assert all(r["error"] is None for r in out)


def test_kg_export_lets_a_rerun_with_a_new_scorer_make_no_llm_call(tmp_path: Path) -> None:
    rows = _dataset(6)
    _run(rows, tmp_path)
    exported = _lines(tmp_path / "kg.jsonl")
    assert len(exported) == 6 and {e["llm"] for e in exported} == {"fake-llm"}
    # A clean clone: no SQLite cache, only the exported file; the stand-in model refuses every call.
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "kg.jsonl").write_text((tmp_path / "kg.jsonl").read_text())
    stand_in = bench.cache_only_chat_model("fake-llm")
    summary = bench.run_detection(
        rows, clean / "out.jsonl", dataset="toy", llm=stand_in, scorer=KeywordScorer(),
        kg_cache=clean / "kg.sqlite", kg_file=clean / "kg.jsonl", show_progress=False)
    assert (summary.done, summary.errors, summary.llm_calls) == (6, 0, 0)
    assert stand_in.calls == []
    first = {r["id"]: r["triples"] for r in _lines(tmp_path / "out.jsonl")}
    again = {r["id"]: r["triples"] for r in _lines(clean / "out.jsonl")}
    assert {k: [t[:3] for t in v] for k, v in first.items()} == {k: [t[:3] for t in v] for k, v in again.items()}
    assert len(_lines(clean / "kg.jsonl")) == 6  # nothing re-exported


def test_cache_only_model_fails_rows_without_a_cached_kg(tmp_path: Path) -> None:
    rows = _dataset(2)
    summary = bench.run_detection(
        rows, tmp_path / "out.jsonl", dataset="toy", llm=bench.cache_only_chat_model("fake-llm"),
        scorer=KeywordScorer(), kg_cache=tmp_path / "kg.sqlite", max_retries=0, show_progress=False)
    assert summary.errors == 2
    assert all("no cached knowledge graph" in r["error"] for r in _lines(tmp_path / "out.jsonl"))


def test_seed_kg_cache_loads_exported_entries_once(tmp_path: Path) -> None:
    from grapheval_plugins.cache import CachedKG

    path = tmp_path / "kg.jsonl"
    entries = [("m", "v1", "text a", CachedKG([["a", "b", "c"]], "raw a")),
               ("m", "v1", "text b", CachedKG([["d", "e", "f"]], None))]
    assert bench.export_kg(path, entries) == 2
    assert bench.export_kg(path, entries) == 0
    cache = SQLiteKGCache(tmp_path / "c.sqlite")
    assert bench.seed_kg_cache(path, cache) == 2
    assert bench.seed_kg_cache(path, cache) == 0
    assert cache.get("m", "v1", "text a").triples == [["a", "b", "c"]]
    assert cache.get("m", "v2", "text a") is None


def test_render_option_changes_the_hypothesis(tmp_path: Path) -> None:
    scorer = FunctionScorer(_support)
    _run(_dataset(1), tmp_path, scorer=scorer, render="sentence")
    hypotheses = [h for batch in scorer.batches for _, h in batch]
    assert "Alpha0 delta is stated." in hypotheses
    with pytest.raises(InputError):
        _run(_dataset(1), tmp_path / "x", render="fancy")


def test_a_second_run_on_the_same_file_is_refused_while_the_first_holds_it(tmp_path: Path) -> None:
    from filelock import FileLock

    with FileLock(bench._lock_path(tmp_path / "out.jsonl")), pytest.raises(InputError, match="another run"):
        _run(_dataset(1), tmp_path)
    assert _run(_dataset(1), tmp_path).done == 1


def test_a_fallback_is_exported_so_a_rerun_from_the_file_reproduces_it(tmp_path: Path) -> None:
    rows = _dataset(3)
    unparsable = ScriptedChatModel(responses=["I cannot do that."], model_label="fake-llm")
    first = _run(rows, tmp_path, llm=unparsable)
    assert first.errors == 0 and first.llm_calls == 9  # 3 attempts per row, all unparsable
    exported = _lines(tmp_path / "kg.jsonl")
    assert len(exported) == 3 and all(e["triples"] == [] for e in exported)
    clean = tmp_path / "clean"
    clean.mkdir()
    (clean / "kg.jsonl").write_text((tmp_path / "kg.jsonl").read_text())
    again = bench.run_detection(rows, clean / "out.jsonl", dataset="toy", llm=bench.cache_only_chat_model("fake-llm"),
                                scorer=FunctionScorer(_support), kg_cache=clean / "kg.sqlite",
                                kg_file=clean / "kg.jsonl", show_progress=False)
    assert (again.errors, again.llm_calls) == (0, 0)
    before = {r["id"]: r["p_graph"] for r in _lines(tmp_path / "out.jsonl")}
    after = {r["id"]: r["p_graph"] for r in _lines(clean / "out.jsonl")}
    assert before == after


def test_a_graph_from_the_on_disk_cache_is_exported_to_the_kg_file_too(tmp_path: Path) -> None:
    rows = _dataset(3)
    _run(rows, tmp_path)  # fills the SQLite cache and the file
    (tmp_path / "kg.jsonl").unlink()  # a file that never held them (another run's cache, a new file name)
    (tmp_path / "out.jsonl").unlink()
    llm = _triples_llm()
    summary = _run(rows, tmp_path, llm=llm)
    assert summary.done == 3 and llm.calls == []  # every graph from the cache
    assert sorted(e["text"] for e in _lines(tmp_path / "kg.jsonl")) == sorted(r["output"] for r in rows)
    (tmp_path / "out.jsonl").unlink()
    _run(rows, tmp_path)
    assert len(_lines(tmp_path / "kg.jsonl")) == 3  # exported once


def test_done_fallback_rows_of_an_older_file_are_backfilled_into_the_kg_file(tmp_path: Path) -> None:
    rows = _dataset(2)
    (tmp_path / "out.jsonl").write_text("".join(
        json.dumps({"id": r["id"], "label": r["label"], "p_raw": 0.1, "p_graph": 0.1, "triples": [],
                    "fallback": True, "cached": False, "llm": "fake-llm", "prompt": "v1", "error": None}) + "\n"
        for r in rows))
    summary = _run(rows, tmp_path)
    assert summary.done == 0
    assert sorted((e["text"], e["prompt"], e["triples"]) for e in _lines(tmp_path / "kg.jsonl")) == sorted(
        (r["output"], "v1", []) for r in rows)


def _detection_script():  # type: ignore[no-untyped-def]
    from bench_scripts import load_script

    return load_script("benchmarks/detection.py", "bench_detection_script")


def test_pairs_lever_reads_subject_predicate_pairs_beside_triples() -> None:
    module = _detection_script()
    answer = ('<python>[["Jordan Spieth", "first start-to-finish winner at Augusta"], ["Tiger Woods", "record"], '
              '["a", "b", "c"]]</python>')
    assert module.lenient_triples(answer) == [
        ["a", "b", "c"], ["Jordan Spieth", "first", "start-to-finish winner at Augusta"], ["Tiger Woods", "is", "record"]]
    assert module.lenient_triples("no list here") == []


def test_report_rebuilt_from_a_detection_row_matches_the_pipelines_report(tmp_path: Path) -> None:
    from grapheval_plugins import GraphEval

    rows = _dataset(6)
    _run(rows, tmp_path)
    engine = GraphEval(llm=_triples_llm(), scorer=FunctionScorer(_support))
    for det in _lines(tmp_path / "out.jsonl"):
        row = next(r for r in rows if r["id"] == det["id"])
        live = engine.evaluate(row["context"], row["output"])
        rebuilt = bench.report_from_detection_row(det, row["output"])
        assert rebuilt.hallucinated == live.hallucinated
        assert rebuilt.score == pytest.approx(live.score, abs=1e-6)
        assert [(c.claim, c.triple, c.unsupported) for c in rebuilt.claims] == [
            (c.claim, c.triple, c.unsupported) for c in live.claims
        ]


def test_report_rebuilt_from_a_fallback_row_is_one_whole_output_claim() -> None:
    row = {"id": "r", "p_graph": 0.7, "triples": [], "fallback": True, "llm_calls": 3, "render": "concat"}
    report = bench.report_from_detection_row(row, "The whole output.")
    assert report.hallucinated and report.extraction is not None and report.extraction.fallback
    assert [(c.claim, c.triple) for c in report.unsupported] == [("The whole output.", None)]


@pytest.mark.parametrize("bad", [{"error": "check: boom", "p_graph": None}, {"p_graph": 0.2, "render": "sentence"}])
def test_report_is_not_rebuilt_from_an_errored_or_differently_rendered_row(bad: dict) -> None:
    with pytest.raises(InputError, match="row"):
        bench.report_from_detection_row({"id": "r", "triples": [], **bad}, "text")


_STUDY_ROW = {"id": "q1", "p_raw": 0.5, "p_graph": 0.45, "triples": [["Ann", "won", "gold", 0.45]], "fallback": False,
              "llm_calls": 1, "cached": False, "render": "concat", "prompt": "kg-a/1-examples-first",
              "llm": "local:qwen2.5-coder-1.5b", "scorer": "judge:local:qwen2.5-coder-1.5b"}


def test_read_jsonl_skips_what_it_cannot_read(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\nnot json\n"a string"\n{"b": 2}\n{"c"')
    assert list(bench.read_jsonl(path)) == [{"a": 1}, {"b": 2}]
    assert list(bench.read_jsonl(tmp_path / "missing.jsonl")) == []


def test_a_detection_row_is_decided_by_the_rule_in_force_not_always_the_papers() -> None:
    """The row's scorer has hybrid weights fitted (without fidelity): the default engine decides it by them. The
    paper's rule would pass it (largest triple 0.45); the hybrid rule, reading the whole output too, flags it."""
    from grapheval_plugins.aggregate import fitted_weights

    weights = fitted_weights(_STUDY_ROW["scorer"], _STUDY_ROW["prompt"], "off")
    assert weights is not None
    report = bench.report_from_detection_row(_STUDY_ROW, "Ann won gold.")
    assert report.method == "hybrid" and report.decision is not None and report.decision.rule == "hybrid"
    assert report.score == pytest.approx(1.0 - weights.probability(0.5, [0.45]))
    assert report.hallucinated is True and report.whole_output is not None
    paper = bench.report_from_detection_row(_STUDY_ROW, "Ann won gold.", rule="paper")
    assert (paper.method, paper.hallucinated, paper.score) == ("paper", False, pytest.approx(0.55))
    unfitted = bench.report_from_detection_row({**_STUDY_ROW, "scorer": "nli:my-model"}, "Ann won gold.")
    assert unfitted.method == "paper" and unfitted.hallucinated is False  # no weights: the paper's rule, as the engine


def test_pairs_lever_copies_rows_whose_graph_it_does_not_change_and_scores_only_fallbacks(tmp_path: Path) -> None:
    module = _detection_script()
    rows = [{"id": f"r{i}"} for i in range(4)]
    base = {f"r{i}": {"id": f"r{i}", "p_graph": 0.1 * i, "fallback": i % 2 == 1, "prompt": "kg-a/1",
                      "llm_calls": 1, "cached": False} for i in range(4)}
    target = tmp_path / "pairs.jsonl"
    todo = module.copy_unchanged_rows(rows, base, target, "kg-a/1+pairs")
    assert [r["id"] for r in todo] == ["r1", "r3"]
    copied = {r["id"]: r for r in _lines(target)}
    assert set(copied) == {"r0", "r2"}
    assert copied["r2"]["p_graph"] == pytest.approx(0.2) and copied["r2"]["prompt"] == "kg-a/1+pairs"
    assert copied["r2"]["llm_calls"] == 0 and copied["r2"]["copied"] is True
    # a second call copies nothing twice
    module.copy_unchanged_rows(rows, base, target, "kg-a/1+pairs")
    assert len(_lines(target)) == 2


def test_grounded_lever_drops_triples_whose_words_the_output_lacks_and_falls_back_to_raw() -> None:
    module = _detection_script()
    output = "Bahar Mustafa's students said she banned men from the event."
    assert module.is_grounded(output, "Bahar Mustafa", "men from the event")
    assert not module.is_grounded(output, "Bahar Mustafa", "a man")
    row = {"id": "r", "prompt": "kg-a/1", "p_raw": 0.3, "p_graph": 0.9, "fallback": False,
           "triples": [["Bahar Mustafa", "is a", "man", 0.9], ["Bahar Mustafa", "banned", "men", 0.2]]}
    kept = module.grounded_row(row, output)
    assert kept["p_graph"] == 0.2 and kept["dropped"] == [["Bahar Mustafa", "is a", "man", 0.9]]
    assert kept["prompt"] == "kg-a/1+grounded"
    none_kept = module.grounded_row({**row, "triples": row["triples"][:1]}, output)
    assert none_kept["p_graph"] == 0.3 and none_kept["fallback"]  # the whole output's score, as GraphEval's fallback


def test_merge_appends_only_the_rows_the_main_file_lacks_and_skips_errors(tmp_path: Path) -> None:
    main, side = tmp_path / "main.jsonl", tmp_path / "side.jsonl"
    main.write_text(json.dumps({"id": "a", "p_graph": 0.1}) + "\n")
    side.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "a", "p_graph": 0.9}, {"id": "b", "p_graph": 0.2}, {"id": "c", "error": "check: boom"}]))
    assert bench.merge_results(side, main) == 1
    assert {r["id"]: r["p_graph"] for r in bench.load_results(main)} == {"a": 0.1, "b": 0.2}
    assert bench.merge_results(side, main) == 0  # idempotent
    from filelock import FileLock

    with FileLock(bench._lock_path(main)), pytest.raises(InputError, match="another run"):
        bench.merge_results(side, main)  # a run still writing the main file

    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"id": "d", "p_graph": 0.3, "scorer": "another"}) + "\n")
    with pytest.raises(InputError, match="another run"):
        bench.merge_results(other, main)  # rows of a different scorer


def test_reverse_run_walks_the_run_order_from_its_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    module = _detection_script()
    data = tmp_path / "set.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in _dataset(5)))
    order = [r["id"] for r in module.dataset_rows(str(data), None, 0)]
    seen: list[str] = []

    def fake_run(rows, target, **kwargs):  # type: ignore[no-untyped-def]
        seen.extend(r["id"] for r in rows)
        return bench.RunSummary(path=Path(target), total=len(rows), done=len(rows))

    monkeypatch.setattr(module.bench, "run_detection", fake_run)
    result = CliRunner().invoke(module.app, ["run", str(data), "--limit", "4", "--reverse",
                                             "--out", str(tmp_path / "o.jsonl")])
    assert result.exit_code == 0, result.output
    assert seen == order[:4][::-1]


def test_the_harness_is_not_part_of_the_installed_package_and_reexports_the_public_metrics() -> None:
    import grapheval_plugins
    from grapheval_plugins import calibrate

    package = Path(grapheval_plugins.__file__).resolve().parent
    assert not (package / "bench.py").exists() and not list(package.rglob("harness.py"))
    assert bench.balanced_accuracy is calibrate.balanced_accuracy and bench.fit_threshold is calibrate.fit_threshold
    assert bench.default_data_dir().parts[-3:] == ("shared", "data", "benchmarks")
    assert Path(bench.__file__).resolve().parent.name == "benchmarks"


@pytest.mark.parametrize("script", ["detection.py", "bench_correct.py", "cost.py", "bench_local.py", "bench_engine.py",
                                    "bench_judge_prompt.py", "bench_row_cost.py"])
def test_every_benchmark_script_answers_help(script: str) -> None:
    import subprocess
    import sys

    from bench_scripts import ROOT

    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--help"], capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Usage" in out.stdout


def test_operating_points_cap_the_false_alarms_and_take_the_best_balanced_accuracy_under_the_cap() -> None:
    module = _detection_script()
    labels = [0, 0, 0, 0, 0, 1, 1, 1]
    scores = [0.1, 0.2, 0.3, 0.6, 0.9, 0.5, 0.7, 0.95]
    t = module.alarm_capped_threshold(labels, scores, cap=0.2)
    flagged = [s > t for s in scores]
    assert sum(f for f, y in zip(flagged, labels) if y == 0) <= 1  # at most 20 % of the 5 faithful rows
    assert t == 0.6  # 0.5 would flag two faithful rows; above 0.6 only the 0.7 and 0.95 rows are caught
    assert module.alarm_capped_threshold(labels, scores, cap=1.0) == 0.3  # uncapped: the best balanced accuracy


def test_loop_stop_replay_keeps_the_answer_prefix_that_parses_to_the_same_graph() -> None:
    from bench_scripts import load_script

    from grapheval_plugins.extract.parser import parse_triples

    module = load_script("benchmarks/bench_loop_stop.py", "bench_loop_stop_script")
    answer = '<python>[["Bahar Mustafa", "works at", "a university"], ' + '["Bahar Mustafa", "is a", "officer"], ' * 30
    tokens = list(answer.encode("utf-8"))
    kept = module.stop_at(tokens, lambda ts: bytes(ts))
    assert kept < len(tokens) and answer[:kept].count("officer") == 4  # the fourth written, not yet closed
    assert parse_triples(answer[:kept]).triples == parse_triples(answer).triples
    assert module.stop_at(list(b"no loop here, just one answer"), lambda ts: bytes(ts)) == 29


def test_judge_prompt_variants_read_the_claim_after_the_shared_context_with_fewer_tokens_a_claim() -> None:
    from bench_scripts import load_script

    from grapheval_plugins.local.judge import JUDGE_PROMPT, JUDGE_PROMPTS

    module = load_script("benchmarks/bench_judge_prompt.py", "bench_judge_prompt_script")
    assert module.VARIANTS["question-first"] is JUDGE_PROMPTS["qwen2.5-coder-1.5b"]  # the 1.5B's wording
    assert module.VARIANTS[module.COMMITTED] is JUDGE_PROMPT

    def text(segments: list[tuple[str, bool]]) -> str:
        return "".join(t for t, _ in segments)

    after = module.VARIANTS[module.COMMITTED]  # the committed detection files' wording: the question after the claim
    after_claim = text(after.claim_segments("Anna won"))
    assert after_claim.startswith("Claim: Anna won\n\nIs the claim supported by the context?")
    assert text(after.prefix_segments("CONTEXT")).endswith("<|im_start|>user\nContext:\nCONTEXT\n\n")
    for name in ("claim-only", "question-first"):
        prompt = module.VARIANTS[name]
        prefix, claim = text(prompt.prefix_segments("CONTEXT")), text(prompt.claim_segments("Anna won"))
        assert prefix.endswith("Context:\nCONTEXT\n\n") and claim.startswith("Claim: Anna won<|im_end|>")
        assert "Is the claim supported" not in claim and len(claim) < len(after_claim) - 60
        assert prompt.labels == after.labels and prompt.system == after.system
    assert "Is the claim below supported" in text(module.VARIANTS["question-first"].prefix_segments("CONTEXT"))


def test_the_shipped_1_5b_judge_is_the_one_that_scored_the_question_first_files() -> None:
    """The hybrid weights of the 1.5B judge are fitted on these files: every row records the fingerprint of the
    judge that ``GraphEval()`` builds today (its wording, calibration, labels and chunking)."""
    from bench_scripts import load_script

    from grapheval_plugins.models import resolve_scorer

    module = load_script("benchmarks/bench_judge_prompt.py", "bench_judge_prompt_script")
    shipped = resolve_scorer(module.JUDGE).fingerprint()  # nothing loads
    for name in module.SETS:
        rows = module.bench.load_results(module.variant_path("question-first", name))
        assert len(rows) >= 40 and {r["fingerprint"] for r in rows} == {shipped}


def test_judge_prompt_report_reads_held_out_rows_outside_the_lab_subset_and_fit_prints_both_entries() -> None:
    from bench_scripts import load_script
    from typer.testing import CliRunner

    module = load_script("benchmarks/bench_judge_prompt.py", "bench_judge_prompt_script")
    lab = module.detection.lab_ids("qags_x")
    every = module.report_order("qags_x", True, False, None)
    held_out = module.report_order("qags_x", False, True, None)
    assert len(every) == len(set(every)) == 239 and every[: len(lab)] == lab  # the lab rows first, then the rest
    assert held_out == every[len(lab):] and not set(held_out) & set(lab)
    assert module.report_order("qags_x", False, False, 5) == lab[:5]
    result = CliRunner().invoke(module.app, ["report", "--all", "--held-out"])
    assert result.exit_code != 0 and "exclude each other" in result.output
    result = CliRunner().invoke(module.app, ["fit", "--variant", "question-first"])  # the committed per-row files
    assert result.exit_code == 0, result.output
    assert result.output.count("HybridWeights(") == 2 and 'fidelity="off"' in result.output
    assert 'fidelity="drop"' in result.output and "judge wording question-first" in result.output
    # the shipped weights are what `fit` prints from the committed files
    from grapheval_plugins.aggregate import fitted_weights
    from grapheval_plugins.extract.prompts import KG_PROMPT

    for fidelity in ("off", "drop"):
        shipped = fitted_weights(module.JUDGE, KG_PROMPT.version, fidelity)
        assert shipped is not None and shipped.fitted_on in result.output
        assert f"whole={shipped.whole:.4f}, claims={shipped.claims:.4f}, bias={shipped.bias:.4f}" in result.output
