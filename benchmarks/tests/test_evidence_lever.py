"""Lever 3 of issue 26, evidence per claim: each triple scored against the few context sentences that bear on it
(``detection.py evidence``)."""

from __future__ import annotations

from typing import Any

import pytest

from grapheval_plugins.testing import FunctionScorer
from grapheval_plugins.types import Triple

CONTEXT = ("Marie Curie was born in Warsaw. She moved to Paris in 1891. It rained.",
           "Curie won two Nobel Prizes. Her daughter Irene won one.")


def _detection_script() -> Any:
    from bench_scripts import load_script

    return load_script("benchmarks/detection.py", "bench_detection_script")


def test_the_premise_is_the_k_closest_sentences_across_passages_in_context_order() -> None:
    module = _detection_script()
    triple = Triple(subject="Marie Curie", relation="won", object="three Nobel Prizes")
    premise, fell = module.evidence_premise(CONTEXT, triple, 2)
    # "Curie won two Nobel Prizes." shares 5 weighted words, "Marie Curie was born…" 4, "Irene won one." 1.
    assert (premise, fell) == (("Marie Curie was born in Warsaw. Curie won two Nobel Prizes.",), False)
    assert module.evidence_premise(CONTEXT, triple, 1)[0] == ("Curie won two Nobel Prizes.",)
    # sentences sharing no word ("She moved to Paris in 1891.", "It rained.") never make the premise
    assert module.evidence_premise(CONTEXT, triple, 50)[0] == (
        "Marie Curie was born in Warsaw. Curie won two Nobel Prizes. Her daughter Irene won one.",)


def test_a_triple_sharing_no_word_falls_back_to_the_whole_context() -> None:
    module = _detection_script()
    assert module.evidence_premise(CONTEXT, Triple(subject="Einstein", relation="played", object="violin"), 3) == (
        CONTEXT, True)
    # stop words and one-letter words do not count as shared
    assert module.evidence_premise(CONTEXT, Triple(subject="she", relation="was", object="a"), 3)[1] is True


def test_no_k_is_the_whole_context_baseline() -> None:
    module = _detection_script()
    triple = Triple(subject="Marie Curie", relation="won", object="two Nobel Prizes")
    assert module.evidence_premise(CONTEXT, triple, None) == (CONTEXT, False)


def test_the_row_records_what_the_scorer_judged_against_which_premise() -> None:
    module = _detection_script()
    row: dict[str, Any] = {"id": "r", "dataset": "toy", "label": 0, "prompt": "v", "render": "concat",
           "triples": [["Marie Curie", "won", "two Nobel Prizes", 0.7], ["Einstein", "played", "violin", 0.9]]}
    triples = [Triple.from_list(t[:3]) for t in row["triples"]]
    premises = [module.evidence_premise(CONTEXT, t, 1) for t in triples]
    scorer = FunctionScorer(lambda premise, claim: 0.8 if len(premise) < 40 else 0.1, name="toy")
    scores = scorer.check([p for p, _ in premises], [t.sentence() for t in triples])
    out = module.evidence_row(row, premises, scores, scorer, 1, 0.5, 2)
    assert [t[4] for t in out["triples"]] == [pytest.approx(0.2), pytest.approx(0.9)]
    assert out["fallback"] == [1] and out["k"] == 1 and out["claims_scored"] == 2
    assert out["premise_words"] == [5, sum(len(p.split()) for p in CONTEXT)]
    pairs = [pair for batch in scorer.batches for pair in batch]
    assert ("Curie won two Nobel Prizes.", "Marie Curie won two Nobel Prizes") in pairs
    assert all(premise != "Curie won two Nobel Prizes." for premise, claim in pairs if claim.startswith("Einstein"))


def test_evidence_scores_without_evidence_are_the_lab_reports_scores() -> None:
    """Over whole-context P the evidence tables decide as ``lab-report`` (with and without fidelity)."""
    module = _detection_script()
    row: dict[str, Any] = {"id": "r", "p_raw": 0.4, "triples": [["a", "b", "c", 0.9], ["d", "e", "f", 0.2], ["g", "h", "i", 0.6]]}
    ev = {"triples": [[*t, p] for t, p in zip(row["triples"], [0.1, 0.3, None])]}
    fid = {"triples": [[*t, p] for t, p in zip(row["triples"], [0.9, 0.1, 0.2])]}
    for f in (None, fid):
        assert module.evidence_scores(row, ev, f, False) == module.lab_scores(row, f)
    assert module.evidence_scores(row, ev, None, True) == (0.4, [0.1, 0.3, 0.6])  # no verdict: whole-context P
    assert module.evidence_scores(row, ev, fid, True) == (0.4, [0.3, 0.6])
    every_dropped = {"triples": [[*t, 0.9] for t in row["triples"]]}
    assert module.evidence_scores(row, ev, every_dropped, True) == (0.4, [0.4])  # the whole output decides
    with pytest.raises(ValueError, match="triples"):
        module.evidence_scores(row, {"triples": ev["triples"][:2]}, None, True)
