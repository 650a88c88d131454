"""The default decision rule (``rule="hybrid"``) and its fitting, against the paper's rule (``rule="paper"``)."""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import pytest

from grapheval_plugins import GraphEval
from grapheval_plugins.aggregate import HybridWeights, fitted_weights, logit, sigmoid
from grapheval_plugins.calibrate import fit_hybrid, roc_auc
from grapheval_plugins.exceptions import InputError
from grapheval_plugins.extract.prompts import KG_PROMPT
from grapheval_plugins.models import DEFAULT_SCORER
from grapheval_plugins.testing import FunctionScorer, ScriptedChatModel
from grapheval_plugins.types import Report

CONTEXT = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
OUTPUT = "Marie Curie, born in Warsaw, won three Nobel Prizes."
ANSWER = '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "three Nobel Prizes"]]</python>'
P_SUPPORTED = {"Marie Curie born in Warsaw": 0.9, "Marie Curie won three Nobel Prizes": 0.4, OUTPUT: 0.7}
WEIGHTS = HybridWeights(whole=0.6, claims=0.2, bias=0.7, fitted_on="test")
ROOT = Path(__file__).resolve().parents[2]
SHIPPED = fitted_weights(DEFAULT_SCORER, KG_PROMPT.version, "off")
SHIPPED_FIDELITY = fitted_weights(DEFAULT_SCORER, KG_PROMPT.version, "drop")


def scorer(name: str = "judge:test") -> FunctionScorer:
    return FunctionScorer(lambda premise, hypothesis: P_SUPPORTED[hypothesis], name=name)


def engine(**kwargs) -> GraphEval:
    return GraphEval(llm=ScriptedChatModel(responses=[ANSWER]), cache=False, **kwargs)


def test_hybrid_scores_the_whole_output_last_and_combines_it_with_the_largest_triple() -> None:
    s = scorer()
    report = engine(scorer=s, hybrid_weights=WEIGHTS).evaluate(CONTEXT, OUTPUT)
    assert [h for _, h in s.batches[0]] == ["Marie Curie born in Warsaw", "Marie Curie won three Nobel Prizes", OUTPUT]
    expected = sigmoid(0.7 + 0.6 * logit(0.3) + 0.2 * logit(0.6))
    assert report.method == "hybrid"
    assert report.score == pytest.approx(1 - expected)
    assert report.hallucinated is (expected > 0.5)
    # The whole output is the rule's other input, not a claim of the explanation.
    assert [c.triple is not None for c in report.claims] == [True, True]
    assert report.whole_output is not None and report.whole_output.p_unsupported == pytest.approx(0.3)
    assert [c.claim for c in report.unsupported] == ["Marie Curie won three Nobel Prizes"]


def test_the_papers_rule_is_one_option_away_and_scores_only_the_triples() -> None:
    s = scorer()
    report = engine(scorer=s, rule="paper", hybrid_weights=WEIGHTS).evaluate(CONTEXT, OUTPUT)
    assert [h for _, h in s.batches[0]] == ["Marie Curie born in Warsaw", "Marie Curie won three Nobel Prizes"]
    assert report.method == "paper" and report.whole_output is None
    assert report.score == pytest.approx(0.4) and report.hallucinated is True


def test_a_scorer_without_fitted_weights_is_decided_by_the_papers_rule() -> None:
    s = scorer("not-fitted")
    report = engine(scorer=s).evaluate(CONTEXT, OUTPUT)
    assert report.method == "paper" and len(s.batches[0]) == 2
    assert report.score == pytest.approx(0.4)


def test_the_offline_default_scorer_has_fitted_weights_that_name_their_command() -> None:
    assert SHIPPED is not None and GraphEval(fidelity="off").decision_weights() is SHIPPED
    assert "benchmarks/bench_judge_prompt.py fit --variant question-first" in SHIPPED.fitted_on
    assert GraphEval(mode="raw").decision_weights() is None
    assert GraphEval(rule="paper").decision_weights() is None
    # The name alone does not select them: another scorer under that name is decided by the paper's rule.
    named = engine(scorer=scorer(DEFAULT_SCORER))
    assert named.evaluate(CONTEXT, OUTPUT).method == "paper" and named.decision_rule()[0].name == "paper"


def test_with_nothing_extracted_the_whole_output_is_the_one_claim() -> None:
    s = FunctionScorer(lambda premise, hypothesis: 0.2, name="judge:test")
    ge = GraphEval(llm=ScriptedChatModel(responses=["no graph here"]), scorer=s, hybrid_weights=WEIGHTS,
                   max_retries=0, cache=False)
    report = ge.evaluate(CONTEXT, OUTPUT)
    assert report.extraction.fallback and [c.claim for c in report.claims] == [OUTPUT]
    assert report.whole_output is None and len(s.batches[0]) == 1
    assert report.score == pytest.approx(1 - WEIGHTS.probability(0.8, []))


def test_an_unknown_rule_is_a_clear_error() -> None:
    with pytest.raises(InputError, match="rule"):
        GraphEval(rule="vote")  # type: ignore[arg-type]


def test_a_hybrid_report_round_trips_through_json() -> None:
    report = engine(scorer=scorer(), hybrid_weights=WEIGHTS).evaluate(CONTEXT, OUTPUT)
    again = Report.model_validate_json(report.model_dump_json())
    assert again == report and again.whole_output == report.whole_output


def test_fit_hybrid_recovers_the_weights_that_generated_the_labels() -> None:
    rng = random.Random(0)
    true = HybridWeights(whole=1.2, claims=0.4, bias=-0.3, fitted_on="generator")
    p_whole, p_claims, labels = [], [], []
    for _ in range(4000):
        a, b = rng.random(), rng.random()
        p_whole.append(a)
        p_claims.append(b)
        labels.append(int(rng.random() < true.probability(a, [b])))
    fitted = fit_hybrid(labels, p_whole, p_claims, fitted_on="synthetic", l2=0.0)
    # Class balancing moves only the bias (by the log of the class ratio), not the slopes.
    assert fitted.whole == pytest.approx(1.2, abs=0.15) and fitted.claims == pytest.approx(0.4, abs=0.15)
    n_pos = sum(labels)
    assert fitted.bias == pytest.approx(-0.3 + math.log((len(labels) - n_pos) / n_pos), abs=0.15)


def test_fit_hybrid_refuses_one_class_and_unequal_lengths() -> None:
    with pytest.raises(ValueError, match="both classes"):
        fit_hybrid([1, 1], [0.2, 0.3], [0.4, 0.5], fitted_on="x")
    with pytest.raises(ValueError):
        fit_hybrid([1, 0], [0.2, 0.3], [0.4], fitted_on="x")


def test_the_shipped_weights_reproduce_the_committed_per_row_files() -> None:
    """The default's AUC on the committed per-row files is at least raw's on every set (docs/benchmarks.md)."""
    weights = SHIPPED
    assert weights is not None
    for name in ("summeval", "qags_c", "qags_x"):
        path = ROOT / "benchmarks" / "results" / (
            f"detect-{name}-local-qwen2.5-coder-1.5b-judge-local-qwen2.5-coder-1.5b-examples-first+pairs-concat.jsonl")
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        rows = [r for r in rows if not r.get("error")]
        labels = [r["label"] for r in rows]
        hybrid = [weights.probability(r["p_raw"], [r["p_graph"]]) for r in rows]
        assert roc_auc(labels, hybrid) >= roc_auc(labels, [r["p_raw"] for r in rows]), name
        assert sum(1 for r in rows if r.get("fallback")) <= 0.05 * len(rows), name


def test_the_explanation_follows_the_combined_verdict_either_way() -> None:
    flagged_by_whole = HybridWeights(whole=2.0, claims=0.0, bias=0.0, fitted_on="test")
    low = {"Marie Curie born in Warsaw": 0.9, "Marie Curie won three Nobel Prizes": 0.9, OUTPUT: 0.2}
    s = FunctionScorer(lambda premise, hypothesis: low[hypothesis], name="judge:test")
    report = engine(scorer=s, hybrid_weights=flagged_by_whole).evaluate(CONTEXT, OUTPUT)
    assert report.hallucinated is True and report.unsupported == []
    assert "no single claim of 2 claims unsupported; the whole output's score decided; the likeliest unsupported:" in (
        report.explain())
    outweighed = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="test")
    report = engine(scorer=scorer(), hybrid_weights=outweighed).evaluate(CONTEXT, OUTPUT)
    assert report.hallucinated is False and len(report.unsupported) == 1
    assert report.explain().startswith("faithful") and "outweighed by the whole output's score" in report.explain()


def test_deepevals_reason_follows_the_combined_verdict() -> None:
    pytest.importorskip("deepeval")
    from grapheval_plugins.integrations.deepeval import _format_reason

    outweighed = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="test")
    report = engine(scorer=scorer(), hybrid_weights=outweighed).evaluate(CONTEXT, OUTPUT)
    reason = _format_reason(report, report.score, 0.5, "context")
    assert reason.startswith("faithful: 1 of 2 claims unsupported, outweighed by the whole output's score")
    flagged = HybridWeights(whole=2.0, claims=0.0, bias=0.0, fitted_on="test")
    low = {"Marie Curie born in Warsaw": 0.9, "Marie Curie won three Nobel Prizes": 0.9, OUTPUT: 0.2}
    s = FunctionScorer(lambda premise, hypothesis: low[hypothesis], name="judge:test")
    report = engine(scorer=s, hybrid_weights=flagged).evaluate(CONTEXT, OUTPUT)
    reason = _format_reason(report, report.score, 0.5, "context")
    assert reason.startswith("hallucination: no single claim of 2 claims unsupported")


def test_fidelity_has_weights_fitted_for_it() -> None:
    assert GraphEval(fidelity="off").decision_weights() is SHIPPED
    assert SHIPPED_FIDELITY is not None and GraphEval(fidelity="drop").decision_weights() is SHIPPED_FIDELITY
    assert GraphEval().decision_weights() is SHIPPED_FIDELITY  # "auto": on where weights were fitted with it
    assert "triples the output does not support dropped" in SHIPPED_FIDELITY.fitted_on
