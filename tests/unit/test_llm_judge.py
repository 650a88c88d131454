"""The LLM judge over LangChain chat models (grapheval_plugins.check.llm_judge), its verdict parser and the shared
judge interface, end to end through GraphEval with langchain-core's own fake chat models."""

from __future__ import annotations

import math
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.language_models.fake_chat_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import PrivateAttr

from grapheval_plugins import GraphEval, resolve_scorer
from grapheval_plugins.check.judge import (
    JUDGE_LABELS,
    VERDICT_P_UNSUPPORTED,
    JudgeCalibration,
    JudgeScorer,
    LabelLogits,
    LabelReading,
    label_distribution,
    p_supported,
)
from grapheval_plugins.check.llm_judge import CHAT_JUDGE_PROMPT, ChatLabelLogits, LLMJudge
from grapheval_plugins.check.verdicts import label_logprobs_at, parse_verdicts
from grapheval_plugins.exceptions import InputError
from grapheval_plugins.models import load_judge
from grapheval_plugins.testing import ScriptedChatModel

CONTEXT = "Marie Curie was born in Warsaw in 1867. She won two Nobel Prizes, in physics and in chemistry."
TRIPLES = '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "three Nobel Prizes"]]</python>'


def extractor() -> ScriptedChatModel:
    return ScriptedChatModel(respond=lambda messages: TRIPLES)


# --------------------------------------------------------------------------- an OpenAI-style fake with logprobs
_TOKEN = re.compile(r"\n|[ ]?[A-Za-z]+|[ ]?\d+|[^\sA-Za-z\d]|[ ]+")


class LogprobChatModel(BaseChatModel):
    """Answers the way langchain-openai (1.1.9, ``chat_models/base.py``, ``_create_chat_result``) returns a choice
    with log-probabilities::

        if "logprobs" in res:
            generation_info["logprobs"] = res["logprobs"]
        gen = ChatGeneration(message=message, generation_info=generation_info)

    and langchain-core copies ``generation_info`` into the message's ``response_metadata``. The class's own docs
    show the shape (``model.bind(logprobs=True)``; ``ai_msg.response_metadata["logprobs"]``)::

        {"content": [{"token": "J", "bytes": [74], "logprob": -4.9617593e-06, "top_logprobs": []}, ...]}

    with ``top_logprobs`` filled (``[{"token", "bytes", "logprob"}, ...]``) when ``top_logprobs=k`` is set.

    ``answer`` is the text; ``alternatives`` maps the n-th label token to its top alternatives
    ``[(token, logprob), ...]`` (the chosen one first). ``top=False``: no ``top_logprobs`` (only ``logprobs=True``).
    """

    answer: str
    alternatives: dict[int, list[tuple[str, float]]] = {}
    top: bool = True
    _calls: list[list[BaseMessage]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "fake-openai-logprobs"

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        self._calls.append(list(messages))
        content = []
        label_index = 0
        for piece in _TOKEN.findall(self.answer):
            entry: dict[str, Any] = {"token": piece, "bytes": list(piece.encode()), "logprob": -0.01,
                                     "top_logprobs": []}
            if piece.strip().lower() in JUDGE_LABELS:
                alts = self.alternatives.get(label_index)
                label_index += 1
                if alts:
                    entry["logprob"] = alts[0][1]
                    if self.top:
                        entry["top_logprobs"] = [{"token": t, "bytes": list(t.encode()), "logprob": lp} for t, lp in alts]
            elif self.top:
                entry["top_logprobs"] = [{"token": piece, "bytes": list(piece.encode()), "logprob": -0.01}]
            content.append(entry)
        assert "".join(e["token"] for e in content) == self.answer
        generation = ChatGeneration(
            message=AIMessage(content=self.answer),
            generation_info={"finish_reason": "stop", "logprobs": {"content": content, "refusal": None}},
        )
        return ChatResult(generations=[generation])


# --------------------------------------------------------------------------- the prompt
def test_one_call_per_output_holds_the_context_once_and_every_claim() -> None:
    llm = ScriptedChatModel(responses=["1: supported\n2: contradicted\n3: unknown"])
    judge = LLMJudge(llm)
    claims = ["Marie Curie born in Warsaw", "Marie Curie won three Nobel Prizes", "Marie Curie born in 1868"]
    scores = judge.check([CONTEXT] * 3, claims)
    assert len(llm.calls) == 1
    system, user = llm.calls[0]
    assert user.content.count(CONTEXT) == 1 and CONTEXT not in system.content
    for number, claim in enumerate(claims, start=1):
        assert f"\n{number}. {claim}" in user.content
    assert "supported, contradicted, unknown" in system.content and "world knowledge does not count" in system.content
    assert [s.p_unsupported for s in scores] == pytest.approx([0.1, 0.9, 0.8])
    assert all(s.error is None and s.chunk == CONTEXT and s.chunk_index == 0 for s in scores)


def test_prompt_placeholders_are_replaced_literally() -> None:
    messages = CHAT_JUDGE_PROMPT.messages("a {claims} b {context}", ["x {number}"], JUDGE_LABELS)
    assert "a {claims} b {context}" in messages[1].content and "1. x {number}" in messages[1].content


# --------------------------------------------------------------------------- end to end with langchain-core fakes
def test_graph_eval_with_a_fake_list_chat_model_judge() -> None:
    judge = LLMJudge(FakeListChatModel(responses=["Here are my verdicts:\n1: Supported\n2: Contradicted\nDone."]))
    report = GraphEval(llm=extractor(), scorer=judge).evaluate(context=CONTEXT, output="She was born in Warsaw and won three Nobel Prizes.")
    assert report.ok and report.hallucinated is True
    assert [c.triple.object for c in report.unsupported if c.triple] == ["three Nobel Prizes"]
    assert report.claims[0].p_unsupported == pytest.approx(VERDICT_P_UNSUPPORTED["supported"])
    assert report.scorer == judge.name and report.errors == []


def test_a_chat_model_passed_as_scorer_becomes_an_llm_judge() -> None:
    chat = GenericFakeChatModel(messages=iter([AIMessage(content="1. supported\n2. supported")]))
    engine = GraphEval(llm=extractor(), scorer=chat)
    named = engine.describe(load=False)
    assert isinstance(engine.scorer, LLMJudge) and engine.scorer.llm is chat
    assert named.endswith(" + " + engine.scorer.name) and engine.describe(load=False) == named
    report = engine.evaluate(context=CONTEXT, output="Born in Warsaw, won three Nobel Prizes.")
    assert report.ok and report.hallucinated is False and report.score == pytest.approx(0.9)
    bound = FakeListChatModel(responses=["1: unknown"]).bind(stop=["\n\n"])
    assert isinstance(resolve_scorer(bound), LLMJudge)


def test_judge_specs_name_any_chat_model() -> None:
    judge = resolve_scorer("judge:py:grapheval_plugins.testing:naive_triples_chat_model")
    assert isinstance(judge, LLMJudge) and judge.name.startswith("judge:")
    assert isinstance(load_judge("py:grapheval_plugins.testing:ScriptedChatModel", retries=0), LLMJudge)
    local = resolve_scorer("judge:local:qwen2.5-coder-0.5b")
    assert type(local).__name__ == "LocalJudgeScorer"


def test_batch_rows_share_no_calls_and_each_row_gets_its_verdicts() -> None:
    def respond(messages: list[BaseMessage]) -> str:
        user = str(messages[-1].content)
        return "1: supported\n2: supported" if "Warsaw" in user.split("Claims:")[0] else "1: unknown\n2: unknown"

    llm = ScriptedChatModel(respond=respond)
    rows = [{"context": CONTEXT, "output": "a"}, {"context": "Paris is in France.", "output": "b"}]
    reports = GraphEval(llm=extractor(), scorer=LLMJudge(llm)).evaluate_many(rows)
    assert [r.hallucinated for r in reports] == [False, True]
    assert len(llm.calls) == 2  # one call per output (its two claims together)


# --------------------------------------------------------------------------- log-probabilities
def test_p_unsupported_comes_from_openai_style_token_logprobs() -> None:
    answer = "1: supported\n2: unknown"
    chat = LogprobChatModel(answer=answer, alternatives={
        0: [(" supported", math.log(0.7)), (" unknown", math.log(0.2)), (" contradicted", math.log(0.05)),
            (" Supported", math.log(0.05))],
        1: [(" unknown", math.log(0.6)), (" contradicted", math.log(0.3)), (" supported", math.log(0.1))],
    })
    judge = LLMJudge(chat)
    scores = judge.check([CONTEXT] * 2, ["Curie born in Warsaw", "Curie born in Paris"])
    # " Supported" and " supported" both count for the label: P(supported) = 0.75 of the label mass 1.0.
    assert scores[0].p_unsupported == pytest.approx(0.25)
    assert scores[1].p_unsupported == pytest.approx(0.9)
    message = chat.invoke("x")
    assert message.response_metadata["logprobs"]["content"][0]["token"] == "1"


def test_without_top_logprobs_the_chosen_label_keeps_its_probability() -> None:
    chat = LogprobChatModel(answer="1: unknown", alternatives={0: [(" unknown", math.log(0.8))]}, top=False)
    score = LLMJudge(chat).check([CONTEXT], ["Curie born in Paris"])[0]
    assert score.p_unsupported == pytest.approx(1 - 0.2 / 2)  # the other two labels share 0.2


def test_request_logprobs_binds_the_openai_options() -> None:
    backend = ChatLabelLogits(FakeListChatModel(responses=["1: supported"]), request_logprobs=5)
    assert backend._runnable.kwargs == {"logprobs": True, "top_logprobs": 5}
    assert ChatLabelLogits(FakeListChatModel(responses=["x"])).request_logprobs == "auto"
    assert ChatLabelLogits(FakeListChatModel(responses=["x"]), request_logprobs=None)._runnable.__class__ is FakeListChatModel
    with pytest.raises(ValueError, match="request_logprobs"):
        ChatLabelLogits(FakeListChatModel(responses=["x"]), request_logprobs=-1)


class OpenAIStyleChatModel(LogprobChatModel):
    """A client that declares OpenAI's ``logprobs`` / ``top_logprobs`` options (as ``ChatOpenAI`` does) and
    records the options of every call; ``serves_logprobs=False``: the provider ignores them (no logprobs in the
    answer); ``refuses=True``: a call with them raises (as a server that cannot compute them answers)."""

    logprobs: bool | None = None
    top_logprobs: int | None = None
    serves_logprobs: bool = True
    refuses: bool = False
    _options: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    def _generate(self, messages: list[BaseMessage], stop: Any = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        self._options.append(dict(kwargs))
        if kwargs.get("logprobs") and self.refuses:
            raise ValueError("logprobs is not supported for models created with logits_all=False")
        result = super()._generate(messages, stop, run_manager, **kwargs)
        if not (kwargs.get("logprobs") and self.serves_logprobs):
            generation = result.generations[0]
            generation.generation_info = {"finish_reason": "stop"}
            generation.message.response_metadata = {}
        return result


ALTS = {0: [(" supported", math.log(0.7)), (" unknown", math.log(0.3))],
        1: [(" unknown", math.log(0.6)), (" supported", math.log(0.4))]}


def test_log_probabilities_are_asked_for_automatically_and_detected_from_the_answer() -> None:
    chat = OpenAIStyleChatModel(answer="1: supported 80\n2: unknown 30", alternatives=ALTS)
    judge = LLMJudge(chat)
    assert judge.logprobs_returned is None
    scores = judge.check([CONTEXT] * 2, ["Curie born in Warsaw", "Curie born in Paris"])
    assert chat._options[0] == {"logprobs": True, "top_logprobs": 5}
    assert judge.logprobs_returned is True
    assert [s.p_unsupported for s in scores] == pytest.approx([0.3, 0.6])  # the label log-probabilities
    judge.check([CONTEXT], ["Curie born in Rome"])
    assert chat._options[1] == {"logprobs": True, "top_logprobs": 5}


def test_a_provider_that_ignores_them_is_not_asked_again_and_the_stated_probability_grades_the_score() -> None:
    chat = OpenAIStyleChatModel(answer="1: supported 80\n2: unknown 30", alternatives=ALTS, serves_logprobs=False)
    judge = LLMJudge(chat)
    scores = judge.check([CONTEXT] * 2, ["Curie born in Warsaw", "Curie born in Paris"])
    assert judge.logprobs_returned is False
    assert [s.p_unsupported for s in scores] == pytest.approx([0.2, 0.7])  # 1 - the stated probability
    judge.check([CONTEXT], ["Curie born in Rome"])
    assert chat._options[1] == {}


def test_a_provider_that_refuses_them_is_asked_again_without_and_remembered() -> None:
    chat = OpenAIStyleChatModel(answer="1: contradicted 10", alternatives=ALTS, refuses=True)
    judge = LLMJudge(chat, retries=0)
    score = judge.check([CONTEXT], ["Curie born in Paris"])[0]
    assert score.error is None and score.p_unsupported == pytest.approx(0.9)
    assert chat._options == [{"logprobs": True, "top_logprobs": 5}, {}]
    assert judge.logprobs_returned is False
    judge.check([CONTEXT], ["Curie born in Rome"])
    assert chat._options[2] == {}


async def test_the_async_path_detects_them_too() -> None:
    chat = OpenAIStyleChatModel(answer="1: supported 80", alternatives=ALTS, refuses=True)
    judge = LLMJudge(chat, retries=0)
    score = (await judge.acheck([CONTEXT], ["Curie born in Warsaw"]))[0]
    assert score.p_unsupported == pytest.approx(0.2) and judge.logprobs_returned is False


def test_a_client_without_the_option_is_never_sent_it() -> None:
    seen: list[dict[str, Any]] = []

    class Plain(ScriptedChatModel):
        async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                             **kwargs: Any) -> ChatResult:
            seen.append(dict(kwargs))
            return await super()._agenerate(messages, stop, run_manager)

    judge = LLMJudge(Plain(responses=["1: supported 65\n2: contradicted 2"]))
    scores = judge.check([CONTEXT] * 2, ["a", "b"])
    assert seen == [{}] and judge.logprobs_returned is False
    assert [s.p_unsupported for s in scores] == pytest.approx([0.35, 0.98])


def test_stated_probabilities_rank_where_verdicts_tie_and_keep_one_threshold() -> None:
    judge = LLMJudge(ScriptedChatModel(responses=["1: supported 95\n2: supported 60\n3: unknown 45\n4: unknown"]))
    scores = [s.p_unsupported for s in judge.check([CONTEXT] * 4, ["a", "b", "c", "d"])]
    assert scores == pytest.approx([0.05, 0.4, 0.55, 0.8])  # no figure: the verdict's fixed value
    assert [s > 0.5 for s in scores] == [False, False, True, True]  # P(unsupported) at the usual threshold


@pytest.mark.parametrize(("answer", "expected"), [
    ("1: supported 2: unknown", [None, None]),             # the next claim's number is no figure
    ("1: supported (90%)\n2: unknown - 0.2", [0.9, 0.2]),
    ("1: supported, as the context says 3 times\n2: unknown 250", [None, None]),
    ('{"1": "supported 70", "2": "contradicted 0"}', [0.7, 0.0]),
])
def test_the_stated_figure_is_read_only_right_after_its_label(answer: str, expected: list[float | None]) -> None:
    parsed = parse_verdicts(answer, 2, JUDGE_LABELS)
    assert [parsed.verdicts[n].stated for n in (1, 2)] == expected


def test_calibration_applies_to_logprob_readings_only() -> None:
    calibration = JudgeCalibration.from_threshold(0.2)
    reading = LabelReading(logprobs={"supported": math.log(0.8), "unknown": math.log(0.2)})
    assert p_supported(reading, JUDGE_LABELS, calibration) == pytest.approx(0.5)
    assert p_supported(LabelReading(verdict="supported"), JUDGE_LABELS, calibration) == pytest.approx(0.9)


def test_token_logprobs_that_do_not_spell_the_answer_fall_back_to_the_verdict() -> None:
    verdict = parse_verdicts("1: supported", 1, JUDGE_LABELS).verdicts[1]
    tokens = [{"token": "1: supp", "logprob": -0.1}, {"token": "osed", "logprob": -0.1}]
    assert label_logprobs_at(tokens, "1: supported", verdict, JUDGE_LABELS) == (
        None, "the token log-probabilities do not spell the answer")
    message = AIMessage(content="1: supported", response_metadata={"logprobs": {"content": tokens}})
    reading = ChatLabelLogits.read(message, 1, JUDGE_LABELS)[0]
    assert reading.logprobs is None and reading.verdict == "supported" and reading.notes


# --------------------------------------------------------------------------- bad answers
def test_a_missing_claim_is_asked_again_alone_and_recovered() -> None:
    llm = ScriptedChatModel(responses=["1: supported", "1: contradicted"])
    scores = LLMJudge(llm).check([CONTEXT] * 2, ["Curie born in Warsaw", "Curie won three prizes"])
    assert [s.p_unsupported for s in scores] == pytest.approx([0.1, 0.9])
    assert len(llm.calls) == 2
    retry = str(llm.calls[1][1].content)
    assert "1. Curie won three prizes" in retry and "Curie born in Warsaw" not in retry


def test_claims_an_answer_skipped_are_each_asked_alone() -> None:
    # a small model that answers only the first claim of any list: a retry of the two others together would
    # recover one of them; one call each recovers both
    llm = ScriptedChatModel(respond=lambda messages: "1: supported 90%")
    claims = ["Curie born in Warsaw", "Curie won two prizes", "Curie won in physics"]
    scores = LLMJudge(llm).check([CONTEXT] * 3, claims)
    assert [s.error for s in scores] == [None, None, None]
    assert len(llm.calls) == 3
    retries = [str(call[-1].content) for call in llm.calls[1:]]
    assert [(claims[1] in r, claims[2] in r) for r in retries] == [(True, False), (False, True)]


class _SlowFirstOnly(BaseChatModel):
    """Answers only the first claim of any list, after a pause; counts the calls in flight at once."""

    _now: int = PrivateAttr(default=0)
    most: int = 0

    @property
    def _llm_type(self) -> str:
        return "slow-first-only"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        raise NotImplementedError("async only")

    async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        import asyncio

        self._now += 1
        self.most = max(self.most, self._now)
        await asyncio.sleep(0.05)
        self._now -= 1
        return ChatResult(generations=[ChatGeneration(message=AIMessage("1: supported 90%"))])


def test_claims_asked_alone_are_asked_at_once_under_acheck() -> None:
    """Under ``acheck`` the claims an answer skipped are asked alone all at once (up to ``max_concurrency``)."""
    import asyncio

    llm = _SlowFirstOnly()
    claims = ["Curie born in Warsaw", "Curie won two prizes", "Curie won in physics", "Curie won in chemistry"]
    scores = asyncio.run(LLMJudge(llm, max_concurrency=4).acheck([CONTEXT] * 4, claims))
    assert [s.error for s in scores] == [None] * 4
    assert llm.most == 3  # the three skipped claims in flight together


def test_a_claim_still_unanswered_after_one_retry_is_a_per_claim_error() -> None:
    llm = ScriptedChatModel(responses=["1: supported", "I cannot tell.", "1: supported\n2: supported"])
    engine = GraphEval(llm=extractor(), scorer=LLMJudge(llm))
    report = engine.evaluate(context=CONTEXT, output="x")
    assert len(llm.calls) == 2  # the first call and one retry
    assert report.hallucinated is None and report.score is None and not report.ok
    assert [c.claim for c in report.claims] == ["Marie Curie born in Warsaw"]
    assert report.errors[0].stage == "check" and "three Nobel Prizes" in report.errors[0].message
    assert "no verdict for claim 1" in report.errors[0].message


def test_an_unsupported_claim_still_decides_when_another_has_no_verdict() -> None:
    llm = ScriptedChatModel(responses=["2: contradicted", "no idea"])
    report = GraphEval(llm=extractor(), scorer=LLMJudge(llm)).evaluate(context=CONTEXT, output="x")
    assert report.ok and report.hallucinated is True and report.score == pytest.approx(0.1)
    assert len(report.errors) == 1 and "born in" in report.errors[0].message


def test_extra_and_contradictory_answers() -> None:
    llm = ScriptedChatModel(responses=["1: supported\n2: unknown\n3: supported\n2: supported", "1: unknown"])
    scores = LLMJudge(llm).check([CONTEXT] * 2, ["a", "b"])
    assert [s.p_unsupported for s in scores] == pytest.approx([0.1, 0.8])  # claim 2 asked again: unknown
    assert len(llm.calls) == 2


def test_a_failing_call_never_sinks_the_batch() -> None:
    def respond(messages: list[BaseMessage]) -> str:
        if "boom" in str(messages[-1].content):
            raise RuntimeError("provider unavailable")
        return "1: supported\n2: supported"

    llm = ScriptedChatModel(respond=respond)
    rows = [{"context": "boom " + CONTEXT, "output": "a"}, {"context": CONTEXT, "output": "b"}]
    reports = GraphEval(llm=extractor(), scorer=LLMJudge(llm)).evaluate_many(rows)
    assert not reports[0].ok and "provider unavailable" in reports[0].errors[0].message
    assert reports[1].ok and reports[1].hallucinated is False
    assert len(llm.calls) == 3  # boom, its retry, and the good row


def test_a_backend_returning_the_wrong_number_of_readings_errors_per_claim() -> None:
    class Short:
        name = "short"

        def label_logprobs(self, context: str, claims: Any, labels: Any) -> list[LabelReading]:
            return [LabelReading(verdict="supported")]

    assert isinstance(Short(), LabelLogits)
    scores = JudgeScorer(Short()).check(["c", "c"], ["a", "b"])
    assert all(s.error and "1 readings for 2 claims" in s.error and math.isnan(s.p_unsupported) for s in scores)
    with pytest.raises(Exception, match="got no verdict"):
        JudgeScorer(Short()).predict_support([("c", "a"), ("c", "b")])


def test_async_runs_use_the_models_async_client_concurrently() -> None:
    import asyncio

    llm = ScriptedChatModel(respond=lambda messages: "1: supported")
    judge = LLMJudge(llm, max_concurrency=2)
    scores = asyncio.run(judge.acheck([f"ctx {i}" for i in range(5)], ["claim"] * 5))
    assert [s.p_unsupported for s in scores] == pytest.approx([0.1] * 5) and len(llm.calls) == 5


def test_long_contexts_are_chunked_only_when_asked() -> None:
    llm = ScriptedChatModel(respond=lambda m: "1: supported" if "The treasure is" in str(m[-1].content) else "1: unknown")
    context = "filler words here. " * 200 + "The treasure is under the oak."
    whole = LLMJudge(llm).check([context], ["treasure under oak"])[0]
    assert whole.chunk == context
    chunked = LLMJudge(llm, max_context_tokens=100).check([context], ["treasure under oak"])[0]
    assert chunked.chunk_index > 0 and "treasure" in chunked.chunk and chunked.p_unsupported == pytest.approx(0.1)


# --------------------------------------------------------------------------- the local judge as a backend
def test_the_local_llama_judge_is_a_backend_of_the_same_interface() -> None:
    from local_fake_llama import FakeLlama, label_logits

    from grapheval_plugins.local.judge import LocalJudgeScorer
    from grapheval_plugins.local.runtime import LlamaSession

    def word_judge(context: str, claim: str) -> tuple[float, float, float]:
        return (3.0, 0.0, 0.0) if all(w in context for w in claim.split()) else (0.0, 0.0, 2.0)

    session = LlamaSession("fake.gguf", n_ctx=2048, factory=lambda **p: FakeLlama(label_logits(word_judge), **p))
    local = LocalJudgeScorer("qwen2.5-coder-0.5b", session=session, claim_budget_tokens=64)
    assert isinstance(local, LabelLogits)
    shared = JudgeScorer(local)
    ctx = "alpha beta gamma"
    direct = [s.p_unsupported for s in local.check([ctx] * 2, ["alpha", "delta"])]
    via = shared.check([ctx] * 3, ["alpha", "delta", "x " * 1500])
    assert [s.p_unsupported for s in via[:2]] == pytest.approx(direct)
    assert direct[0] == pytest.approx(1 - label_distribution({"s": 3.0, "c": 0.0, "u": 0.0}, ["s", "c", "u"])[0])
    assert via[2].error is not None and "exceed" in via[2].error  # an overflowing claim fails alone


# --------------------------------------------------------------------------- the verdict parser
_STYLES = [
    "{n}: {label}", "{n}. {label}", "{n}) {Label}", "**{n}.** {Label}", "Claim {n}: **{LABEL}**", "- {n} - {label}",
    '"{n}": "{label}"', "{n} = {label}.", "[{n}] {label}", "{n}: `{label}` (the context says so)",
]
_CHATTER = st.text(alphabet=st.sampled_from(list("abcdefgh xyz,!?\n")), max_size=40)


@settings(max_examples=200, deadline=None)
@given(
    verdicts=st.lists(st.sampled_from(JUDGE_LABELS), min_size=1, max_size=12),
    styles=st.lists(st.sampled_from(_STYLES), min_size=12, max_size=12),
    chatter=st.lists(_CHATTER, min_size=13, max_size=13),
    order=st.randoms(use_true_random=False),
)
def test_parser_reads_every_formatted_verdict_among_chatter(verdicts: list[str], styles: list[str],
                                                           chatter: list[str], order: Any) -> None:
    lines = []
    numbered = list(enumerate(verdicts, start=1))
    order.shuffle(numbered)
    for i, (n, label) in enumerate(numbered):
        lines.append(chatter[i])
        lines.append(styles[i].format(n=n, label=label, Label=label.capitalize(), LABEL=label.upper()))
    lines.append(chatter[-1])
    text = "\n".join(lines)
    parsed = parse_verdicts(text, len(verdicts), JUDGE_LABELS)
    assert {n: v.label for n, v in parsed.verdicts.items()} == dict(enumerate(verdicts, start=1))
    for verdict in parsed.verdicts.values():
        assert text[verdict.start : verdict.end].lower() == verdict.label


@settings(max_examples=300, deadline=None)
@given(text=st.text(max_size=300), n=st.integers(min_value=0, max_value=20))
def test_parser_never_raises_and_stays_in_range(text: str, n: int) -> None:
    parsed = parse_verdicts(text, n, JUDGE_LABELS)
    assert set(parsed.verdicts) <= set(range(1, n + 1))
    assert set(parsed.verdicts) | set(parsed.claim_problems) == set(range(1, n + 1))
    assert not set(parsed.verdicts) & set(parsed.claim_problems)


@given(word=st.sampled_from(["not supported", "unsupported", "not-supported", "supportedly", "Unknownish"]))
def test_negated_or_longer_words_are_no_verdict(word: str) -> None:
    parsed = parse_verdicts(f"1: {word}", 1, JUDGE_LABELS)
    assert parsed.verdicts == {} and parsed.claim_problems == {1: "no verdict for claim 1"}


def test_numbers_out_of_range_and_decimals_are_not_verdicts() -> None:
    parsed = parse_verdicts("0: supported\n7: unknown\n2.1: supported\nthe 1.5 version", 2, JUDGE_LABELS)
    assert parsed.verdicts == {} and len(parsed.problems) == 2


class SamplingChatModel(ScriptedChatModel):
    """A scripted chat model with a ``temperature`` option, as provider clients have; records each call's."""

    temperature: float = 0.0
    _temperatures: list[Any] = PrivateAttr(default_factory=list)

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self._temperatures.append(kwargs.get("temperature", self.temperature))
        return super()._generate(messages, stop, run_manager)

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        self._temperatures.append(kwargs.get("temperature", self.temperature))
        return await super()._agenerate(messages, stop, run_manager)


ANSWERS = ["1: supported 90\n2: supported 80", "1: unknown 30\n2: supported 100", "1: supported 60",
           RuntimeError("503 from the provider"), "1: supported 100\n2: supported 100"]


@pytest.mark.parametrize("use_async", [False, True])
async def test_without_log_probabilities_sampled_answers_are_averaged(use_async: bool) -> None:
    chat = SamplingChatModel(responses=ANSWERS)
    judge = LLMJudge(chat, retries=0)
    claims = ["Curie born in Warsaw", "Curie won prizes"]
    scores = await judge.acheck([CONTEXT] * 2, claims) if use_async else judge.check([CONTEXT] * 2, claims)
    assert sorted(chat._temperatures) == [0.0, 1.0, 1.0, 1.0, 1.0]  # the first at the model's own, 4 more sampled
    # claim 1: 0.9, 0.3, 0.6, 1.0 (the failed answer left out); claim 2: 0.8, 1.0, 1.0 (one answer skipped it)
    assert [s.p_unsupported for s in scores] == pytest.approx([1 - 0.7, 1 - 2.8 / 3])
    assert all(s.error is None for s in scores)


def test_one_answer_when_sampling_is_off_or_the_answer_judged_nothing() -> None:
    off = SamplingChatModel(responses=["1: supported 90"])
    assert LLMJudge(off, samples=1).check([CONTEXT], ["a"])[0].p_unsupported == pytest.approx(0.1)
    assert off._temperatures == [0.0]
    blank = SamplingChatModel(responses=["I cannot help with that."])
    score = LLMJudge(blank, retries=0).check([CONTEXT], ["a"])[0]
    assert score.error is not None and blank._temperatures == [0.0]  # no sampled answers after an unusable one
    with pytest.raises(InputError):
        LLMJudge(off, samples=0)


class OpenAIStyleWithTemperature(OpenAIStyleChatModel):
    temperature: float = 0.0


@pytest.mark.parametrize(("serves", "calls"), [(True, 1), (False, 5)])
def test_log_probabilities_make_sampling_needless(serves: bool, calls: int) -> None:
    chat = OpenAIStyleWithTemperature(answer="1: supported 80\n2: unknown 30", alternatives=ALTS,
                                      serves_logprobs=serves)
    LLMJudge(chat).check([CONTEXT] * 2, ["Curie born in Warsaw", "Curie born in Paris"])
    assert len(chat._options) == calls
