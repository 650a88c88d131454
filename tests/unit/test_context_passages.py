"""Contexts as passages: Documents, mappings, strings and lists of them; each passage chunked on its own; chunking
failures are the row's error, not the batch's."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from grapheval_plugins import GraphEval
from grapheval_plugins.check.base import Scorer
from grapheval_plugins.exceptions import InputError
from grapheval_plugins.inputs import Sample, normalize_context, normalize_passages, to_sample
from grapheval_plugins.testing import FunctionScorer, KeywordScorer, ScriptedChatModel

TRIPLE = '<python>[["Marie Curie", "born in", "Warsaw"]]</python>'
BIO = "Marie Curie was born in Warsaw."
OTHER = "The Eiffel Tower is in Paris."


class _WordRetriever(BaseRetriever):
    """A tiny retriever: the documents sharing a word with the query, in corpus order."""

    docs: list[Document]

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list[Document]:
        words = set(query.lower().split())
        return [d for d in self.docs if words & set(d.page_content.lower().replace(".", "").split())]


def _engine(scorer: Scorer | None = None) -> GraphEval:
    return GraphEval(llm=ScriptedChatModel(responses=[TRIPLE]), scorer=scorer or KeywordScorer(), cache=False)


# --------------------------------------------------------------------------- accepted shapes
def test_a_single_document_is_one_passage() -> None:
    # Before: a pydantic Document iterated as (field, value) pairs -> "expected a string or a Document, got tuple".
    report = _engine().evaluate(Document(page_content=BIO), "Marie Curie was born in Warsaw.")
    assert report.ok and report.hallucinated is False
    assert normalize_passages(Document(page_content=BIO, metadata={"source": "bio"})) == (BIO,)


def test_a_mapping_with_page_content_is_its_text_not_its_key() -> None:
    # Before: {"page_content": ...} iterated as its keys and became the text "page_content".
    report = _engine().evaluate({"page_content": BIO}, "Marie Curie was born in Warsaw.")
    assert report.ok and report.hallucinated is False
    assert report.claims[0].evidence == BIO
    assert normalize_passages({"page_content": BIO, "metadata": {}}) == (BIO,)


def test_lists_of_documents_mappings_and_strings_keep_their_passages() -> None:
    context = [Document(page_content=OTHER), {"page_content": "  "}, BIO, {"page_content": "Third."}]
    assert normalize_passages(context) == (OTHER, BIO, "Third.")
    assert normalize_context(context) == f"{OTHER}\n\n{BIO}\n\nThird."
    sample = to_sample({"context": context, "output": "x"}, 0)
    assert sample.passages == (OTHER, BIO, "Third.") and sample.context == normalize_context(context)


def test_a_retrievers_output_is_scored_passage_by_passage() -> None:
    retriever = _WordRetriever(docs=[Document(page_content=OTHER), Document(page_content=BIO),
                                     Document(page_content="Warsaw is the capital of Poland.")])
    docs = retriever.invoke("Warsaw Paris")
    assert [type(d) for d in docs] == [Document] * 3
    report = _engine().evaluate(docs, "Marie Curie was born in Warsaw.")
    assert report.ok and report.hallucinated is False
    claim = report.claims[0]
    assert claim.evidence == BIO and claim.evidence_passage == 1


def test_bm25_retriever_output_is_accepted() -> None:
    community = pytest.importorskip("langchain_community.retrievers")
    pytest.importorskip("rank_bm25")
    retriever = community.BM25Retriever.from_texts([OTHER, BIO, "Poland borders Germany."], k=2)
    docs = retriever.invoke("Where was Marie Curie born?")
    assert all(isinstance(d, Document) for d in docs)
    report = _engine().evaluate(docs, "Marie Curie was born in Warsaw.")
    assert report.ok and report.claims[0].evidence == BIO


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (42, "got int"),
        ({"text": BIO}, "needs a 'page_content' string"),
        ({BIO}, "got set"),
        ([BIO, 3.5], "context[1]: expected a string, a Document"),
        ([[BIO]], "context[0]: expected a string, a Document"),
        (b"bytes", "got bytes"),
        ([], "is empty"),
        (Document(page_content="   "), "is empty"),
        (None, "missing"),
    ],
)
def test_other_types_are_a_clear_input_error(value: Any, message: str) -> None:
    with pytest.raises(InputError, match="context") as info:
        normalize_passages(value)
    assert message in str(info.value)
    with pytest.raises(InputError):
        _engine().evaluate(value, "Marie Curie was born in Warsaw.")


# --------------------------------------------------------------------------- chunking per passage
def test_chunks_never_straddle_two_passages() -> None:
    # Two retrieved documents, each short enough for one chunk: joined, they used to be re-chunked across the seam.
    first = " ".join(["alpha"] * 20) + " Marie Curie was born"
    second = "in Warsaw. " + " ".join(["omega"] * 20)
    scorer = FunctionScorer(lambda p, h: 1.0 if "Warsaw" in p else 0.0, max_premise_tokens=40)
    scores = scorer.check([(first, second)], ["Marie Curie born in Warsaw"])
    chunks = [p for p, _ in scorer.batches[0]]
    assert all(c in first or c in second for c in chunks)
    assert scores[0].passage_index == 1 and scores[0].chunk in second


def test_a_string_context_is_one_passage_as_before() -> None:
    scorer = KeywordScorer()
    score = scorer.check(["Paris is in France."], ["Paris is in France"])[0]
    assert (score.passage_index, score.chunk_index, score.p_unsupported) == (0, 0, 0.0)
    assert Sample("A.", "b").passages == ("A.",)


# --------------------------------------------------------------------------- the row's error boundary
class _PickyScorer(KeywordScorer):
    """Fails to chunk any context that mentions "poison" (as a tokenizer that cannot load, or a splitter raising)."""

    def chunks(self, context: str) -> list[str]:
        if "poison" in context:
            raise ValueError("max_tokens must be at least 8")
        return super().chunks(context)


def test_a_chunking_failure_is_that_rows_error_and_the_batch_goes_on() -> None:
    engine = GraphEval(llm=ScriptedChatModel(responses=[TRIPLE]), scorer=_PickyScorer(), cache=False)
    rows = [
        {"id": "a", "context": BIO, "output": "Marie Curie was born in Warsaw."},
        {"id": "b", "context": "poison " + BIO, "output": "Marie Curie was born in Warsaw."},
        {"id": "c", "context": [OTHER, BIO], "output": "Marie Curie was born in Warsaw."},
    ]
    reports = engine.evaluate_many(rows)
    assert [r.id for r in reports] == ["a", "b", "c"]
    assert reports[0].ok and reports[0].hallucinated is False
    assert reports[2].ok and reports[2].claims[0].evidence_passage == 1
    bad = reports[1]
    assert bad.hallucinated is None and bad.errors[0].stage == "check"
    assert "could not split passage 0" in bad.errors[0].message and "max_tokens" in bad.errors[0].message


def test_a_chunking_failure_in_evaluate_is_reported_not_raised() -> None:
    report = _engine(_PickyScorer()).evaluate("poison " + BIO, "Marie Curie was born in Warsaw.")
    assert report.hallucinated is None and report.errors[0].type == "ScoringError"
