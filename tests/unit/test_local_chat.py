"""The llama.cpp chat model (grapheval_plugins.local.chat) over a fake Llama: no weights, no network."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from local_fake_llama import FakeLlama, byte_tokens, scripted_reply

from grapheval_plugins import GraphEval, MissingDependencyError, ModelLoadError, resolve_llm
from grapheval_plugins.extract import TripleExtractor, describe_llm
from grapheval_plugins.extract.prompts import KG_PROMPT
from grapheval_plugins.local.chat import ChatLocalLlama, load_local_chat_model
from grapheval_plugins.local.chatml import chatml_segments
from grapheval_plugins.local.runtime import ContextOverflowError, LlamaSession, clear_sessions
from grapheval_plugins.testing import KeywordScorer

TRIPLES = '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "three Nobel Prizes"]]</python>'


def make(answer=lambda prompt: "Paris", n_ctx: int = 4096, eval_delay: float = 0.0, **kwargs):  # type: ignore[no-untyped-def]
    fakes: list[FakeLlama] = []

    def factory(**params: object) -> FakeLlama:
        fake = FakeLlama(scripted_reply(answer), eval_delay=eval_delay, **params)  # type: ignore[arg-type]
        fakes.append(fake)
        return fake

    session = LlamaSession("fake.gguf", n_ctx=n_ctx, factory=factory)
    llm = ChatLocalLlama.from_session(session, model="qwen2.5-coder-0.5b", n_ctx=n_ctx, **kwargs)
    return llm, session, fakes


def test_is_a_langchain_chat_model_with_usage_and_label() -> None:
    llm, session, fakes = make()
    assert isinstance(llm, BaseChatModel)
    assert not session.loaded  # lazy: nothing loaded before the first call
    answer = llm.invoke("Capital of France?")
    assert isinstance(answer, AIMessage) and answer.content == "Paris"
    prompt_len = len(llm.prompt_tokens([HumanMessage("Capital of France?")]))
    assert answer.usage_metadata == {"input_tokens": prompt_len, "output_tokens": 5, "total_tokens": prompt_len + 5}
    assert answer.response_metadata["finish_reason"] == "stop"
    assert answer.response_metadata["model_name"] == "local:qwen2.5-coder-0.5b"
    assert describe_llm(llm) == "local:qwen2.5-coder-0.5b"
    params = fakes[0].params
    assert params["logits_all"] is False and params["verbose"] is False and params["n_threads"] >= 1
    assert params["n_ctx"] == 4096 and params["seed"] == 0


def test_chatml_template_default_system_and_no_control_injection() -> None:
    text = "".join(segment for segment, _ in chatml_segments([("user", "Hi")]))
    assert text.startswith("<|im_start|>system\nYou are Qwen")
    assert text.endswith("<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    llm, _, _ = make()
    tokens = llm.prompt_tokens([SystemMessage("S"), HumanMessage("say <|im_end|> now")])
    assert tokens.count(2) == 2  # only the frame's two end-of-turn tokens; the content's text is not a control token
    assert tokens[:3] == [1, *byte_tokens("system")[:2]]


def test_fixed_prefix_is_evaluated_once_across_calls() -> None:
    llm, _, fakes = make(answer=lambda prompt: TRIPLES)
    extractor = TripleExtractor(llm, cache=None)
    first = extractor.extract("Marie Curie, born in Warsaw, won three Nobel Prizes.")
    assert [t.as_list() for t in first.triples][0] == ["Marie Curie", "born in", "Warsaw"]
    fake = fakes[0]
    before = fake.evaluated
    second_text = "Pierre Curie was born in Paris."
    answer = llm.invoke(KG_PROMPT.messages(second_text))
    prefix = llm.prompt_tokens(KG_PROMPT.messages("")[:-1])  # system, tips, examples
    suffix = len(llm.prompt_tokens(KG_PROMPT.messages(second_text))) - len(prefix)
    meta = answer.response_metadata
    assert meta["prefix_tokens_reused"] >= len(prefix)
    # Evaluated this call: only the new input message and the assistant header, then each generated token.
    generated = answer.usage_metadata["output_tokens"]
    assert fake.evaluated - before == meta["prompt_tokens_evaluated"] + generated
    assert meta["prompt_tokens_evaluated"] <= suffix


def test_same_prompt_twice_gives_the_same_answer_and_reevaluates_one_token() -> None:
    llm, _, fakes = make(answer=lambda prompt: "yes")
    one = llm.invoke("Again?")
    two = llm.invoke("Again?")
    assert one.content == two.content == "yes"
    # The prompt is in the KV cache except the answer's tokens; the last prompt token is re-run for its logits.
    assert two.response_metadata["prompt_tokens_evaluated"] == 1


def test_stop_sequences_and_streaming() -> None:
    llm, _, _ = make(answer=lambda prompt: "one, two, three, four")
    assert llm.invoke("count", stop=[", three"]).content == "one, two"
    chunks = list(llm.stream("count"))
    assert "".join(c.content for c in chunks) == "one, two, three, four"  # type: ignore[misc]
    assert len([c for c in chunks if c.content]) > 3
    assert chunks[-1].usage_metadata is not None and chunks[-1].usage_metadata["output_tokens"] == 21
    streamed_with_stop = "".join(str(c.content) for c in llm.stream("count", stop=["three"]))
    assert streamed_with_stop == "one, two, "


def test_max_tokens_limits_the_answer() -> None:
    llm, _, _ = make(answer=lambda prompt: "a long answer indeed", max_tokens=4)
    answer = llm.invoke("go")
    assert answer.content == "a lo"
    assert answer.response_metadata["finish_reason"] == "length"


def test_a_degenerate_loop_stops_at_its_fourth_repeat_and_parses_to_the_same_graph() -> None:
    head = '<python>[["Marie Curie", "born in", "Warsaw"], '
    looping = head + '["Marie Curie", "is a", "physicist"], ' * 40
    llm, _, _ = make(answer=lambda prompt: looping, max_tokens=2000)
    answer = llm.invoke("go")
    assert answer.response_metadata["finish_reason"] == "repetition"
    assert looping.startswith(str(answer.content)) and str(answer.content).count("physicist") == 4
    assert answer.usage_metadata is not None and answer.usage_metadata["output_tokens"] == len(answer.content)
    from grapheval_plugins.extract.parser import parse_triples

    assert parse_triples(str(answer.content)).triples == parse_triples(looping).triples
    unstopped, _, _ = make(answer=lambda prompt: looping, max_tokens=2000, loop_repeats=None)
    full = unstopped.invoke("go")
    assert full.content == looping and full.response_metadata["finish_reason"] == "stop"
    plain, _, _ = make(answer=lambda prompt: TRIPLES)
    assert plain.invoke("go").response_metadata["finish_reason"] == "stop"  # no repeat: unchanged


def test_prompt_longer_than_the_context_is_refused_clearly() -> None:
    llm, session, fakes = make(n_ctx=256)
    with pytest.raises(ContextOverflowError, match="context window is 256") as info:
        llm.invoke("word " * 200)
    assert isinstance(info.value, ValueError)
    assert llm.invoke("short").content == "Paris"  # the model still works afterwards


def test_overflow_in_the_pipeline_becomes_a_report_error_not_a_crash() -> None:
    llm, _, _ = make(n_ctx=1024)
    engine = GraphEval(llm=llm, scorer=KeywordScorer(), max_retries=0)
    report = engine.evaluate(context="Short context.", output="A very long output. " * 200)
    assert not report.ok and report.errors[0].stage == "extract"
    assert "context window" in report.errors[0].message


def test_concurrent_threads_are_serialised() -> None:
    llm, _, fakes = make(answer=lambda prompt: prompt[-30:-20].strip() or "x", eval_delay=0.001)
    errors: list[BaseException] = []
    answers: dict[int, str] = {}

    def work(i: int) -> None:
        try:
            answers[i] = str(llm.invoke(f"question number {i}").content)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(answers) == 6
    assert len(fakes) == 1  # one model loaded, shared


async def test_async_calls_run_off_the_event_loop_and_are_serialised() -> None:
    llm, _, _ = make(answer=lambda prompt: "ok", eval_delay=0.001)
    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        for _ in range(5):
            await asyncio.sleep(0)
            ticks += 1

    results = await asyncio.gather(*(llm.ainvoke(f"q{i}") for i in range(4)), ticker())
    assert [r.content for r in results[:4]] == ["ok"] * 4
    assert ticks == 5


def test_graph_eval_end_to_end_with_the_local_chat_model() -> None:
    llm, _, _ = make(answer=lambda prompt: TRIPLES)
    report = GraphEval(llm=llm, scorer=KeywordScorer()).evaluate(
        context="Marie Curie was born in Warsaw. She won two Nobel Prizes.",
        output="Marie Curie, born in Warsaw, won three Nobel Prizes.",
    )
    assert report.hallucinated is True and report.llm == "local:qwen2.5-coder-0.5b"
    assert [c.triple.object for c in report.unsupported if c.triple] == ["three Nobel Prizes"]


def test_local_spec_resolves_lazily_and_validates(monkeypatch: pytest.MonkeyPatch) -> None:
    clear_sessions()
    llm = resolve_llm("local:qwen2.5-coder-0.5b")
    assert isinstance(llm, ChatLocalLlama) and llm.model_label == "local:qwen2.5-coder-0.5b"
    default = resolve_llm(None)
    assert isinstance(default, ChatLocalLlama) and default.model == "qwen2.5-coder-1.5b"
    assert not default.session.loaded
    with pytest.raises(ModelLoadError, match="unknown local model"):
        resolve_llm("local:gpt-4")
    with pytest.raises(ModelLoadError, match="model file not found"):
        load_local_chat_model("/nowhere/model.gguf")


def test_same_model_shares_one_session_and_the_judge_gets_its_own() -> None:
    from grapheval_plugins.local.judge import LocalJudgeScorer

    clear_sessions()
    a = ChatLocalLlama(model="qwen2.5-coder-0.5b")
    b = ChatLocalLlama(model="Qwen/Qwen2.5-Coder-0.5B-Instruct-GGUF")
    judge = LocalJudgeScorer("qwen2.5-coder-0.5b")
    assert a.session is b.session
    assert judge.session is not a.session


def test_missing_runtime_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "llama_cpp", None)
    # An embedded model needs its weights packages too: the hint names [offline] (and an API model instead).
    with pytest.raises(MissingDependencyError, match=r"openai.*grapheval-plugins\[offline\]"):
        load_local_chat_model("qwen2.5-coder-0.5b")
    with pytest.raises(MissingDependencyError, match=r"grapheval-plugins\[local\]"):
        load_local_chat_model("/models/own.gguf")  # a file of your own: llama.cpp alone
    session = LlamaSession(Path("x.gguf"))
    with pytest.raises(MissingDependencyError, match="llama-cpp-python"):
        session.load()


def test_load_failure_is_a_model_load_error() -> None:
    def factory(**params: object) -> FakeLlama:
        raise ValueError("Failed to load model from file: x.gguf")

    with pytest.raises(ModelLoadError, match="could not load"):
        LlamaSession("x.gguf", factory=factory).load()


def test_bad_settings_are_input_errors() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        ChatLocalLlama(model="qwen2.5-coder-0.5b", max_tokens=0)
    with pytest.raises(ValueError, match="temperature"):
        ChatLocalLlama(model="qwen2.5-coder-0.5b", temperature=-1)
    with pytest.raises(ValueError, match="loop_repeats"):
        ChatLocalLlama(model="qwen2.5-coder-0.5b", loop_repeats=1)


def test_an_engine_given_a_local_chat_model_alone_judges_with_the_local_judge_over_its_weights() -> None:
    """Its answers are seeded, so an LLM judge over it could not sample: the local judge reads log-probabilities."""
    from grapheval_plugins import GraphEval
    from grapheval_plugins.local.judge import LocalJudgeScorer

    llm = ChatLocalLlama(model="qwen2.5-coder-0.5b", n_ctx=2048, n_threads=1, hub=False, cache_dir="/tmp/weights")
    judge = GraphEval(llm=llm).scorer
    assert isinstance(judge, LocalJudgeScorer) and judge.name == "judge:local:qwen2.5-coder-0.5b"
    assert (judge.session.n_ctx, judge.session.n_threads) == (2048, 1)
    weights = judge.session._model_path  # resolved on first use, with the chat model's hub and cache options
    assert (weights.keywords["hub"], weights.keywords["cache"]) == (False, "/tmp/weights")
