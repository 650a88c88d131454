"""Extraction fidelity (``GraphEval(fidelity="drop")``): triples their own output does not support leave the decision."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grapheval_plugins import GraphEval
from grapheval_plugins.aggregate import FIDELITY_THRESHOLD, HybridWeights, faithful_to_output
from grapheval_plugins.exceptions import InputError
from grapheval_plugins.extract.prompts import KG_PROMPT
from grapheval_plugins.testing import FunctionScorer, KeywordScorer, ScriptedChatModel

CONTEXT = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
OUTPUT = "Marie Curie, born in Warsaw, won two Nobel Prizes."
# The second triple is an extraction error: the output never says it.
ANSWER = '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "moved to", "Berlin"]]</python>'
WEIGHTS = HybridWeights(whole=0.6, claims=0.2, bias=0.0, fitted_on="test")
DEFAULT_JUDGE = "judge:local:qwen2.5-coder-1.5b"


def engine(answer: str = ANSWER, **kwargs: object) -> GraphEval:
    return GraphEval(llm=ScriptedChatModel(responses=[answer]), cache=False, **kwargs)  # type: ignore[arg-type]


def pairs(scorer: FunctionScorer) -> list[tuple[str, str]]:
    return [pair for batch in scorer.batches for pair in batch]


def test_the_rule() -> None:
    assert FIDELITY_THRESHOLD == 0.5
    assert faithful_to_output(0.5) and not faithful_to_output(0.51) and faithful_to_output(None)


def test_auto_is_off_for_the_papers_rule_and_scorers_without_fidelity_weights() -> None:
    assert engine(scorer=KeywordScorer(), rule="paper").fidelity_in_force() == "off"
    assert engine(scorer=KeywordScorer()).fidelity_in_force() == "off"  # no weights fitted for it: paper's rule
    assert engine(scorer=FunctionScorer(lambda p, h: 1.0, name=DEFAULT_JUDGE), hybrid_weights=WEIGHTS
                  ).fidelity_in_force() == "off"  # your own weights were fitted without it
    assert engine(scorer=DEFAULT_JUDGE, mode="raw").fidelity_in_force() == "off"
    report = engine(scorer=KeywordScorer(), rule="paper").evaluate(CONTEXT, OUTPUT)
    assert [c.triple.as_list() for c in report.claims if c.triple] == [["Marie Curie", "born in", "Warsaw"],
                                                                       ["Marie Curie", "moved to", "Berlin"]]
    assert report.hallucinated is True  # a false alarm from the extraction error


def test_auto_is_on_for_the_default_judge_with_its_fidelity_weights() -> None:
    from grapheval_plugins.aggregate import fitted_weights

    scorer = FunctionScorer(lambda premise, h: 0.0 if "Berlin" in h else 1.0, name=DEFAULT_JUDGE)
    fitted = fitted_weights(DEFAULT_JUDGE, KG_PROMPT.version, "drop")
    assert fitted is not None and engine(scorer=scorer).fidelity_in_force() == "off"  # the name alone is not it
    scorer.fingerprint = lambda: fitted.fingerprint  # type: ignore[method-assign]  # the judge they were fitted with
    ge = engine(scorer=scorer)
    assert ge.fidelity_in_force() == "drop" and ge.decision_weights() is fitted
    report = ge.evaluate(CONTEXT, OUTPUT)
    assert [c.triple.as_list() for c in report.claims if c.triple] == [["Marie Curie", "born in", "Warsaw"]]
    assert (OUTPUT, "Marie Curie moved to Berlin") in pairs(scorer)
    assert engine(scorer=FunctionScorer(lambda p, h: 1.0, name=DEFAULT_JUDGE), fidelity="off"
                  ).fidelity_in_force() == "off"


def test_drop_scores_the_triples_against_their_output_after_the_context_and_drops_the_unsupported() -> None:
    scorer = KeywordScorer()
    report = engine(scorer=scorer, rule="paper", fidelity="drop").evaluate(CONTEXT, OUTPUT)
    # The context pass (two triples and the whole output, for the fallback), then the triple above the threshold
    # against the output (dropped), then the next one down.
    assert [len(batch) for batch in scorer.batches] == [3, 1, 1]
    assert pairs(scorer)[-2:] == [(OUTPUT, "Marie Curie moved to Berlin"), (OUTPUT, "Marie Curie born in Warsaw")]
    assert [c.triple.as_list() for c in report.claims if c.triple] == [["Marie Curie", "born in", "Warsaw"]]
    assert report.hallucinated is False and report.method == "paper"
    assert report.extraction is not None
    assert any("dropped ['Marie Curie', 'moved to', 'Berlin']" in note for note in report.extraction.issues)
    assert report.extraction.triples[1].object == "Berlin"  # the extraction itself is reported as it was


def test_when_every_triple_is_dropped_the_whole_output_decides() -> None:
    answer = '<python>[["Pierre", "moved to", "Berlin"]]</python>'
    output = "Marie Curie won three Nobel Prizes."
    for method in ("paper", "hybrid"):
        report = engine(answer, scorer=KeywordScorer(), rule=method, fidelity="drop",
                        hybrid_weights=WEIGHTS).evaluate(CONTEXT, output)
        assert [(c.claim, c.triple) for c in report.claims] == [(output, None)]
        assert report.whole_output is None
        assert report.hallucinated is True  # "three" is not in the context
        assert report.extraction is not None
        assert report.extraction.issues[-1] == ("fidelity: all 1 triple(s) dropped; the whole output is decided as "
                                                "one claim")
        assert "'Marie Curie won three Nobel Prizes.'" in report.explain()


def test_hybrid_with_fidelity_uses_the_kept_triples_and_the_whole_output() -> None:
    p_context = {"Marie Curie born in Warsaw": 0.9, "Marie Curie moved to Berlin": 0.1, OUTPUT: 0.8}
    scorer = FunctionScorer(lambda premise, h: 1.0 if premise == OUTPUT and "Berlin" not in h else
                            (0.0 if premise == OUTPUT else p_context[h]), name="judge:test")
    report = engine(scorer=scorer, fidelity="drop", hybrid_weights=WEIGHTS).evaluate(CONTEXT, OUTPUT)
    assert report.method == "hybrid"
    assert report.whole_output is not None and report.whole_output.p_unsupported == pytest.approx(0.2)
    assert report.score == pytest.approx(1 - WEIGHTS.probability(0.2, [0.1]))


def test_a_triple_without_a_verdict_against_the_output_stays() -> None:
    from grapheval_plugins.check.judge import JudgeScorer, LabelReading

    class Backend:
        name = "half"

        def label_logprobs(self, context: str, claims: list[str], labels: list[str]) -> list[LabelReading]:
            if context == OUTPUT:
                return [LabelReading(error="garbled")] * len(claims)
            return [LabelReading(verdict="supported")] * len(claims)

    report = engine(scorer=JudgeScorer(Backend()), rule="paper", fidelity="drop").evaluate(CONTEXT, OUTPUT)
    assert len([c for c in report.claims if c.triple]) == 2 and report.errors == []


def test_the_stages_apart_drop_the_same_triples() -> None:
    ge = engine(scorer=KeywordScorer(), rule="paper", fidelity="drop")
    [pending] = ge.extract_rows([{"context": CONTEXT, "output": OUTPUT}])
    [report] = ge.check_rows([pending])  # type: ignore[list-item]
    assert [c.triple.as_list() for c in report.claims if c.triple] == [["Marie Curie", "born in", "Warsaw"]]
    # Rows extracted by an engine without fidelity get the whole output added for the fallback.
    plain = engine(scorer=KeywordScorer(), rule="paper")
    [pending] = plain.extract_rows([{"context": CONTEXT, "output": OUTPUT}])
    [report] = ge.check_rows([pending])  # type: ignore[list-item]
    assert [c.triple.as_list() for c in report.claims if c.triple] == [["Marie Curie", "born in", "Warsaw"]]
    [many] = ge.evaluate_many([{"context": CONTEXT, "output": OUTPUT}])
    assert many.score == report.score


def test_fidelity_scores_come_from_the_score_cache_on_a_second_pass(tmp_path: Path) -> None:
    scorer = KeywordScorer()
    ge = engine(scorer=scorer, rule="paper", fidelity="drop", score_cache=tmp_path / "s.sqlite")
    ge.evaluate(CONTEXT, OUTPUT)
    scorer.batches.clear()
    GraphEval(llm=ScriptedChatModel(responses=[ANSWER]), scorer=scorer, rule="paper", fidelity="drop",
              score_cache=tmp_path / "s.sqlite", cache=False).evaluate(CONTEXT, OUTPUT)
    assert scorer.batches == []


def test_an_unknown_value_is_an_input_error() -> None:
    with pytest.raises(InputError, match="fidelity"):
        GraphEval(fidelity="maybe")  # type: ignore[arg-type]


THREE = ('<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "moved to", "Berlin"], '
         '["Marie Curie", "won", "two Nobel Prizes"]]</python>')
CLAIMS = ["Marie Curie born in Warsaw", "Marie Curie moved to Berlin", "Marie Curie won two Nobel Prizes"]


@settings(max_examples=200, deadline=None)
@given(p_context=st.lists(st.sampled_from([0.05, 0.3, 0.5, 0.55, 0.7, 0.9]), min_size=3, max_size=3),
       p_output=st.lists(st.sampled_from([0.05, 0.4, 0.5, 0.6, 0.95]), min_size=3, max_size=3),
       method=st.sampled_from(["paper", "hybrid"]), threshold=st.sampled_from([0.3, 0.5, 0.7]))
def test_scoring_fidelity_as_far_as_the_decision_needs_decides_as_scoring_every_triple(
    p_context: list[float], p_output: list[float], method: str, threshold: float
) -> None:
    """The round trip stops at the first kept triple below the threshold: the verdict and score are those of the
    exhaustive round trip (every triple scored against its output, as ``detection.py lab-report`` derives them),
    and every triple the explanation names (above the threshold) was checked."""
    whole = 0.4
    table = {**dict(zip(CLAIMS, p_context)), OUTPUT: whole}

    def support(premise: str, hypothesis: str) -> float:
        return 1.0 - (p_output[CLAIMS.index(hypothesis)] if premise == OUTPUT else table[hypothesis])

    scorer = FunctionScorer(support, name="judge:test")
    report = engine(THREE, scorer=scorer, rule=method, fidelity="drop", hybrid_weights=WEIGHTS,
                    hallucination_threshold=threshold).evaluate(CONTEXT, OUTPUT)
    kept = [p for p, q in zip(p_context, p_output) if faithful_to_output(q)]
    expected = (WEIGHTS.probability(whole, kept or [whole]) if method == "hybrid" else max(kept or [whole]))
    assert report.score == pytest.approx(1 - expected)
    checked = {h for premise, h in pairs(scorer) if premise == OUTPUT}
    assert {c.claim for c in report.claims if c.unsupported and c.triple is not None} <= checked
    assert len(checked) <= 3
