"""Lever 4 of issue 26, triples grouped per output sentence (``detection.py sentence-report``): the attribution of
each triple to an output sentence and the row scores over the groups."""

from __future__ import annotations

from typing import Any

import pytest

OUTPUT = ("paul merson was brought on with seven minutes left . andros townsend scored for england in turin . "
          "Curie won two Nobel Prizes.")


def _detection_script() -> Any:
    from bench_scripts import load_script

    return load_script("benchmarks/detection.py", "bench_detection_script")


def test_output_sentences_split_like_the_evidence_picker() -> None:
    module = _detection_script()
    assert module.output_sentences(OUTPUT) == [
        "paul merson was brought on with seven minutes left .",
        "andros townsend scored for england in turin .",
        "Curie won two Nobel Prizes.",
    ]
    assert module.output_sentences("One line\n\nAnother one. ") == ["One line", "Another one."]


def test_each_triple_goes_to_the_sentence_sharing_most_content_words() -> None:
    module = _detection_script()
    sentences = module.output_sentences(OUTPUT)
    triples = [
        ["Paul Merson", "was brought on", "seven minutes left"],  # sentence 0
        ["Townsend", "scored for", "England"],  # sentence 1
        ["Curie", "won", "a Nobel Prize"],  # sentence 2: "prizes" meets "prize" (plural trim)
        ["merson", "scored", "townsend"],  # 0 shares "merson" (2), 1 "townsend" (2) and "scored" (1)
        ["he", "was", "the"],  # stop words only: no sentence
        ["Zoe", "sang", "jazz"],  # no shared word
    ]
    assert module.attribute_triples(sentences, triples) == [0, 1, 2, 1, None, None]
    # a tie goes to the first sentence
    assert module.attribute_triples(["Ann ran.", "Ann sat."], [["Ann", "is", "tall"]]) == [0]
    assert module.attribute_triples([], [["Ann", "is", "tall"]]) == [None]


def test_groups_and_row_scores() -> None:
    module = _detection_script()
    groups = module.sentence_groups([0.9, 0.2, 0.7, 0.4, 0.6], [1, 0, 1, None, None])
    assert groups == [[0.2], [0.9, 0.7], [0.4], [0.6]]
    assert module.sentence_score(groups, "sent-min", 0.0) == 0.7
    assert module.sentence_score(groups, "sent-mean", 0.0) == pytest.approx(0.8)
    assert module.sentence_score(groups, "sent-frac", 0.0) == 0.5  # [0.9, 0.7] and [0.6] of 4 groups
    assert module.sentence_score([], "sent-min", 0.33) == 0.33  # no triple: the whole output decides
    with pytest.raises(ValueError, match="unknown sentence aggregate"):
        module.sentence_score(groups, "sent-max", 0.0)


def test_the_candidates_with_and_without_fidelity_on_one_row() -> None:
    module = _detection_script()
    default = {"id": "r", "label": 1, "p_raw": 0.3,
               "triples": [["a", "b", "c", 0.9], ["d", "e", "f", 0.2], ["g", "h", "i", 0.8]]}
    paper = {"id": "r", "p_graph": 0.95}
    # the second sentence's 0.8 triple is dropped by fidelity (P 0.7 against the output > 0.5)
    fid = {"triples": [["a", "b", "c", 0.9, 0.1], ["d", "e", "f", 0.2, 0.4], ["g", "h", "i", 0.8, 0.7]]}
    by = module._sentence_methods([(paper, default, fid, ["s0", "s1"], [0, 0, 1])])
    assert by["raw"] == [0.3] and by["paper"] == [0.95]
    assert by["max"] == [0.9] and by["max+fidelity"] == [0.9]
    assert by["sent-min"] == [0.8] and by["sent-min+fidelity"] == [0.2]
    assert by["sent-mean"] == [pytest.approx(0.8)] and by["sent-mean+fidelity"] == [pytest.approx(0.55)]
    assert by["sent-frac"] == [0.5] and by["sent-frac+fidelity"] == [0.0]
