"""The local LLM judge (grapheval_plugins.local.judge) over a fake Llama: label logits, prefix reuse, chunking."""

from __future__ import annotations

import dataclasses
import math
import sys

import pytest
from local_fake_llama import FakeLlama, label_logits

from grapheval_plugins import GraphEval, MissingDependencyError, ModelLoadError, ScoringError, resolve_scorer
from grapheval_plugins.local.judge import (
    JUDGE_CALIBRATIONS,
    JUDGE_PROMPT,
    JUDGE_PROMPTS,
    QUESTION_FIRST_PROMPT,
    JudgeCalibration,
    LocalJudgeScorer,
    load_judge_scorer,
)
from grapheval_plugins.local.runtime import ContextOverflowError, LlamaSession
from grapheval_plugins.testing import ScriptedChatModel


def word_judge(context: str, claim: str) -> tuple[float, float, float]:
    """Supported iff every word of the claim is in the context; 'not' in the claim reads as contradicted."""
    if "not" in claim.split():
        return (0.0, 3.0, 0.0)
    return (3.0, 0.0, 0.0) if all(w in context.lower() for w in claim.lower().split()) else (0.0, 0.0, 2.0)


def make(score=word_judge, n_ctx: int = 4096, model: str = "qwen2.5-coder-0.5b", **kwargs):  # type: ignore[no-untyped-def]
    fakes: list[FakeLlama] = []

    def factory(**params: object) -> FakeLlama:
        fake = FakeLlama(label_logits(score), **params)  # type: ignore[arg-type]
        fakes.append(fake)
        return fake

    session = LlamaSession("fake.gguf", n_ctx=n_ctx, factory=factory)
    return LocalJudgeScorer(model, session=session, **kwargs), fakes


def softmax(*xs: float) -> list[float]:
    e = [math.exp(x) for x in xs]
    return [v / sum(e) for v in e]


def test_probabilities_are_the_softmax_over_the_three_labels() -> None:
    judge, _ = make()
    ctx = "marie curie was born in warsaw"
    readings = judge.label_logprobs(ctx, ["born in warsaw", "born in paris", "was not born"], judge.prompt.labels)
    probs = [tuple(math.exp(r.logprobs[label]) for label in judge.prompt.labels) for r in readings]
    assert probs[0] == pytest.approx(tuple(softmax(3, 0, 0)), abs=1e-6)
    assert probs[1] == pytest.approx(tuple(softmax(0, 0, 2)), abs=1e-6)
    assert probs[2] == pytest.approx(tuple(softmax(0, 3, 0)), abs=1e-6)
    scores = judge.check([ctx] * 2, ["born in warsaw", "born in paris"])
    assert scores[0].p_unsupported == pytest.approx(1 - softmax(3, 0, 0)[0], abs=1e-6)
    assert scores[1].p_unsupported > 0.5 > scores[0].p_unsupported
    assert judge.name == "judge:local:qwen2.5-coder-0.5b"


def test_context_is_evaluated_once_for_all_its_claims() -> None:
    judge, fakes = make()
    ctx = "the council voted seven to two to build a library on elm street " * 4
    claims = ["council voted", "library on elm street", "voted nine to zero", "built a stadium", "seven to two"]
    judge.predict_support([(ctx, c) for c in claims])
    fake = fakes[0]
    from grapheval_plugins.local.chatml import tokenize_segments

    prefix_len = len(tokenize_segments(judge.prompt.prefix_segments(ctx), judge._tokenize))
    suffix_lens = [len(tokenize_segments(judge.prompt.claim_segments(c), judge._tokenize)) for c in claims]
    # The context is evaluated alone first (saved whole); every claim then evaluates at most its suffix.
    assert len(fake.eval_calls[0]) == prefix_len
    assert len(fake.eval_calls[1]) == suffix_lens[0]
    assert all(len(call) <= max(suffix_lens) for call in fake.eval_calls[1:])
    assert prefix_len + len(claims) <= fake.evaluated <= prefix_len + sum(suffix_lens)
    assert judge.session.stats.reused_tokens >= prefix_len * (len(claims) - 1)


def test_each_known_model_has_its_wording_and_the_1_5b_asks_the_question_before_the_context() -> None:
    assert JUDGE_PROMPTS["qwen2.5-coder-1.5b"] is QUESTION_FIRST_PROMPT
    assert make(model="qwen2.5-coder-1.5b")[0].prompt is QUESTION_FIRST_PROMPT
    assert make(model="local:qwen2.5-coder-1.5b")[0].prompt is QUESTION_FIRST_PROMPT  # a spec names the model too
    assert make()[0].prompt is JUDGE_PROMPT and make(model="/models/mine.gguf")[0].prompt is JUDGE_PROMPT
    assert make(model="qwen2.5-coder-1.5b", prompt=JUDGE_PROMPT)[0].prompt is JUDGE_PROMPT  # an explicit one wins
    # The same verdicts with either wording, and with the question first each claim adds fewer tokens.
    ctx = "the council voted seven to two to build a library on elm street"
    claims = ["council voted", "voted nine to zero", "was not a library"]
    first, fakes_first = make(model="qwen2.5-coder-1.5b")
    after, fakes_after = make()
    assert [round(p, 6) for p in first.predict_support([(ctx, c) for c in claims])] == [
        round(p, 6) for p in after.predict_support([(ctx, c) for c in claims])]
    assert fakes_first[0].evaluated < fakes_after[0].evaluated
    question = "Is the claim supported by the context?"
    assert all(question not in bytes(t - 10 for t in call if t >= 10).decode() for call in fakes_first[0].eval_calls[1:])
    # the wording is part of the fingerprint: the 1.5B in the general wording is another scorer for the caches
    first_in_general = make(model="qwen2.5-coder-1.5b", prompt=JUDGE_PROMPT)[0]
    assert first.fingerprint() != first_in_general.fingerprint() and first.fingerprint() != after.fingerprint()


def test_pairs_are_grouped_by_context_and_returned_in_order() -> None:
    judge, fakes = make()
    a, b = "alpha beta gamma", "delta epsilon zeta"
    pairs = [(a, "alpha"), (b, "delta"), (a, "zeta"), (b, "epsilon"), (a, "gamma")]
    support = judge.predict_support(pairs)
    assert [s > 0.5 for s in support] == [True, True, False, True, True]
    # Each context is evaluated once (grouping), not once per claim.
    fake = fakes[0]
    texts = [bytes(t - 10 for t in call if t >= 10).decode() for call in fake.eval_calls]
    assert sum("alpha beta gamma" in t for t in texts) == 1
    assert sum("delta epsilon zeta" in t for t in texts) == 1


def test_calibration_is_applied_to_p_supported() -> None:
    raw, _ = make()
    shifted, _ = make(calibration=JudgeCalibration.from_threshold(0.1))
    ctx = "a b c"
    pairs = [(ctx, "a b"), (ctx, "a z")]
    p_raw = raw.predict_support(pairs)
    p_cal = shifted.predict_support(pairs)
    # A raw P(unsupported) of 0.1 reads as 0.5 after calibration: everything is judged less supported.
    assert all(c < r for c, r in zip(p_cal, p_raw))
    assert JudgeCalibration.from_threshold(0.1).apply(0.9) == pytest.approx(0.5)
    assert JUDGE_CALIBRATIONS["qwen2.5-coder-1.5b"].is_identity  # documented: not fitted yet
    with pytest.raises(ValueError, match="p_unsupported"):
        JudgeCalibration.from_threshold(1.0)


def test_long_context_is_chunked_to_fit_the_window_and_the_best_chunk_wins() -> None:
    judge, _ = make(n_ctx=4096, claim_budget_tokens=200)
    filler = "lorem ipsum dolor sit amet. " * 150  # ~4200 byte-tokens: more than one window
    ctx = filler + "the treasure is buried under the old oak tree."
    assert judge.count_tokens(ctx) > judge.max_premise_tokens
    chunks = judge.chunks(ctx)
    assert len(chunks) >= 2 and all(judge.count_tokens(c) <= judge.max_premise_tokens for c in chunks)
    result = judge.check([ctx], ["treasure buried under oak"])[0]
    assert result.p_unsupported < 0.5 and "treasure" in result.chunk


def test_claim_too_long_for_the_window_fails_clearly() -> None:
    judge, _ = make(n_ctx=2048, claim_budget_tokens=64)
    with pytest.raises(ContextOverflowError, match="exceed the judge's window"):
        judge.predict_support([("short context", "x " * 1500)])
    with pytest.raises(ScoringError, match="exceed"):
        judge.check(["short context"], ["x " * 1500])


def test_one_bad_row_does_not_sink_the_batch() -> None:
    judge, _ = make(n_ctx=2048, claim_budget_tokens=64)
    llm = ScriptedChatModel(respond=lambda msgs: '<python>[["a", "b", "c"]]</python>')
    engine = GraphEval(llm=llm, scorer=judge, mode="raw")
    reports = engine.evaluate_many([{"context": "a b c", "output": "a b"}, {"context": "a b c", "output": "y " * 1500}])
    assert reports[0].ok and reports[0].hallucinated is False
    assert not reports[1].ok and reports[1].errors[0].stage == "check"


def test_labels_must_start_with_distinct_tokens() -> None:
    prompt = dataclasses.replace(JUDGE_PROMPT, labels=("supported", "sure", "unknown"))
    judge, _ = make(prompt=prompt)
    with pytest.raises(ModelLoadError, match="share a first token"):
        judge.load()


def test_specs_resolve_to_the_judge() -> None:
    judge = resolve_scorer("judge:local:qwen2.5-coder-0.5b")
    assert isinstance(judge, LocalJudgeScorer) and judge.name == "judge:local:qwen2.5-coder-0.5b"
    assert not judge.session.loaded
    default = resolve_scorer(None)
    assert isinstance(default, LocalJudgeScorer) and default.model_key == "qwen2.5-coder-1.5b"
    assert resolve_scorer("judge").name == "judge:local:qwen2.5-coder-1.5b"
    with pytest.raises(ModelLoadError, match="only local"):
        load_judge_scorer("bedrock:anthropic.claude-v2")
    with pytest.raises(ModelLoadError, match="unknown local model"):
        load_judge_scorer("local:gpt-4")


def test_missing_runtime_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    with pytest.raises(MissingDependencyError, match=r"grapheval-plugins\[offline\]"):  # weights needed too
        load_judge_scorer("local:qwen2.5-coder-1.5b")
    with pytest.raises(MissingDependencyError, match=r"grapheval-plugins\[local\]"):
        load_judge_scorer("local:/models/own.gguf")


def test_bad_claim_budget_is_an_input_error() -> None:
    with pytest.raises(ValueError, match="claim_budget_tokens"):
        LocalJudgeScorer("qwen2.5-coder-0.5b", n_ctx=512, claim_budget_tokens=400)
