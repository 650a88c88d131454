"""Decision rules as named, registered parts (``aggregate.DecisionRule``), their fitted weights keyed by setting, and
the one explanation every host formats from a rule's account of its verdict (``Report.explanation``)."""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from grapheval_plugins import (
    ClaimCheck,
    Decision,
    DecisionRule,
    GraphEval,
    HybridWeights,
    InputError,
    Needs,
    Report,
    aggregate,
    register_rule,
    registry,
)
from grapheval_plugins.extract.prompts import KG_PROMPT
from grapheval_plugins.integrations.langchain import GraphEvalRunnable
from grapheval_plugins.models import DEFAULT_SCORER
from grapheval_plugins.testing import FunctionScorer, ScriptedChatModel

CONTEXT = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
OUTPUT = "Marie Curie, born in Warsaw, won three Nobel Prizes."
ANSWER = '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "three Nobel Prizes"]]</python>'
ROOT = Path(__file__).resolve().parents[2]


class MeanRule(DecisionRule):
    """The mean P(unsupported) over the claims: a rule a user might add."""

    name = "test-mean"

    def decide(self, claims: list[ClaimCheck], *, threshold: float, whole_output: ClaimCheck | None = None,
               weights: HybridWeights | None = None) -> Decision:
        p = sum(c.p_unsupported for c in claims) / len(claims) if claims else 0.0
        return Decision.of(self.name, p, claims, threshold, why="the mean over the claims")


class WholeOnlyRule(DecisionRule):
    """The whole output's own P(unsupported): a rule that needs the whole output scored."""

    name = "test-whole"
    needs = Needs(whole_output=True)

    def decide(self, claims: list[ClaimCheck], *, threshold: float, whole_output: ClaimCheck | None = None,
               weights: HybridWeights | None = None) -> Decision:
        p = whole_output.p_unsupported if whole_output is not None else max(c.p_unsupported for c in claims)
        return Decision.of(self.name, p, claims, threshold, why="the whole output's score")


@pytest.fixture
def rules() -> Iterator[None]:
    register_rule(MeanRule())
    register_rule(WholeOnlyRule())
    yield
    aggregate.RULES.pop(MeanRule.name)
    aggregate.RULES.pop(WholeOnlyRule.name)


def scorer(p_supported: dict[str, float]) -> FunctionScorer:
    return FunctionScorer(lambda premise, hypothesis: p_supported[hypothesis], name="judge:test")


def engine(p_supported: dict[str, float], **kwargs: object) -> GraphEval:
    return GraphEval(llm=ScriptedChatModel(responses=[ANSWER]), scorer=scorer(p_supported), cache=False,
                     **kwargs)  # type: ignore[arg-type]


P = {"Marie Curie born in Warsaw": 0.9, "Marie Curie won three Nobel Prizes": 0.3, OUTPUT: 0.8}


# --------------------------------------------------------------------------- the registry
def test_a_rule_registered_here_is_picked_up_by_name(rules: None) -> None:
    report = engine(P, rule="test-mean").evaluate(CONTEXT, OUTPUT)
    assert report.method == "test-mean" and report.decision is not None and report.decision.rule == "test-mean"
    assert report.score == pytest.approx(1 - (0.1 + 0.7) / 2)
    assert report.hallucinated is False and report.decision.case == "outweighed"  # 0.7 > 0.5, the mean is 0.4
    assert report.whole_output is None  # the rule does not need it: not scored
    # The same name reaches the shared engines and every adapter through the registry.
    llm, spec = "py:grapheval_plugins.testing:naive_triples_chat_model", "py:grapheval_plugins.testing:KeywordScorer"
    assert registry.engine_options(llm=llm, scorer=spec, rule="test-mean").engine().rule.name == "test-mean"
    assert GraphEval.shared(llm, spec, rule="test-mean") is not GraphEval.shared(llm, spec)
    assert GraphEvalRunnable(llm=llm, scorer=spec, rule="test-mean").grapheval.rule.name == "test-mean"


def test_a_rule_object_may_be_passed_and_its_needs_are_met(rules: None) -> None:
    s = scorer(P)
    report = GraphEval(llm=ScriptedChatModel(responses=[ANSWER]), scorer=s, cache=False,
                       rule=WholeOnlyRule()).evaluate(CONTEXT, OUTPUT)
    assert [h for _, h in s.batches[0]][-1] == OUTPUT  # the whole output is scored, last
    assert report.whole_output is not None and report.score == pytest.approx(0.8)
    assert [c.triple is not None for c in report.claims] == [True, True]


def test_unknown_names_and_taken_names_are_clear_errors(rules: None) -> None:
    with pytest.raises(InputError, match="registered decision rule"):
        GraphEval(rule="vote")
    with pytest.raises(InputError, match="registered already"):
        register_rule(MeanRule())
    assert register_rule(MeanRule(), replace=True) is aggregate.get_rule("test-mean")
    with pytest.raises(InputError, match="DecisionRule"):
        register_rule("test-mean")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- weights keyed by setting
def test_weights_are_keyed_by_scorer_prompt_version_and_fidelity() -> None:
    shipped = aggregate.fitted_weights(DEFAULT_SCORER, KG_PROMPT.version, "off")
    assert shipped is not None and (shipped.scorer, shipped.prompt, shipped.fidelity) == (
        DEFAULT_SCORER, "kg-a/1-examples-first", "off")
    # The default engine's prompt is the one they were fitted with: the lookup finds them.
    off = GraphEval(fidelity="off")
    assert off.decision_weights() is shipped and off.decision_rule() == (aggregate.HYBRID, shipped)
    with_fidelity = aggregate.fitted_weights(DEFAULT_SCORER, KG_PROMPT.version, "drop")
    assert with_fidelity is not None and GraphEval().decision_rule() == (aggregate.HYBRID, with_fidelity)
    # Another prompt has none fitted: the paper's rule decides.
    other = GraphEval(prompt=dataclasses.replace(KG_PROMPT, version="kg-a/2-mine"))
    assert other.decision_weights() is None and other.decision_rule() == (aggregate.PAPER, None)


def test_the_deprecated_per_scorer_tables_still_read_and_write() -> None:
    shipped = aggregate.fitted_weights(DEFAULT_SCORER, KG_PROMPT.version, "off")
    with pytest.warns(DeprecationWarning, match="FITTED_WEIGHTS"):
        table = aggregate.HYBRID_WEIGHTS
    assert table[DEFAULT_SCORER] is shipped
    with pytest.warns(DeprecationWarning, match="fitted_weights"):
        assert aggregate.hybrid_weights(DEFAULT_SCORER, "drop") is aggregate.fitted_weights(
            DEFAULT_SCORER, KG_PROMPT.version, "drop")
    saved = list(aggregate.FITTED_WEIGHTS)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            aggregate.HYBRID_WEIGHTS["judge:mine"] = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="mine")
        mine = aggregate.fitted_weights("judge:mine", "any prompt")
        assert mine is not None and mine.fitted_on == "mine" and mine.prompt is None
    finally:
        aggregate.FITTED_WEIGHTS[:] = saved


def test_the_hybrid_rule_re_decides_the_committed_per_row_files_as_the_weights_do() -> None:
    weights = aggregate.fitted_weights(DEFAULT_SCORER, KG_PROMPT.version)
    assert weights is not None
    path = ROOT / "benchmarks" / "results" / (
        "detect-qags_x-local-qwen2.5-coder-1.5b-judge-local-qwen2.5-coder-1.5b-examples-first+pairs-concat.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if not r.get("error")]
    assert rows
    for r in rows:
        claim = ClaimCheck(claim="t", triple=None, p_unsupported=r["p_graph"], unsupported=r["p_graph"] > 0.5)
        triple_claim = claim.model_copy(update={"triple": {"subject": "a", "relation": "b", "object": "c"}})
        whole = ClaimCheck(claim="o", p_unsupported=r["p_raw"], unsupported=r["p_raw"] > 0.5)
        decision = aggregate.HYBRID.decide([triple_claim], threshold=0.5, whole_output=whole, weights=weights)
        assert decision.p_hallucination == weights.probability(r["p_raw"], [r["p_graph"]])


# --------------------------------------------------------------------------- the one explanation
CASES = {
    # case: (hybrid weights, P(supported) per hypothesis)
    "faithful": (HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="t"),
                 {"Marie Curie born in Warsaw": 0.9, "Marie Curie won three Nobel Prizes": 0.8, OUTPUT: 0.9}),
    "unsupported": (HybridWeights(whole=0.0, claims=1.0, bias=0.0, fitted_on="t"), P),
    "outweighed": (HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="t"), P),
    "combined": (HybridWeights(whole=2.0, claims=0.0, bias=0.0, fitted_on="t"),
                 {"Marie Curie born in Warsaw": 0.9, "Marie Curie won three Nobel Prizes": 0.9, OUTPUT: 0.2}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_host_formats_the_one_explanation(case: str) -> None:
    weights, p = CASES[case]
    report = engine(p, hybrid_weights=weights).evaluate(CONTEXT, OUTPUT)
    explanation = report.explanation()
    assert report.decision is not None and report.decision.case == case == explanation.case
    assert report.explain().startswith(f"{explanation.verdict} (score {report.score:.3f}): {explanation.summary}")
    # A report written without the rule's account (before rules gave one) explains the same.
    old = Report.model_validate({**report.model_dump(exclude={"ok"}), "decision": None})
    assert old.explanation() == explanation
    pytest.importorskip("deepeval")
    from grapheval_plugins.integrations.deepeval import _format_reason

    assert report.score is not None
    reason = _format_reason(report, report.score, 0.5, "context")
    assert reason.startswith(f"{explanation.verdict}: {explanation.summary} (score ")
    for claim in explanation.claims:
        assert str(claim.triple.as_list() if claim.triple else claim.claim) in reason


def test_the_account_round_trips_and_names_what_decided() -> None:
    weights, p = CASES["combined"]
    report = engine(p, hybrid_weights=weights).evaluate(CONTEXT, OUTPUT)
    assert Report.model_validate_json(report.model_dump_json()) == report
    assert report.decision is not None and report.decision.why == "the whole output's score"
    assert report.decision.deciding is not None
    assert report.claims[report.decision.deciding].p_unsupported == max(c.p_unsupported for c in report.claims)
    assert "the whole output's score decided; the likeliest unsupported:" in report.explain()


def test_the_cli_takes_a_registered_rule_by_name(rules: None, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from grapheval_plugins.cli import app

    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "1", "context": "Berlin is in Germany.", "output": "Berlin is in Austria."}) + "\n")
    fakes = ["--llm", "py:grapheval_plugins.testing:naive_triples_chat_model",
             "--scorer", "py:grapheval_plugins.testing:KeywordScorer"]
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["evaluate", str(src), "-o", str(out), "--rule", "test-mean", *fakes])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["method"] == "test-mean"
    bad = CliRunner().invoke(app, ["evaluate", str(src), "-o", str(tmp_path / "b.jsonl"), "--rule", "vote", *fakes])
    assert bad.exit_code != 0 and "registered decision rule" in bad.output
    # --method, the old name, is hidden and deprecated: it still works, and says so
    old = CliRunner().invoke(app, ["evaluate", str(src), "-o", str(tmp_path / "old.jsonl"), "--method", "test-mean",
                                   *fakes])
    assert old.exit_code == 0, old.output
    assert "--method is deprecated: use --rule" in old.output
    assert json.loads((tmp_path / "old.jsonl").read_text())["method"] == "test-mean"
    both = CliRunner().invoke(app, ["evaluate", str(src), "-o", str(tmp_path / "c.jsonl"), "--rule", "paper",
                                    "--method", "test-mean", *fakes])
    assert both.exit_code != 0 and "not both" in both.output
    assert "--method" not in CliRunner().invoke(app, ["evaluate", "--help"]).output
