"""The knowledge-graph cache key: model identity + a hash of the rendered prompt messages + the parser version."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from grapheval_plugins import GraphEval
from grapheval_plugins.cache import MemoryKGCache, SQLiteKGCache
from grapheval_plugins.extract import parser as parser_module
from grapheval_plugins.extract.extractor import TripleExtractor
from grapheval_plugins.extract.prompts import KG_PROMPT, KG_PROMPT_PAPER, FewShotExample
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel

TEXT = "Paris is the capital of France."
ANSWER = '<python>[["Paris", "capital of", "France"]]</python>'
NEW_EXAMPLES = (FewShotExample("Rome is in Italy.", (("Rome", "located in", "Italy"),)),)


def _llm(label: str = "scripted") -> ScriptedChatModel:
    return ScriptedChatModel(responses=[ANSWER], model_label=label)


@pytest.mark.parametrize("cache_factory", [lambda tmp: MemoryKGCache(), lambda tmp: SQLiteKGCache(tmp / "kg.sqlite")])
def test_replacing_the_examples_misses_the_cache(tmp_path: Path, cache_factory) -> None:  # type: ignore[no-untyped-def]
    cache = cache_factory(tmp_path)
    llm = _llm()
    first = TripleExtractor(llm, prompt=KG_PROMPT, cache=cache).extract(TEXT)
    assert not first.cached and len(llm.calls) == 1
    again = TripleExtractor(llm, prompt=KG_PROMPT, cache=cache).extract(TEXT)
    assert again.cached and len(llm.calls) == 1

    # The module docstring's own recipe; it keeps version="kg-a/1-examples-first".
    edited = dataclasses.replace(KG_PROMPT, examples=NEW_EXAMPLES)
    assert edited.version == KG_PROMPT.version
    fresh = TripleExtractor(llm, prompt=edited, cache=cache).extract(TEXT)
    assert not fresh.cached and len(llm.calls) == 2
    assert "Rome is in Italy." in llm.calls[-1][2].content  # the call was made with the new examples


def test_the_default_in_memory_cache_of_graph_eval_misses_after_a_prompt_change() -> None:
    llm = _llm()
    engine = GraphEval(llm=llm, scorer=KeywordScorer())
    engine.evaluate(TEXT, TEXT)
    engine.evaluate(TEXT, TEXT)
    assert len(llm.calls) == 1
    other = GraphEval(llm=llm, scorer=KeywordScorer(), prompt=dataclasses.replace(KG_PROMPT, tips="Be brief."),
                      cache=engine.cache)
    report = other.evaluate(TEXT, TEXT)
    assert report.extraction is not None and not report.extraction.cached and len(llm.calls) == 2


def test_key_parts_model_identity_prompt_text_and_parser_version(monkeypatch: pytest.MonkeyPatch) -> None:
    assert KG_PROMPT.cache_id != KG_PROMPT_PAPER.cache_id  # same wording, other order
    renamed = dataclasses.replace(KG_PROMPT, version="my-label")
    assert renamed.fingerprint == KG_PROMPT.fingerprint and renamed.cache_id.startswith("my-label#")
    assert dataclasses.replace(KG_PROMPT, retry_instruction="Try again: {reason}").fingerprint != KG_PROMPT.fingerprint
    before = KG_PROMPT.fingerprint
    monkeypatch.setattr("grapheval_plugins.extract.prompts.PARSER_VERSION", parser_module.PARSER_VERSION + "-next")
    assert KG_PROMPT.fingerprint != before

    cache = MemoryKGCache()
    TripleExtractor(_llm("model-a"), cache=cache).extract(TEXT)
    other_model = _llm("model-b")
    assert not TripleExtractor(other_model, cache=cache).extract(TEXT).cached and len(other_model.calls) == 1


def test_the_sqlite_cache_stores_the_readable_label_with_the_hash(tmp_path: Path) -> None:
    import sqlite3

    path = tmp_path / "kg.sqlite"
    TripleExtractor(_llm(), cache=SQLiteKGCache(path)).extract(TEXT)
    with sqlite3.connect(path) as conn:
        (prompt,) = conn.execute("SELECT prompt FROM kg").fetchone()
    assert prompt == KG_PROMPT.cache_id and prompt.startswith("kg-a/1-examples-first#")
