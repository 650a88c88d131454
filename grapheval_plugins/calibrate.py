"""Judging a detector on labelled rows (1: a hallucination, the positive class) and fitting its decision rule:
balanced accuracy, ROC AUC of scores higher for "more likely a hallucination", the best threshold, hybrid weights.

>>> balanced_accuracy([1, 1, 0, 0], [True, False, False, False])
0.75
>>> roc_auc([1, 1, 0, 0], [0.9, 0.4, 0.3, 0.1])
1.0
>>> fit_threshold([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.9])
0.25
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .aggregate import HybridWeights

__all__ = ["balanced_accuracy", "fit_hybrid", "fit_threshold", "rates", "roc_auc"]


def _columns(labels: Sequence[Any], values: Sequence[Any]) -> tuple[list[int], list[float]]:
    ys, vs = list(labels), list(values)
    if len(ys) != len(vs):
        raise ValueError(f"labels and values must have the same length, got {len(ys)} and {len(vs)}")
    try:
        return [int(y) for y in ys], [float(v) for v in vs]
    except (TypeError, ValueError) as exc:
        raise ValueError("labels and values must be 1-d sequences of numbers") from exc


def _by_class(labels: Sequence[Any], values: Sequence[Any]) -> tuple[list[float], list[float]]:
    y, v = _columns(labels, values)
    return sorted(x for x, lab in zip(v, y) if lab == 1), sorted(x for x, lab in zip(v, y) if lab == 0)


def rates(labels: Sequence[int], predicted: Sequence[bool | int]) -> tuple[float, float]:
    """(true-positive rate, true-negative rate), label 1 positive; ``nan`` for a class that is absent.

    >>> rates([1, 1, 0, 0], [1, 0, 0, 1])
    (0.5, 0.5)
    """
    pos, neg = _by_class(labels, predicted)
    tpr = sum(pos) / len(pos) if pos else math.nan
    tnr = 1.0 - sum(neg) / len(neg) if neg else math.nan
    return tpr, tnr


def balanced_accuracy(labels: Sequence[int], predicted: Sequence[bool | int]) -> float:
    """Mean of the true-positive and true-negative rates (label 1 = hallucination = positive).

    >>> round(balanced_accuracy([1, 0, 0, 0], [1, 1, 0, 0]), 4)
    0.8333
    """
    tpr, tnr = rates(labels, predicted)
    return (tpr + tnr) / 2


def roc_auc(labels: Sequence[int], scores: Sequence[float]) -> float:
    """Area under the ROC curve of ``scores`` (higher = more likely label 1), ties counted half
    (the Mann-Whitney U statistic); ``nan`` when one class is absent.

    >>> roc_auc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5])
    0.5
    """
    pos, neg = _by_class(labels, scores)
    if not pos or not neg:
        return math.nan
    u = sum(bisect.bisect_left(neg, p) + bisect.bisect_right(neg, p) for p in pos) / 2  # ties count half
    return u / (len(pos) * len(neg))


def fit_threshold(labels: Sequence[int], scores: Sequence[float]) -> float:
    """The threshold t, between two distinct scores, that maximises balanced accuracy of ``score > t`` (the closest
    to 0.5 on a tie; 0.5 when a class is absent), clipped to [0, 1].

    >>> round(fit_threshold([0, 1, 0, 1], [0.2, 0.6, 0.3, 0.7]), 6)
    0.45
    """
    y, s = _columns(labels, scores)
    if not s:
        raise ValueError("cannot fit a threshold on no rows")
    pos, neg = _by_class(y, s)
    if not pos or not neg:
        return 0.5
    distinct = sorted(set(s))
    candidates = [distinct[0] - 1e-9, *((a + b) / 2 for a, b in zip(distinct, distinct[1:])), distinct[-1]]
    best_t, best_key = 0.5, (-math.inf, -math.inf)
    for t in candidates:  # the rows with score <= t are predicted faithful
        tpr = (len(pos) - bisect.bisect_right(pos, t)) / len(pos)
        tnr = bisect.bisect_right(neg, t) / len(neg)
        key = (round((tpr + tnr) / 2, 12), -abs(t - 0.5))
        if key > best_key:
            best_t, best_key = t, key
    return min(1.0, max(0.0, best_t))


def fit_hybrid(
    labels: Sequence[int],
    p_whole: Sequence[float],
    p_claims: Sequence[float],
    *,
    fitted_on: str,
    l2: float = 1.0,
    max_iter: int = 100,
) -> HybridWeights:
    """Fit the ``hybrid`` rule's weights (:class:`~grapheval_plugins.aggregate.HybridWeights`): a class-balanced
    logistic regression of the label on ``logit(p_whole)`` and ``logit(p_claims)`` with an L2 penalty on both
    weights, by Newton's method (scikit-learn's ``LogisticRegression(C=1 / l2, class_weight="balanced")``), so the
    fitted rule's 0.5 is the balanced-accuracy threshold whatever the share of hallucinations.

    >>> w = fit_hybrid([0, 0, 0, 1, 1, 1], [0.1, 0.3, 0.6, 0.4, 0.7, 0.9], [0.2, 0.6, 0.5, 0.5, 0.9, 0.8],
    ...                fitted_on="six rows")
    >>> w.whole > 0 and w.claims > 0
    True
    """
    from .aggregate import HybridWeights, logit, sigmoid

    y, a = _columns(labels, p_whole)
    _, b = _columns(labels, p_claims)  # one value per label, as p_whole
    n_pos = sum(1 for v in y if v == 1)
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        raise ValueError("fitting needs rows of both classes")
    rows = [(1.0, logit(p), logit(q)) for p, q in zip(a, b)]
    weight = [len(y) / (2 * (n_pos if v == 1 else n_neg)) for v in y]
    beta = [0.0, 0.0, 0.0]  # bias, whole, claims
    penalty = [0.0, l2, l2]
    for _ in range(max_iter):
        grad = [penalty[j] * beta[j] for j in range(3)]
        hess = [[penalty[j] if j == k else 0.0 for k in range(3)] for j in range(3)]
        for x, target, w in zip(rows, y, weight):
            p = sigmoid(sum(bj * xj for bj, xj in zip(beta, x)))
            for j in range(3):
                grad[j] += w * (p - target) * x[j]
                for k in range(3):
                    hess[j][k] += w * p * (1 - p) * x[j] * x[k]
        step = _solve3(hess, grad)
        beta = [bj - sj for bj, sj in zip(beta, step)]
        if max(abs(sj) for sj in step) < 1e-10:
            break
    return HybridWeights(whole=beta[1], claims=beta[2], bias=beta[0], fitted_on=fitted_on)


def _solve3(m: list[list[float]], v: list[float]) -> list[float]:
    """Solve the 3×3 system ``m · x = v`` (Gaussian elimination with partial pivoting)."""
    a = [row[:] + [v[i]] for i, row in enumerate(m)]
    for col in range(3):
        pivot = max(range(col, 3), key=lambda r: abs(a[r][col]))
        a[col], a[pivot] = a[pivot], a[col]
        if a[col][col] == 0.0:
            raise ValueError("singular system: the features do not vary")
        for r in range(3):
            if r != col:
                f = a[r][col] / a[col][col]
                a[r] = [x - f * y for x, y in zip(a[r], a[col])]
    return [a[i][3] / a[i][i] for i in range(3)]
