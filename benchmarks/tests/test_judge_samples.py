"""``benchmarks/bench_judge_logprobs.py``'s reading of sampled answers: a claim's P(unsupported) is the mean over
the answers that judged it, a row's the largest of its claims', from the temperature-0 answer and k - 1 sampled
ones or from k sampled ones. No model, no network."""

from __future__ import annotations

import pytest
from bench_scripts import load_harness, load_script

load_harness()  # the script imports the harness beside it
bench = load_script("benchmarks/bench_judge_logprobs.py", "judge_logprobs_under_test")

ROW = {"claims": [{"claim": "a", "verdict": "supported", "stated": 0.9},
                  {"claim": "b", "error": "no verdict after one retry"}]}
SAMPLED = {"samples": [
    {"claims": [{"verdict": "supported", "stated": 0.5}, {"verdict": "unknown", "stated": 0.2}]},
    {"claims": [None, {"verdict": "supported", "stated": 0.6}]},
    {"claims": [{"verdict": "contradicted", "stated": 0.0}, None]},
]}


def test_the_first_answer_and_the_sampled_ones_are_averaged_per_claim() -> None:
    assert bench.sampled_scores(ROW, SAMPLED, 1, with_first=True) == pytest.approx(0.1)  # claim b: no answer yet
    # claim a: 1 - mean(0.9, 0.5) = 0.3; claim b: 1 - 0.2 = 0.8
    assert bench.sampled_scores(ROW, SAMPLED, 2, with_first=True) == pytest.approx(0.8)
    # claim a: 1 - mean(0.9, 0.5) (the second sample skipped it); claim b: 1 - mean(0.2, 0.6) = 0.6
    assert bench.sampled_scores(ROW, SAMPLED, 3, with_first=True) == pytest.approx(0.6)


def test_sampled_only_and_a_chosen_subset() -> None:
    # claim a: 1 - mean(0.5, 0.0) = 0.75; claim b: 1 - mean(0.2, 0.6) = 0.6
    assert bench.sampled_scores(ROW, SAMPLED, 3, with_first=False) == pytest.approx(0.75)
    # answers 1 and 2 only: claim a from answer 2 alone (1 - 0.0); claim b from answer 1 (1 - 0.6)
    assert bench.sampled_scores(ROW, SAMPLED, 2, with_first=False, chosen=[1, 2]) == pytest.approx(1.0)


def test_a_row_no_answer_judged_has_no_score() -> None:
    row = {"claims": [{"claim": "a", "error": "no verdict"}]}
    assert bench.sampled_scores(row, {"samples": [{"claims": [None]}]}, 2, with_first=True) is None
