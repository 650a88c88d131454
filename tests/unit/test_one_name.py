"""One name, one meaning: GraphCorrect's ``strategy`` (``method`` its deprecated alias, ``"graph"`` the old name of
``"paper"``), the CLI's ``--rule`` / ``--strategy``, the report's ``hallucination_threshold`` field (old JSON with
``threshold`` still reads), and the two Ragas metrics taking the same parameters by the same names."""

from __future__ import annotations

import dataclasses
import inspect
import json
import re
import warnings
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grapheval_plugins import GraphCorrect, GraphEval, InputError, Report
from grapheval_plugins.cli import app
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
from grapheval_plugins.types import Decision

CONTEXT = "Marie Curie won two Nobel Prizes."
OUTPUT = "Marie Curie won three Nobel Prizes."


def _respond(messages: list) -> str:  # type: ignore[type-arg]
    text = messages[-1].content
    if "<old_triple>" in text:  # prompt C
        return "<context>Marie Curie won two Nobel Prizes.</context>"
    if "<triple>" in text:  # prompt B
        return '["Marie Curie", "won", "two Nobel Prizes"]'
    if "two" in text:
        return '<python>[["Marie Curie", "won", "two Nobel Prizes"]]</python>'
    return '<python>[["Marie Curie", "won", "three Nobel Prizes"]]</python>'


def engine() -> GraphEval:
    return GraphEval(llm=ScriptedChatModel(respond=_respond), scorer=KeywordScorer())


# --------------------------------------------------------------------------- GraphCorrect(strategy=)
def test_the_papers_procedure_is_strategy_paper_and_the_report_says_so() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the new names warn about nothing
        fixer = GraphCorrect(engine(), strategy="paper", rouge=False)
        result = fixer.correct(CONTEXT, OUTPUT)
    assert fixer.strategy == "paper" and result.method == "paper"
    assert result.corrected == "Marie Curie won two Nobel Prizes." and result.status == "corrected"
    assert repr(fixer).startswith("GraphCorrect(strategy='paper'") and fixer.describe().startswith("paper by ")


@pytest.mark.parametrize("old", ["graph", "paper", "constrained", "evidence", "direct"])
def test_method_is_a_deprecated_alias_of_strategy(old: str) -> None:
    with pytest.warns(DeprecationWarning, match=r"method=.*deprecated.*strategy="):
        fixer = GraphCorrect(engine(), method=old)  # type: ignore[arg-type]
    assert fixer.strategy == ("paper" if old == "graph" else old)
    with pytest.warns(DeprecationWarning, match="GraphCorrect.method is deprecated"):
        assert fixer.method == fixer.strategy


def test_graph_is_a_deprecated_name_of_paper() -> None:
    with pytest.warns(DeprecationWarning, match="strategy='paper'"):
        assert GraphCorrect(engine(), strategy="graph").strategy == "paper"


def test_strategy_and_method_together_must_agree() -> None:
    with pytest.warns(DeprecationWarning), pytest.raises(InputError, match="not both") as info:
        GraphCorrect(engine(), strategy="paper", method="direct")
    assert info.value.field == "method"
    with pytest.warns(DeprecationWarning):  # the same strategy under both names (or its old name) is no conflict
        assert GraphCorrect(engine(), strategy="paper", method="graph").strategy == "paper"
    with pytest.raises(InputError, match="strategy"):
        GraphCorrect(engine(), strategy="rewrite")  # type: ignore[arg-type]


def test_a_batched_step1_needs_the_papers_strategy() -> None:
    assert GraphCorrect(engine(), strategy="paper", batch_step1=True).batch_step1 is True
    with pytest.raises(InputError, match="strategy='paper'"):
        GraphCorrect(engine(), batch_step1=True)


def test_the_decision_rule_and_the_correction_strategy_share_the_papers_name() -> None:
    assert GraphEval(rule="paper").rule.name == "paper"
    assert GraphCorrect(engine(), strategy="paper").strategy == "paper"
    assert inspect.signature(GraphEval).parameters["rule"].default == "hybrid"
    assert inspect.signature(GraphCorrect).parameters["strategy"].default == "constrained"


# --------------------------------------------------------------------------- the CLI
def _cli_input(tmp_path: Path) -> tuple[Path, list[str]]:
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "1", "context": CONTEXT, "output": CONTEXT}) + "\n")  # faithful: no correction
    fakes = ["--llm", "py:grapheval_plugins.testing:naive_triples_chat_model",
             "--scorer", "py:grapheval_plugins.testing:KeywordScorer"]
    return src, fakes


def test_cli_correct_takes_strategy_and_the_old_method_with_a_warning(tmp_path: Path) -> None:
    src, fakes = _cli_input(tmp_path)
    new = CliRunner().invoke(app, ["correct", str(src), "-o", str(tmp_path / "a.jsonl"), "--strategy", "direct", *fakes])
    assert new.exit_code == 0, new.output
    assert "deprecated" not in new.output
    assert json.loads((tmp_path / "a.jsonl").read_text())["method"] == "direct"
    old = CliRunner().invoke(app, ["correct", str(src), "-o", str(tmp_path / "b.jsonl"), "--method", "direct", *fakes])
    assert old.exit_code == 0, old.output
    assert "--method is deprecated: use --strategy" in old.output
    assert json.loads((tmp_path / "b.jsonl").read_text())["method"] == "direct"
    graph = CliRunner().invoke(app, ["correct", str(src), "-o", str(tmp_path / "c.jsonl"), "--strategy", "graph", *fakes])
    assert graph.exit_code == 0 and "--strategy paper" in graph.output
    assert json.loads((tmp_path / "c.jsonl").read_text())["method"] == "paper"
    both = CliRunner().invoke(app, ["correct", str(src), "-o", str(tmp_path / "d.jsonl"), "--strategy", "paper",
                                    "--method", "direct", *fakes])
    assert both.exit_code == 2 and "not both" in re.sub(r"[\s│]+", " ", both.output)  # rich wraps the message
    batched = CliRunner().invoke(app, ["correct", str(src), "-o", str(tmp_path / "e.jsonl"), "--strategy", "paper",
                                       "--batch-step1", *fakes])
    assert batched.exit_code == 0, batched.output
    shown = CliRunner().invoke(app, ["correct", "--help"]).output
    assert "--strategy" in shown and "--method" not in shown


# --------------------------------------------------------------------------- the report's field
def test_the_report_field_is_hallucination_threshold_and_old_json_still_reads() -> None:
    report = Report(output="x", mode="raw", hallucination_threshold=0.3, hallucinated=False, score=0.9)
    data = report.model_dump(mode="json")
    assert data["hallucination_threshold"] == 0.3 and "threshold" not in data
    old = {**data, "threshold": data.pop("hallucination_threshold")}
    assert Report.model_validate(old) == report
    assert Report.model_validate_json(json.dumps(old)).hallucination_threshold == 0.3
    with pytest.warns(DeprecationWarning, match="Report.hallucination_threshold"):
        assert report.threshold == 0.3


def test_the_decision_field_is_renamed_too() -> None:
    decision = Decision.of("paper", 0.7, [], 0.5)
    assert decision.model_dump()["hallucination_threshold"] == 0.5
    assert Decision.model_validate({"rule": "paper", "p_hallucination": 0.7, "threshold": 0.5,
                                    "case": "combined"}) == decision.model_copy(update={"case": "combined"})
    with pytest.warns(DeprecationWarning, match="Decision.hallucination_threshold"):
        assert decision.threshold == 0.5


def test_a_report_written_before_the_rename_loads_in_the_html_report(tmp_path: Path) -> None:
    pytest.importorskip("jinja2")
    from grapheval_plugins.report import write_run_report

    report = engine().evaluate(CONTEXT, OUTPUT, id="r1")
    data = report.model_dump(mode="json")
    data["threshold"] = data.pop("hallucination_threshold")
    data["decision"]["threshold"] = data["decision"].pop("hallucination_threshold")
    results = tmp_path / "old.jsonl"
    results.write_text(json.dumps(data) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)  # the report stack reads the new name
        run = write_run_report(results, tmp_path / "run.html")
    assert run.total == 1 and "threshold 0.5" in (tmp_path / "run.html").read_text()


# --------------------------------------------------------------------------- the two Ragas metrics
def _parameters(cls: type) -> list[str]:
    skip = {"self", "_required_columns", "output_type", "_options", "max_reason_claims", "positional_grapheval"}
    return sorted(n for n in inspect.signature(cls).parameters if n not in skip)


def test_the_two_ragas_metrics_take_the_same_parameters_by_the_same_names() -> None:
    pytest.importorskip("ragas")
    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness, GraphEvalRagasMetric

    collections = set(_parameters(GraphEvalRagasMetric)) - {"mode"}  # mode: its deprecated old name of check_mode
    assert set(_parameters(GraphEvalFaithfulness)) == collections
    for cls in (GraphEvalFaithfulness, GraphEvalRagasMetric):
        parameters = inspect.signature(cls).parameters
        assert parameters["grapheval"].kind is inspect.Parameter.KEYWORD_ONLY  # the engine: by keyword in both
        assert {"check_mode", "rule", "binary", "llm", "scorer"} <= set(parameters)


def test_the_collections_metric_takes_check_mode_and_its_engine_by_keyword() -> None:
    pytest.importorskip("ragas")
    from grapheval_plugins.integrations.ragas import GraphEvalRagasMetric

    metric = GraphEvalRagasMetric(llm=ScriptedChatModel(respond=_respond), scorer=KeywordScorer(), check_mode="raw")
    assert metric.current_engine().mode == "raw"
    with pytest.warns(DeprecationWarning, match=r"mode=.*deprecated.*check_mode="):
        old = GraphEvalRagasMetric(llm=ScriptedChatModel(respond=_respond), scorer=KeywordScorer(), mode="raw")
    assert old.current_engine().mode == "raw" and old.check_mode == "raw"
    with pytest.warns(DeprecationWarning), pytest.raises(InputError, match="not both"):
        GraphEvalRagasMetric(check_mode="graph", mode="raw")
    e = engine()
    with pytest.warns(DeprecationWarning, match="grapheval=GraphEval"):
        assert GraphEvalRagasMetric(e).current_engine() is e


def test_a_ragas_score_has_no_threshold_and_hallucination_threshold_is_deprecated() -> None:
    pytest.importorskip("ragas")
    from ragas import SingleTurnSample

    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness, GraphEvalRagasMetric

    sample = SingleTurnSample(response=OUTPUT, retrieved_contexts=[CONTEXT])
    plain = GraphEvalFaithfulness(grapheval=engine()).single_turn_score(sample)
    assert 0.0 < plain < 1.0  # continuous, 1 = faithful
    for cls, kwargs in ((GraphEvalFaithfulness, {}), (GraphEvalRagasMetric, {})):
        with pytest.warns(DeprecationWarning, match="no threshold changes it"):
            cls(grapheval=engine(), hallucination_threshold=0.05, **kwargs)
    with pytest.warns(DeprecationWarning):
        strict = GraphEvalFaithfulness(grapheval=engine(), hallucination_threshold=0.05)
    assert strict.single_turn_score(sample) == pytest.approx(plain)  # the continuous score does not move
    # binary=True decides at the engine's hallucination threshold
    lenient = GraphEval(llm=ScriptedChatModel(respond=_respond), scorer=KeywordScorer(), hallucination_threshold=0.95)
    assert GraphEvalFaithfulness(grapheval=lenient, binary=True).single_turn_score(sample) == 1.0
    assert GraphEvalFaithfulness(grapheval=engine(), binary=True).single_turn_score(sample) == 0.0
    metric = GraphEvalFaithfulness(llm=ScriptedChatModel(respond=_respond), scorer=KeywordScorer(), check_mode="graph",
                                   rule="paper")
    copy = dataclasses.replace(metric, binary=True)
    assert (copy.check_mode, copy.rule, copy.binary) == ("graph", "paper", True)
