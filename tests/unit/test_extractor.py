"""Stage 1: prompt A is sent once per output, never with the context; retries, fallback, cache."""

from __future__ import annotations

import pytest

from grapheval_plugins import KG_PROMPT, KG_PROMPT_PAPER, GraphEval, SQLiteKGCache
from grapheval_plugins.exceptions import ExtractionError
from grapheval_plugins.extract import TripleExtractor
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel

CONTEXT = "SECRET-CONTEXT-MARKER: The Louvre is in Paris and opened in 1793."
OUTPUT = "The Louvre, in Paris, opened in 1793."
ANSWER = '<python>[["The Louvre", "located in", "Paris"], ["The Louvre", "opened in", "1793"]]</python>'


def test_prompt_a_is_sent_exactly_once_per_output_and_never_contains_the_context() -> None:
    llm = ScriptedChatModel(responses=[ANSWER])
    report = GraphEval(llm=llm, scorer=KeywordScorer()).evaluate(CONTEXT, OUTPUT)
    assert len(llm.calls) == 1
    sent = "\n".join(str(m.content) for m in llm.calls[0])
    assert OUTPUT in sent
    assert "SECRET-CONTEXT-MARKER" not in sent
    assert "Step 1 – Entity detection" in sent and "## Example 4." in sent
    assert [t.as_list() for t in report.triples] == [["The Louvre", "located in", "Paris"], ["The Louvre", "opened in", "1793"]]


def test_message_order_of_the_two_prompt_versions() -> None:
    default = KG_PROMPT.messages(OUTPUT)
    paper = KG_PROMPT_PAPER.messages(OUTPUT)
    assert OUTPUT in default[-1].content  # input last: the fixed prefix is cacheable
    assert OUTPUT in paper[1].content and "## Example 1." in paper[-1].content
    assert KG_PROMPT.version != KG_PROMPT_PAPER.version
    # The fixed prefix does not depend on the output.
    assert [m.content for m in KG_PROMPT.messages("other")[:-1]] == [m.content for m in default[:-1]]


def test_unparseable_answers_are_retried_then_fall_back_to_the_whole_output() -> None:
    llm = ScriptedChatModel(responses=["I don't know", "still nothing", "nope"])
    extraction = TripleExtractor(llm, max_retries=2).extract(OUTPUT)
    assert len(llm.calls) == 3
    assert extraction.fallback and extraction.triples == [] and extraction.attempts == 3
    assert "could not be read" in str(llm.calls[1][-1].content)  # the retry says why
    report = GraphEval(llm=ScriptedChatModel(responses=["garbage"]), scorer=KeywordScorer(), max_retries=0).evaluate(
        CONTEXT, OUTPUT
    )
    assert report.extraction.fallback
    assert [c.claim for c in report.claims] == [OUTPUT]  # checked as one claim, and said so
    assert report.ok and report.hallucinated is False


def test_a_retry_recovers_after_one_bad_answer() -> None:
    llm = ScriptedChatModel(responses=["<python>[[oops", ANSWER])
    extraction = TripleExtractor(llm, max_retries=1).extract(OUTPUT)
    assert extraction.attempts == 2 and len(extraction.triples) == 2 and not extraction.fallback


def test_a_chat_model_that_always_raises_gives_a_per_row_error() -> None:
    llm = ScriptedChatModel(responses=[RuntimeError("throttled")])
    with pytest.raises(ExtractionError, match="throttled"):
        TripleExtractor(llm, max_retries=1).extract(OUTPUT)
    assert len(llm.calls) == 2
    reports = GraphEval(llm=ScriptedChatModel(responses=[RuntimeError("down")]), scorer=KeywordScorer(),
                        max_retries=0).evaluate_many([(CONTEXT, OUTPUT), (CONTEXT, "Another output here.")])
    assert [r.ok for r in reports] == [False, False]
    assert reports[0].errors[0].stage == "extract" and "down" in reports[0].errors[0].message


def test_the_cache_makes_a_rerun_cost_no_llm_call(tmp_path) -> None:
    path = tmp_path / "kg.sqlite"
    llm = ScriptedChatModel(responses=[ANSWER])
    first = GraphEval(llm=llm, scorer=KeywordScorer(), cache=path).evaluate(CONTEXT, OUTPUT)
    again = GraphEval(llm=llm, scorer=KeywordScorer(), cache=path).evaluate(CONTEXT, OUTPUT)
    assert len(llm.calls) == 1
    assert again.extraction.cached and again.extraction.attempts == 0
    assert again.triples == first.triples
    assert len(SQLiteKGCache(path)) == 1
    # A different prompt version is a different key.
    GraphEval(llm=llm, scorer=KeywordScorer(), cache=path, prompt=KG_PROMPT_PAPER).evaluate(CONTEXT, OUTPUT)
    assert len(llm.calls) == 2


def test_an_unparseable_answer_is_cached_so_a_rerun_makes_no_call_and_falls_back_again(tmp_path) -> None:
    path = tmp_path / "kg.sqlite"
    llm = ScriptedChatModel(responses=['<python>[["The Louvre"], ["opened in 1793"]]</python>'])
    first = GraphEval(llm=llm, scorer=KeywordScorer(), cache=path, max_retries=1).evaluate(CONTEXT, OUTPUT)
    again = GraphEval(llm=llm, scorer=KeywordScorer(), cache=path, max_retries=1).evaluate(CONTEXT, OUTPUT)
    assert len(llm.calls) == 2  # the first run's two attempts; none on the re-run
    assert first.extraction.fallback and again.extraction.fallback and again.extraction.cached
    assert [c.claim for c in again.claims] == [OUTPUT] and again.score == first.score
    assert again.extraction.raw_text == first.extraction.raw_text


def test_a_fallback_after_a_raising_call_is_not_cached(tmp_path) -> None:
    path = tmp_path / "kg.sqlite"
    llm = ScriptedChatModel(responses=[RuntimeError("throttled"), "no graph here"])
    report = GraphEval(llm=llm, scorer=KeywordScorer(), cache=path, max_retries=1).evaluate(CONTEXT, OUTPUT)
    assert report.extraction.fallback and len(llm.calls) == 2
    assert len(SQLiteKGCache(path)) == 0


def test_in_memory_cache_is_the_default_and_can_be_disabled() -> None:
    llm = ScriptedChatModel(responses=[ANSWER])
    engine = GraphEval(llm=llm, scorer=KeywordScorer())
    engine.evaluate(CONTEXT, OUTPUT)
    engine.evaluate(CONTEXT, OUTPUT)
    assert len(llm.calls) == 1
    no_cache = GraphEval(llm=llm, scorer=KeywordScorer(), cache=False)
    no_cache.evaluate(CONTEXT, OUTPUT)
    no_cache.evaluate(CONTEXT, OUTPUT)
    assert len(llm.calls) == 3
