"""The public calibration metrics: balanced accuracy, ROC AUC, threshold fitting (pure Python)."""

from __future__ import annotations

import math
import random

import pytest

from grapheval_plugins.calibrate import balanced_accuracy, fit_threshold, rates, roc_auc


def _pairwise_auc(labels: list[int], scores: list[float]) -> float:
    pos = [s for s, y in zip(scores, labels) if y == 1]
    neg = [s for s, y in zip(scores, labels) if y == 0]
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


def _brute_force_threshold(labels: list[int], scores: list[float]) -> float:
    distinct = sorted(set(scores))
    candidates = [distinct[0] - 1e-9, *((a + b) / 2 for a, b in zip(distinct, distinct[1:])), distinct[-1]]
    best = max(candidates, key=lambda t: (round(balanced_accuracy(labels, [s > t for s in scores]), 12), -abs(t - 0.5)))
    return min(1.0, max(0.0, best))


@pytest.mark.parametrize("seed", range(20))
def test_auc_and_threshold_agree_with_their_definitions_on_random_tied_data(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(2, 80)
    labels = [rng.randint(0, 1) for _ in range(n)]
    labels[0], labels[1] = 0, 1
    scores = [round(rng.random() * 0.6 + 0.3 * y, 1) for y in labels]  # coarse: many ties
    assert roc_auc(labels, scores) == pytest.approx(_pairwise_auc(labels, scores))
    assert fit_threshold(labels, scores) == pytest.approx(_brute_force_threshold(labels, scores))


def test_known_values_and_edge_cases() -> None:
    assert rates([1, 1, 1, 0, 0], [1, 0, 1, 0, 1]) == pytest.approx((2 / 3, 1 / 2))
    assert balanced_accuracy([1] * 3 + [0] * 97, [0] * 100) == 0.5
    assert math.isnan(balanced_accuracy([1, 1], [1, 0])) and math.isnan(roc_auc([1, 1], [0.2, 0.3]))
    assert roc_auc([0, 0, 1, 1], [0.9, 0.8, 0.2, 0.1]) == 0.0
    assert fit_threshold([1, 1], [0.2, 0.9]) == 0.5  # one class: nothing to fit
    with pytest.raises(ValueError, match="same length"):
        balanced_accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="no rows"):
        fit_threshold([], [])


def test_a_threshold_fitted_on_one_set_applies_to_another() -> None:
    fit_labels, fit_scores = [0, 0, 0, 1, 1, 1], [0.55, 0.6, 0.62, 0.8, 0.85, 0.9]
    t = fit_threshold(fit_labels, fit_scores)
    report_labels, report_scores = [0, 0, 1, 1], [0.58, 0.61, 0.83, 0.95]
    assert balanced_accuracy(report_labels, [s > t for s in report_scores]) == 1.0
    assert balanced_accuracy(report_labels, [s > 0.5 for s in report_scores]) == 0.5
