"""``benchmarks/peers.py``'s pure parts: P(hallucination) of a peer's row, the per-method statistics (rows scored,
and failures counted as faithful), the per-set and pooled table. No model, no network."""

from __future__ import annotations

import math

import pytest
from bench_scripts import load_harness, load_script

load_harness()  # the script imports the harness beside it
peers = load_script("benchmarks/peers.py", "peers_under_test")


def test_peer_p_is_one_minus_score_and_none_for_a_failure() -> None:
    assert peers.peer_p({"score": 0.75, "error": None}) == pytest.approx(0.25)
    assert peers.peer_p({"score": None, "error": "ValueError: invalid JSON"}) is None
    assert peers.peer_p(None) is None


def test_method_stats_over_scored_rows_and_with_failures_as_faithful() -> None:
    labels = [1, 1, 0, 0, 1]
    p = [0.9, None, 0.2, 0.6, 0.4]  # one failure (a hallucinated row)
    secs = [10.0, 20.0, 30.0, 40.0, 50.0]
    scored = peers.method_stats(labels, p, secs)
    assert (scored["rows"], scored["failures"]) == (4, 1)
    # scored rows: positives 0.9, 0.4; negatives 0.2, 0.6 -> pairs won 3 of 4
    assert scored["auc"] == pytest.approx(0.75)
    # at 0.5: TPR 1/2, TNR 1/2
    assert (scored["tpr"], scored["tnr"], scored["ba"]) == (0.5, 0.5, 0.5)
    assert scored["seconds"] == pytest.approx(30.0)  # seconds of every row, the failed one too
    every = peers.method_stats(labels, p, secs, failure_as_faithful=True)
    assert every["rows"] == 5
    assert every["tpr"] == pytest.approx(1 / 3)  # the failed hallucinated row counts as "faithful"
    # positives 0.9, 0.0, 0.4 vs negatives 0.2, 0.6: 3 of 6 pairs won
    assert every["auc"] == pytest.approx(0.5)


def test_threshold_is_strict_so_a_score_of_exactly_half_passes() -> None:
    stats = peers.method_stats([1, 0], [0.5, 0.5], [1.0, 1.0])
    assert (stats["tpr"], stats["tnr"]) == (0.0, 1.0)


def test_comparison_rows_per_set_and_pooled_with_two_lines_per_peer() -> None:
    def row(label: int, raw: float, peer: float | None) -> dict:
        return {"label": label, "methods": {"raw": (raw, 1.0, False), "Peer": (peer, 5.0, True)}}

    sets = {"a": [row(1, 0.9, 0.8), row(0, 0.1, None)], "b": [row(1, 0.4, 0.7), row(0, 0.6, 0.1)]}
    out = peers.comparison_rows(sets)
    assert [(name, method) for name, method, _ in out] == [
        ("a", "raw"), ("a", "Peer (rows it scored)"), ("a", "Peer (failure = faithful)"),
        ("b", "raw"), ("b", "Peer (rows it scored)"), ("b", "Peer (failure = faithful)"),
        ("pooled", "raw"), ("pooled", "Peer (rows it scored)"), ("pooled", "Peer (failure = faithful)"),
    ]
    stats = {(name, method): s for name, method, s in out}
    assert math.isnan(stats[("a", "Peer (rows it scored)")]["auc"])  # one class left: no AUC
    assert stats[("a", "Peer (failure = faithful)")]["ba"] == 1.0
    assert stats[("pooled", "raw")]["auc"] == pytest.approx(0.75)
    assert stats[("pooled", "Peer (rows it scored)")]["failures"] == 1
    assert stats[("pooled", "Peer (rows it scored)")]["rows"] == 3
    table = peers.markdown_table(out, {"a": (2, 1), "b": (2, 1), "pooled": (4, 2)})
    assert "| pooled (4; 2 halluc.) | raw | 4 | 75.0 |" in table
    assert "| a (2; 1 halluc.) | raw | 2 | 100.0 | 100.0 | 1.00 / 1.00 | 1.0 | 0 |" in table
