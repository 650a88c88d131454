"""GraphEvalMetric inside DeepEval 4.x: measure / a_measure, evaluate(), assert_test, copies, errors. Offline fakes."""

from __future__ import annotations

import os

# DeepEval reads these when it acts, and its pytest plugin reports a session at its end: keep them set for the
# whole session, not only inside a test.
os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
os.environ.setdefault("DEEPEVAL_NO_INSPECT_PROMPT", "1")
os.environ.setdefault("DEEPEVAL_DISABLE_DOTENV", "1")

import asyncio  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import pytest  # noqa: E402

pytest.importorskip("deepeval")

from deepeval import assert_test, evaluate  # noqa: E402
from deepeval.errors import MissingTestCaseParamsError  # noqa: E402
from deepeval.evaluate.configs import AsyncConfig, CacheConfig, DisplayConfig, ErrorConfig  # noqa: E402
from deepeval.metrics.utils import copy_metrics  # noqa: E402
from deepeval.test_case import LLMTestCase  # noqa: E402
from deepeval.test_case.llm_test_case import RetrievedContextData  # noqa: E402
from pytest_socket import disable_socket, enable_socket  # noqa: E402

import grapheval_plugins.models as models  # noqa: E402
from grapheval_plugins import GraphEval  # noqa: E402
from grapheval_plugins.exceptions import (  # noqa: E402
    ExtractionError,
    InputError,
    ModelLoadError,
    ScoringError,
)
from grapheval_plugins.integrations.deepeval import (  # noqa: E402
    GraphEvalMetric,
    clear_shared_engines,
    shared_engine,
)
from grapheval_plugins.testing import FunctionScorer, KeywordScorer, ScriptedChatModel  # noqa: E402

FACTS = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
GOOD = "Marie Curie was born in Warsaw."
BAD = "Marie Curie was born in Warsaw and won three Nobel Prizes."
LLM_FAILS = "This output makes the chat model fail."
SCORER_FAILS = "This output makes the scorer fail."

TRIPLES: dict[str, list[list[str]]] = {
    GOOD: [["Marie Curie", "born in", "Warsaw"]],
    BAD: [["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "three Nobel Prizes"]],
    SCORER_FAILS: [["scorer", "must", "fail"]],
}


def respond(messages: list[Any]) -> str:
    """Answer prompt A with the triples of the known output found in the messages."""
    text = "\n".join(str(m.content) for m in messages)
    if LLM_FAILS in text:
        raise RuntimeError("provider unavailable")
    for output, triples in TRIPLES.items():
        if output in text:
            return "<python>" + json.dumps(triples) + "</python>"
    # Generic outputs "Fact number <i>." (the batching test): one triple each.
    facts = re.findall(r"Fact number (\d+)\.", text)
    if facts:
        return "<python>" + json.dumps([["Fact", "number", facts[-1]]]) + "</python>"
    return "<python>[]</python>"


def table_scorer(support: dict[str, float], default: float = 1.0) -> FunctionScorer:
    """P(supported) per claim sentence from a table; a claim containing 'fail' raises."""

    def fn(premise: str, hypothesis: str) -> float:
        if "fail" in hypothesis:
            raise RuntimeError("scorer crashed")
        return support.get(hypothesis, default)

    return FunctionScorer(fn, name="table")


def case(output: str | None = GOOD, **kwargs: Any) -> LLMTestCase:
    kwargs.setdefault("context", [FACTS])
    return LLMTestCase(input=kwargs.pop("input", f"q: {output}"), actual_output=output, **kwargs)


QUIET = DisplayConfig(show_indicator=False, print_results=False, inspect_after_run=False)


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No network; DeepEval's ``.deepeval`` folder goes to a temporary directory; no engine leaks across tests."""
    disable_socket(allow_unix_socket=True)
    monkeypatch.chdir(tmp_path)
    clear_shared_engines()
    yield
    clear_shared_engines()
    enable_socket()


@pytest.fixture
def llm() -> ScriptedChatModel:
    return ScriptedChatModel(respond=respond, model_label="scripted-kg")


@pytest.fixture
def engine(llm: ScriptedChatModel) -> GraphEval:
    return GraphEval(llm=llm, scorer=KeywordScorer(), max_retries=0)


def by_input(result: Any) -> dict[str, Any]:
    return {r.input: r for r in result.test_results}


# --------------------------------------------------------------------------- measure / a_measure
def test_measure_scores_in_deepeval_direction(engine: GraphEval) -> None:
    metric = GraphEvalMetric(grapheval=engine)
    assert metric.measure(case(GOOD), _show_indicator=False) == 1.0
    assert metric.is_successful() is True and metric.error is None
    assert metric.reason is not None and metric.reason.startswith("faithful")

    # "three" is missing from the context: KeywordScorer gives P(supported) = 0.5 * 5/6.
    score = metric.measure(case(BAD), _show_indicator=False)
    assert score == pytest.approx(1 - (1 - 0.5 * 5 / 6))
    assert metric.success is False and metric.is_successful() is False
    assert "['Marie Curie', 'won', 'three Nobel Prizes'] P(unsupported)=0.583" in metric.reason
    assert "'born in'" not in metric.reason  # the supported triple is not blamed
    assert 'evidence: "Marie Curie was born in Warsaw. She won two Nobel Prizes."' in metric.reason
    assert "grounding: context" in metric.reason


async def test_a_measure_accepts_the_runner_keywords(engine: GraphEval) -> None:
    metric = GraphEvalMetric(grapheval=engine)
    score = await metric.a_measure(case(BAD), _show_indicator=False, _in_component=False, unknown_option=1)
    assert score == pytest.approx(0.5 * 5 / 6)
    assert metric.score == score and metric.success is False
    assert await metric.a_measure(case(GOOD)) == 1.0  # DeepEval's retry without keywords


async def test_sync_measure_works_inside_a_running_event_loop(engine: GraphEval) -> None:
    metric = GraphEvalMetric(grapheval=engine)
    assert metric.measure(case(GOOD), _show_indicator=False) == 1.0


@pytest.mark.parametrize(
    ("p_unsupported", "threshold", "passes"),
    [
        (0.5, 0.5, True),  # the paper: hallucination iff P(unsupported) > 0.5
        (0.51, 0.5, False),
        (0.25, 0.7, True),
        (0.35, 0.7, False),
        (0.0, 0.95, True),  # the other triple: P(unsupported) = 0.05
        (0.06, 0.95, False),
        (0.9, 0.0, True),
    ],
)
def test_score_is_one_minus_max_p_and_threshold_is_a_minimum(
    llm: ScriptedChatModel, p_unsupported: float, threshold: float, passes: bool
) -> None:
    scorer = table_scorer({"Marie Curie won three Nobel Prizes": 1 - p_unsupported, "Marie Curie born in Warsaw": 0.95})
    metric = GraphEvalMetric(threshold, llm=llm, scorer=scorer)
    score = metric.measure(case(BAD), _show_indicator=False)
    assert score == pytest.approx(1 - max(p_unsupported, 0.05))
    assert metric.is_successful() is passes
    assert metric.reason is not None
    assert metric.reason.startswith("faithful" if passes else "hallucination")
    if not passes:
        assert "three Nobel Prizes" in metric.reason and "Warsaw'" not in metric.reason


def test_reason_lists_only_claims_below_the_threshold(llm: ScriptedChatModel) -> None:
    scorer = table_scorer({"Marie Curie won three Nobel Prizes": 0.1, "Marie Curie born in Warsaw": 0.6})
    lenient = GraphEvalMetric(0.3, llm=llm, scorer=scorer)
    lenient.measure(case(BAD), _show_indicator=False)
    assert "1 of 2 claims unsupported" in lenient.reason and "Warsaw'" not in lenient.reason
    demanding = GraphEvalMetric(0.8, llm=llm, scorer=scorer)
    demanding.measure(case(BAD), _show_indicator=False)
    assert "2 of 2 claims unsupported" in demanding.reason and "'Warsaw'] P(unsupported)=0.400" in demanding.reason
    # Most unsupported first.
    assert demanding.reason.index("three Nobel") < demanding.reason.index("'Warsaw']")


def test_strict_mode_is_deepeval_strict_mode(llm: ScriptedChatModel) -> None:
    """1 when every claim is supported at the engine's threshold, else 0: a probabilistic judge can pass it (one
    that never gives P(unsupported) = 0 never passed it before)."""
    from grapheval_plugins.aggregate import HybridWeights

    scorer = table_scorer({"Marie Curie born in Warsaw": 0.95, "Marie Curie won three Nobel Prizes": 0.9})
    relaxed = GraphEvalMetric(0.95, llm=llm, scorer=scorer)
    strict = GraphEvalMetric(0.95, llm=llm, scorer=scorer, strict_mode=True)  # the threshold is not read
    assert strict.threshold == 1.0 and strict.engine.hallucination_threshold == 0.5
    assert relaxed.measure(case(BAD), _show_indicator=False) == pytest.approx(0.9)
    assert relaxed.is_successful() is False
    assert strict.measure(case(BAD), _show_indicator=False) == 1.0
    assert strict.is_successful() is True and strict.reason.startswith("strict mode: score 1, every claim is")
    # One claim above the threshold: 0, and the reason names it.
    doubted = table_scorer({"Marie Curie won three Nobel Prizes": 0.3})
    strict = GraphEvalMetric(llm=llm, scorer=doubted, strict_mode=True)
    assert strict.measure(case(BAD), _show_indicator=False) == 0.0
    assert strict.is_successful() is False and "three Nobel Prizes" in strict.reason
    # Even when the rule outweighs that claim (the whole output reads as supported): not every claim is supported.
    whole_only = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="the whole output alone")
    engine = GraphEval(llm=llm, scorer=table_scorer({"Marie Curie won three Nobel Prizes": 0.3}, default=0.9),
                       hybrid_weights=whole_only)
    assert GraphEvalMetric(grapheval=engine).measure(case(BAD), _show_indicator=False) == pytest.approx(0.9)
    strict = GraphEvalMetric(grapheval=engine, strict_mode=True)
    assert strict.measure(case(BAD), _show_indicator=False) == 0.0 and strict.engine is engine
    # DeepEval's copy keeps strict mode and its threshold.
    (copy,) = copy_metrics([strict])
    assert copy.strict_mode is True and copy.threshold == 1.0


def test_raw_mode_scores_the_whole_output(llm: ScriptedChatModel) -> None:
    scorer = table_scorer({BAD: 0.2})
    metric = GraphEvalMetric(llm=llm, scorer=scorer, mode="raw")
    assert metric.__name__ == "GraphEval (raw)"
    assert metric.evaluation_model == "raw + table"
    assert metric.measure(case(BAD), _show_indicator=False) == pytest.approx(0.2)
    assert llm.calls == []  # no extraction in raw mode
    assert repr(BAD) in metric.reason


# --------------------------------------------------------------------------- grounding fields
def test_context_first_then_retrieval_context(llm: ScriptedChatModel) -> None:
    scorer = table_scorer({})
    metric = GraphEvalMetric(llm=llm, scorer=scorer)
    metric.measure(case(GOOD, context=["Context passage."], retrieval_context=["Retrieved passage."]),
                   _show_indicator=False)
    assert "grounding: context" in metric.reason
    assert scorer.batches[-1][0][0] == "Context passage."

    for empty in (None, [], ["", "  "]):
        metric.measure(case(GOOD, context=empty, retrieval_context=["Retrieved one.", "Retrieved two."]),
                       _show_indicator=False)
        assert "grounding: retrieval_context" in metric.reason
        # each retrieved passage is scored on its own, never joined with the next
        assert [p for p, _ in scorer.batches[-1]][:2] == ["Retrieved one.", "Retrieved two."]


def test_context_field_can_be_forced(llm: ScriptedChatModel) -> None:
    scorer = table_scorer({})
    only_retrieval = GraphEvalMetric(llm=llm, scorer=scorer, context_field="retrieval_context")
    only_retrieval.measure(
        case(GOOD, context=["Context passage."], retrieval_context=[RetrievedContextData(context="Doc text.",
                                                                                         source="doc.md")]),
        _show_indicator=False,
    )
    assert scorer.batches[-1][0][0] == "Doc text."
    assert "grounding: retrieval_context" in only_retrieval.reason

    only_context = GraphEvalMetric(llm=llm, scorer=scorer, context_field="context")
    with pytest.raises(MissingTestCaseParamsError, match="'context' cannot be None or empty"):
        only_context.measure(case(GOOD, context=None, retrieval_context=["Retrieved."]), _show_indicator=False)
    assert only_context.error is not None and only_context.success is False


@pytest.mark.parametrize(
    ("output", "fields", "message"),
    [
        (None, {}, "'actual_output' cannot be None"),
        ("", {}, "'actual_output' cannot be empty"),
        ("   \n", {}, "'actual_output' cannot be empty"),
        (GOOD, {"context": None}, "'context' or 'retrieval_context' cannot be None or empty"),
        (GOOD, {"context": [""], "retrieval_context": []}, "'context' or 'retrieval_context' cannot be None"),
    ],
)
def test_missing_or_empty_fields_raise_deepevals_error(
    engine: GraphEval, output: str | None, fields: dict[str, Any], message: str
) -> None:
    metric = GraphEvalMetric(grapheval=engine)
    with pytest.raises(MissingTestCaseParamsError, match=message):
        metric.measure(case(output, **fields), _show_indicator=False)
    assert metric.error is not None and message.split(" cannot")[0] in metric.error
    assert metric.score is None and metric.is_successful() is False


def test_stage_failures_raise_and_set_error(engine: GraphEval, llm: ScriptedChatModel) -> None:
    metric = GraphEvalMetric(grapheval=engine)
    with pytest.raises(ExtractionError, match="provider unavailable"):
        metric.measure(case(LLM_FAILS), _show_indicator=False)
    assert metric.error is not None and metric.error.startswith("extract:")

    failing_scorer = GraphEvalMetric(llm=llm, scorer=table_scorer({}))
    with pytest.raises(ScoringError, match="scorer crashed"):
        failing_scorer.measure(case(SCORER_FAILS), _show_indicator=False)
    assert failing_scorer.error is not None and failing_scorer.score is None


def test_a_model_that_cannot_load_is_a_metric_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(spec: Any = None, **_: Any) -> Any:
        raise ModelLoadError(f"cannot load {spec!r}")

    monkeypatch.setattr(models, "resolve_llm", broken)
    metric = GraphEvalMetric(llm="local:missing-model", scorer=KeywordScorer())
    with pytest.raises(ModelLoadError, match="local:missing-model"):
        metric.measure(case(GOOD), _show_indicator=False)
    assert metric.error is not None and "local:missing-model" in metric.error


# --------------------------------------------------------------------------- the DeepEval runner
def test_evaluate_over_a_mixed_dataset_records_each_case(engine: GraphEval) -> None:
    cases = [
        case(GOOD, input="good"),
        case(BAD, input="bad"),
        case(GOOD, input="no grounding", context=None),
        case("", input="empty output"),
        case(LLM_FAILS, input="llm fails"),
        case(GOOD, input="retrieval", context=None, retrieval_context=[FACTS]),
    ]
    result = evaluate(cases, [GraphEvalMetric(grapheval=engine)], display_config=QUIET,
                      error_config=ErrorConfig(ignore_errors=True))
    results = by_input(result)
    assert len(results) == len(cases)
    good, bad = results["good"].metrics_data[0], results["bad"].metrics_data[0]
    assert (good.success, good.score, good.error) == (True, 1.0, None)
    assert good.evaluation_model == "scripted-kg + keyword-overlap"
    assert bad.success is False and bad.score == pytest.approx(0.5 * 5 / 6)
    assert "three Nobel Prizes" in bad.reason
    assert "cannot be None or empty" in results["no grounding"].metrics_data[0].error
    assert "'actual_output' cannot be empty" in results["empty output"].metrics_data[0].error
    assert "provider unavailable" in results["llm fails"].metrics_data[0].error
    assert results["retrieval"].metrics_data[0].success is True
    assert "grounding: retrieval_context" in results["retrieval"].metrics_data[0].reason
    assert all(results[k].success is False for k in ("no grounding", "empty output", "llm fails"))


def test_evaluate_skips_cases_with_missing_params_when_asked(engine: GraphEval) -> None:
    cases = [case(GOOD, input="good"), case(GOOD, input="no grounding", context=None)]
    result = evaluate(cases, [GraphEvalMetric(grapheval=engine)], display_config=QUIET,
                      error_config=ErrorConfig(skip_on_missing_params=True))
    results = by_input(result)
    assert results["good"].metrics_data[0].success is True
    assert not results["no grounding"].metrics_data  # skipped: no metric data


def test_evaluate_without_ignore_errors_raises_deepevals_error(engine: GraphEval) -> None:
    with pytest.raises(MissingTestCaseParamsError):
        evaluate([case(GOOD, context=None)], [GraphEvalMetric(grapheval=engine)], display_config=QUIET)


def test_evaluate_sync_runner(engine: GraphEval) -> None:
    result = evaluate([case(GOOD, input="good"), case(BAD, input="bad")], [GraphEvalMetric(grapheval=engine)],
                      display_config=QUIET, async_config=AsyncConfig(run_async=False))
    results = by_input(result)
    assert results["good"].success is True and results["bad"].success is False


def test_assert_test_passes_and_fails(engine: GraphEval) -> None:
    metric = GraphEvalMetric(grapheval=engine)
    assert_test(case(GOOD), [metric])
    with pytest.raises(AssertionError, match=r"(?s)GraphEval \(score: 0\.41.*three Nobel Prizes"):
        assert_test(case(BAD), [metric])


def test_models_load_once_for_20_test_cases_and_scorer_passes_are_shared(monkeypatch: pytest.MonkeyPatch) -> None:
    created = {"llm": 0, "scorer": 0}
    lock = threading.Lock()
    scorers: list[FunctionScorer] = []
    chat_models: list[ScriptedChatModel] = []

    def make_llm(spec: Any = None, **_: Any) -> ScriptedChatModel:
        with lock:
            created["llm"] += 1
        chat_models.append(ScriptedChatModel(respond=respond, model_label=str(spec)))
        return chat_models[-1]

    def make_scorer(spec: Any = None, **_: Any) -> FunctionScorer:
        with lock:
            created["scorer"] += 1
        scorers.append(table_scorer({}))
        return scorers[-1]

    monkeypatch.setattr(models, "resolve_llm", make_llm)
    monkeypatch.setattr(models, "resolve_scorer", make_scorer)
    metric = GraphEvalMetric(llm="counting:llm", scorer="counting:scorer")
    assert created == {"llm": 0, "scorer": 0}  # nothing loads in the constructor
    copies = copy_metrics([metric, metric])
    assert all(c.engine is metric.engine for c in copies)  # DeepEval's copies share the engine
    assert created == {"llm": 0, "scorer": 0}

    cases = [case(f"Fact number {i}.", input=f"case {i}", context=[f"Fact number {i}."]) for i in range(20)]
    result = evaluate(cases, [metric], display_config=QUIET)
    assert created == {"llm": 1, "scorer": 1}
    assert len(chat_models[0].calls) == 20
    assert sum(len(b) for b in scorers[0].batches) == 20
    assert len(scorers[0].batches) <= 5  # concurrent cases share scorer passes (timing-dependent: see below)
    assert all(r.success for r in result.test_results) and len(result.test_results) == 20
    # A metric built again from the same specs (another test function) reuses the loaded models.
    GraphEvalMetric(llm="counting:llm", scorer="counting:scorer").measure(case(GOOD), _show_indicator=False)
    assert created == {"llm": 1, "scorer": 1}


def test_concurrent_test_cases_go_to_the_scorer_in_one_pass(llm: ScriptedChatModel) -> None:
    scorer = table_scorer({})
    engine = GraphEval(llm=llm, scorer=scorer, batch_wait_s=1.0)  # a wide window: deterministic on a busy machine
    cases = [case(f"Fact number {i}.", input=f"case {i}", context=[f"Fact number {i}."]) for i in range(20)]
    result = evaluate(cases, [GraphEvalMetric(grapheval=engine)], display_config=QUIET)
    assert len(result.test_results) == 20 and all(r.success for r in result.test_results)
    assert len(scorer.batches) == 1 and len(scorer.batches[0]) == 20


def test_copies_keep_every_setting_and_the_engine(engine: GraphEval) -> None:
    metric = GraphEvalMetric(0.7, engine, context_field="retrieval_context", include_reason=False,
                             async_mode=False, verbose_mode=True)
    (copy,) = copy_metrics([metric])
    assert copy is not metric and copy.engine is engine
    for name in ("threshold", "context_field", "include_reason", "async_mode", "verbose_mode", "evaluation_model"):
        assert getattr(copy, name) == getattr(metric, name)


def test_include_reason_false_and_verbose_logs(engine: GraphEval, capsys: pytest.CaptureFixture[str]) -> None:
    metric = GraphEvalMetric(grapheval=engine, include_reason=False, verbose_mode=True)
    metric.measure(case(BAD), _show_indicator=False)
    assert metric.reason is None
    logs = metric.verbose_logs
    assert "['Marie Curie', 'born in', 'Warsaw'] P(unsupported)=0.000 supported" in logs
    assert "['Marie Curie', 'won', 'three Nobel Prizes'] P(unsupported)=0.583 UNSUPPORTED" in logs
    assert "Knowledge graph: 2 triples" in logs and "Grounding: context" in logs
    assert "GraphEval Verbose Logs" in capsys.readouterr().out


def test_evaluation_model_names_both_models_without_loading() -> None:
    metric = GraphEvalMetric(llm="local:some-model", scorer="hhem")
    assert metric.evaluation_model == "local:some-model + hhem"
    default = GraphEvalMetric()
    assert default.evaluation_model == f"{models.DEFAULT_LLM} + {models.DEFAULT_SCORER}"
    assert default.engine is shared_engine(None, None, "graph")
    assert default.__name__ == "GraphEval"


def test_evaluation_model_is_stable_across_a_measure(engine: GraphEval) -> None:
    metric = GraphEvalMetric(grapheval=engine)
    before = metric.evaluation_model
    metric.measure(case(GOOD), _show_indicator=False)
    assert metric.evaluation_model == before == "scripted-kg + keyword-overlap"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"threshold": 1.5}, "threshold"),
        ({"threshold": -0.1}, "threshold"),
        ({"context_field": "documents"}, "context_field"),
        ({"mode": "triples"}, "mode"),
        ({"grapheval": "not an engine"}, "grapheval"),
        ({"grapheval": GraphEval(), "llm": "local:x"}, "grapheval"),
        ({"grapheval": GraphEval(mode="raw"), "mode": "graph"}, "mode"),
    ],
)
def test_constructor_rejects_bad_settings(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(InputError) as info:
        GraphEvalMetric(**kwargs)
    assert info.value.field == field


def test_concurrent_measures_on_one_engine_do_not_mix_results(engine: GraphEval) -> None:
    async def run() -> list[tuple[float, bool]]:
        metrics = [GraphEvalMetric(grapheval=engine) for _ in range(6)]
        outputs = [GOOD, BAD] * 3
        await asyncio.gather(*(m.a_measure(case(o), _show_indicator=False) for m, o in zip(metrics, outputs)))
        return [(m.score, m.success) for m in metrics]

    scores = asyncio.run(run())
    assert scores == [(1.0, True), (pytest.approx(0.5 * 5 / 6), False)] * 3


def test_nothing_is_written_outside_the_working_directory(engine: GraphEval, tmp_path: Path) -> None:
    home_marker = Path.home() / ".deepeval"
    existed = home_marker.exists()
    evaluate([case(GOOD)], [GraphEvalMetric(grapheval=engine)], display_config=QUIET,
             cache_config=CacheConfig(write_cache=True))
    assert (tmp_path / ".deepeval").is_dir()  # DeepEval's cache and last run: the current directory only
    assert home_marker.exists() == existed


def test_importing_the_package_does_not_import_deepeval() -> None:
    code = (
        "import sys, grapheval_plugins\n"
        "assert 'deepeval' not in sys.modules, 'deepeval imported eagerly'\n"
        "metric_cls = grapheval_plugins.GraphEvalMetric\n"
        "assert 'deepeval' in sys.modules and metric_cls.__name__ == 'GraphEvalMetric'\n"
    )
    env = {**os.environ, "DEEPEVAL_TELEMETRY_OPT_OUT": "YES"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr


# --------------------------------------------------------------------------- GraphCorrect hint
def correcting_respond(messages: list[Any]) -> str:
    """Prompts B and C answer with a fix; prompt A extracts from the (possibly corrected) output."""
    last = str(messages[-1].content)
    if "<old_triple>" in last:  # prompt C: substitute
        return "<context>Marie Curie was born in Warsaw and won two Nobel Prizes.</context>"
    if "<triple>" in last:  # prompt B: correct the triple
        if "never" in last:
            raise RuntimeError("correction model down")
        return '["Marie Curie", "won", "two Nobel Prizes"]'
    if "won two Nobel Prizes" in last:
        return '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "two Nobel Prizes"]]</python>'
    return respond(messages)


def test_suggested_correction_is_appended_to_a_failing_reason() -> None:
    pytest.importorskip("grapheval_plugins.correct")
    llm = ScriptedChatModel(respond=correcting_respond)
    metric = GraphEvalMetric(llm=llm, scorer=KeywordScorer(), suggest_correction=True)
    metric.measure(case(BAD), _show_indicator=False)
    assert metric.success is False  # the score is the original output's
    assert "suggested correction (passes the re-check): Marie Curie was born in Warsaw and won two Nobel Prizes." in (
        metric.reason
    )
    assert "[-three-]{+two+}" in metric.reason

    calls = len(llm.calls)
    metric.measure(case(GOOD), _show_indicator=False)
    assert "suggested correction" not in metric.reason and len(llm.calls) == calls + 1  # extraction only
    (copy,) = copy_metrics([metric])
    assert copy.suggest_correction is True


def test_a_failed_correction_is_noted_not_raised() -> None:
    pytest.importorskip("grapheval_plugins.correct")
    never = "Marie Curie never won three Nobel Prizes."
    TRIPLES[never] = [["Marie Curie", "never won", "three Nobel Prizes"]]
    try:
        llm = ScriptedChatModel(respond=correcting_respond)
        metric = GraphEvalMetric(llm=llm, scorer=KeywordScorer(), suggest_correction=True)
        score = metric.measure(case(never), _show_indicator=False)
    finally:
        del TRIPLES[never]
    assert metric.error is None and metric.success is False and score < 0.5
    assert "suggested correction: none (" in metric.reason
    assert "step 1: the chat model raised RuntimeError: correction model down)" in metric.reason


def test_warm_up_loads_the_models_before_any_test_case(monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[str] = []

    def make_llm(spec: Any = None, **_: Any) -> ScriptedChatModel:
        created.append("llm")
        return ScriptedChatModel(responses=['<python>[["The sky", "is", "blue"]]</python>'])

    def make_scorer(spec: Any = None, **_: Any) -> KeywordScorer:
        created.append("scorer")
        return KeywordScorer()

    monkeypatch.setattr(models, "resolve_llm", make_llm)
    monkeypatch.setattr(models, "resolve_scorer", make_scorer)
    metric = GraphEvalMetric(llm="warm:llm", scorer="warm:scorer")
    assert created == []
    report = metric.warm_up()
    assert sorted(created) == ["llm", "scorer"] and report.hallucinated is False
    (copy,) = copy_metrics([metric])
    copy.warm_up()
    assert len(created) == 2  # the copy reuses the loaded models
