"""GraphCorrect's ``evidence`` method: step 1 sees the reason and the deciding passage's closest sentences, one
follow-up fires only when the answer repeats the flagged triple, and the number of calls stays bounded."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from grapheval_plugins import GraphEval, InputError, Report, Triple
from grapheval_plugins.correct import CORRECTION_PROMPTS, GraphCorrect
from grapheval_plugins.correct.strategies import NO_EVIDENCE, failure_reason
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
from grapheval_plugins.text import closest_sentences
from grapheval_plugins.types import ClaimCheck, Extraction

CONTEXT = "Marie Curie was born in Warsaw. She won two Nobel Prizes. She died in 1934."
OUTPUT = "Marie Curie was born in Paris. She won three Nobel Prizes. She died in 1934."
FIXED = "Marie Curie was born in Warsaw. She won two Nobel Prizes. She died in 1934."

BORN_PARIS = ["Marie Curie", "born in", "Paris"]
BORN_WARSAW = ["Marie Curie", "born in", "Warsaw"]
WON_THREE = ["Marie Curie", "won", "three Nobel Prizes"]
WON_TWO = ["Marie Curie", "won", "two Nobel Prizes"]
DIED = ["Marie Curie", "died in", "1934"]
KG = {OUTPUT: [BORN_PARIS, WON_THREE, DIED]}
FIX = {tuple(BORN_PARIS): BORN_WARSAW, tuple(WON_THREE): WON_TWO}


def _tag(name: str, text: str) -> str:
    found = re.search(rf"<{name}>(.*?)</{name}>", text, re.S)
    assert found is not None, f"no <{name}> in {text[:200]!r}"
    return found.group(1)


class Model:
    """A scripted chat model: prompt A from ``KG`` (else one naive triple per sentence), step 1 from ``step1``
    (given the old triple and how many step-1 calls that triple had so far), C by substituting the object,
    D by ``direct``. Every call's messages are kept in ``calls`` with a kind."""

    def __init__(
        self,
        step1: Callable[[list[str], int], str] | None = None,
        direct: Callable[[str], str] | None = None,
    ) -> None:
        self.step1 = step1 or (lambda old, n: json.dumps(FIX[tuple(old)]))
        self.direct = direct
        self.calls: list[tuple[str, list[BaseMessage]]] = []
        self.seen: dict[tuple[str, ...], int] = {}
        self.llm = ScriptedChatModel(respond=self.respond, model_label="evidence-test")

    def of(self, kind: str) -> list[list[BaseMessage]]:
        return [m for k, m in self.calls if k == kind]

    def respond(self, messages: list[BaseMessage]) -> str:
        first = str(messages[0].content) if len(messages) == 1 else str(messages[-1].content)
        text = "\n".join(str(m.content) for m in messages)
        if "<old_triple>" in first:
            self.calls.append(("C", messages))
            old, new = json.loads(_tag("old_triple", first)), json.loads(_tag("new_triple", first))
            return "<context>" + _tag("context", first).replace(old[2], new[2]) + "</context>"
        if "<triple>" in text and "<summary>" not in text:
            self.calls.append(("B", messages))
            old = json.loads(_tag("triple", str(messages[0].content)))
            n = self.seen.get(tuple(old), 0)
            self.seen[tuple(old)] = n + 1
            return self.step1(old, n)
        if "<summary>" in text:
            self.calls.append(("D", messages))
            assert self.direct is not None
            return self.direct(_tag("summary", text))
        self.calls.append(("A", messages))
        source = _tag("input", next(str(m.content) for m in messages if "<input>" in str(m.content)))
        if source in KG:
            return "<python>" + json.dumps(KG[source]) + "</python>"
        triples = []
        for sentence in re.findall(r"[^.]+\.", source):
            words = sentence.strip().rstrip(".").split()
            triples.append([" ".join(words[:2]), words[2], " ".join(words[3:])])
        return "<python>" + json.dumps(triples) + "</python>"


def make(model: Model, **options: Any) -> GraphCorrect:
    return GraphCorrect(GraphEval(llm=model.llm, scorer=KeywordScorer()), rouge=False, **options)


# --------------------------------------------------------------------------- what step 1 is told
def test_step_1_is_given_the_reason_and_the_closest_sentences_of_the_deciding_passage() -> None:
    model = Model()
    result = make(model, method="evidence").correct(CONTEXT, OUTPUT)
    assert result.status == "corrected" and result.corrected == FIXED
    prompts = {json.loads(_tag("triple", str(m[0].content)))[2]: str(m[0].content) for m in model.of("B")}
    won = prompts["three Nobel Prizes"]
    flagged = {c.triple.object: c for c in result.detection.unsupported if c.triple is not None}
    p = flagged["three Nobel Prizes"].p_unsupported
    assert f"P(unsupported) = {p:.2f}, above the threshold 0.50" in won
    # the sentences that share words with the triple, in passage order (not "She died in 1934."); the context is
    # still there in full
    assert _tag("evidence", won) == "Marie Curie was born in Warsaw. She won two Nobel Prizes."
    assert _tag("context", won) == CONTEXT
    # the context first (shared by the triples of one output), the evidence last, next to the instruction
    assert won.startswith("<context>") and won.index("<triple>") < won.index("<evidence>")


def test_the_scorers_evidence_chunk_is_used_when_the_report_has_one() -> None:
    """With a chunk recorded on the claim, the evidence sentences come from that chunk, not from the rest."""
    triple = Triple.from_list(WON_THREE)
    chunk = "Records show Marie Curie won two Nobel Prizes, in physics and chemistry."
    claim = ClaimCheck(claim=triple.sentence(), triple=triple, p_unsupported=0.9, unsupported=True,
                       evidence=chunk, evidence_index=1, evidence_passage=0)
    ok = ClaimCheck(claim="Marie Curie died in 1934", triple=Triple.from_list(DIED), p_unsupported=0.1,
                    unsupported=False)
    out = "Marie Curie won three Nobel Prizes. She died in 1934."
    report = Report(output=out, mode="graph", threshold=0.5, hallucinated=True, score=0.1, claims=[claim, ok],
                    extraction=Extraction(triples=[triple, Triple.from_list(DIED)], attempts=1))
    model = Model()
    make(model, method="evidence").correct(CONTEXT + " " + chunk, out, report=report)
    (b,) = model.of("B")
    assert _tag("evidence", str(b[0].content)) == chunk
    assert "P(unsupported) = 0.90" in str(b[0].content)


def test_no_overlapping_sentence_says_so_instead_of_an_empty_tag() -> None:
    model = Model(step1=lambda old, n: json.dumps(["Zed", "likes", "tea"]))
    ctx = "Zed likes tea."
    report_out = "Alpha beta gamma delta."
    make(model, method="evidence").correct(ctx, report_out)
    assert model.of("B"), "step 1 ran"
    assert all(_tag("evidence", str(m[0].content)) == NO_EVIDENCE for m in model.of("B"))


# --------------------------------------------------------------------------- the follow-up
def test_the_follow_up_fires_when_the_answer_repeats_the_triple_and_carries_the_first_answer() -> None:
    def step1(old: list[str], n: int) -> str:
        if old == WON_THREE and n == 0:
            return json.dumps(old)  # echoes the flagged triple the first time
        return json.dumps(FIX[tuple(old)])

    model = Model(step1=step1)
    result = make(model, method="evidence").correct(CONTEXT, OUTPUT)
    assert result.status == "corrected" and result.corrected == FIXED
    b = model.of("B")
    assert len(b) == 3  # one for "born in Paris", two for "won three Nobel Prizes"
    follow = [m for m in b if len(m) > 1]
    assert len(follow) == 1
    first, answer, again = follow[0][0], follow[0][-2], follow[0][-1]
    assert isinstance(answer, AIMessage) and json.loads(str(answer.content)) == WON_THREE
    assert isinstance(again, HumanMessage) and "not supported by the context" in str(again.content)
    assert json.dumps(WON_THREE) in str(again.content)
    assert "<evidence>" in str(first.content)
    by_old = {tuple(c.old.as_list()): c for c in result.changes if c.old is not None}
    assert by_old[tuple(WON_THREE)].follow_up and by_old[tuple(WON_THREE)].llm_calls == 3  # B, follow-up, C
    assert not by_old[tuple(BORN_PARIS)].follow_up and by_old[tuple(BORN_PARIS)].llm_calls == 2  # B, C
    assert result.llm_calls == 5


def test_no_follow_up_when_the_answer_changed_or_could_not_be_parsed() -> None:
    model = Model(step1=lambda old, n: "I cannot help with that." if old == BORN_PARIS else json.dumps(FIX[tuple(old)]))
    result = make(model, method="evidence").correct(CONTEXT, OUTPUT)
    assert all(len(m) == 1 for m in model.of("B"))
    assert len(model.of("B")) == 2
    by_old = {tuple(c.old.as_list()): c for c in result.changes if c.old is not None}
    assert by_old[tuple(BORN_PARIS)].reason == "step 1: no triple could be parsed from the answer"
    assert not any(c.follow_up for c in result.changes)


def test_a_model_that_always_echoes_costs_two_step_1_calls_per_triple_and_nothing_more() -> None:
    model = Model(step1=lambda old, n: json.dumps(old))
    result = make(model, method="evidence", direct_fallback=False).correct(CONTEXT, OUTPUT)
    assert result.status == "unchanged" and result.corrected == OUTPUT
    assert len(model.of("B")) == 4 and not model.of("C") and not model.of("D")  # 2 triples x (B + follow-up)
    assert result.llm_calls == 4
    assert all(c.follow_up for c in result.changes)
    assert all(c.reason == "step 1: the model returned the triple unchanged, twice (after the follow-up)"
               for c in result.changes)


def test_when_no_triple_change_applies_the_round_ends_with_the_direct_prompt() -> None:
    model = Model(step1=lambda old, n: json.dumps(old), direct=lambda summary: FIXED)
    result = make(model, method="evidence").correct(CONTEXT, OUTPUT)
    assert [len(model.of(k)) for k in ("B", "C", "D")] == [4, 0, 1]
    assert result.status == "corrected" and result.corrected == FIXED
    assert [c.kind for c in result.changes] == ["graph", "graph", "direct"]
    assert result.changes[-1].applied and result.llm_calls == 5


def test_no_direct_fallback_once_a_triple_change_was_applied() -> None:
    def step1(old: list[str], n: int) -> str:
        return json.dumps(FIX[tuple(old)]) if old == WON_THREE else json.dumps(old)

    model = Model(step1=step1, direct=lambda summary: FIXED)
    result = make(model, method="evidence").correct(CONTEXT, OUTPUT)
    assert not model.of("D")
    assert result.corrected == "Marie Curie was born in Paris. She won two Nobel Prizes. She died in 1934."


def test_the_papers_procedure_is_unchanged_no_evidence_no_reason_no_follow_up() -> None:
    model = Model(step1=lambda old, n: json.dumps(old))
    result = make(model, strategy="paper").correct(CONTEXT, OUTPUT)
    assert result.method == "paper"
    b = model.of("B")
    assert len(b) == 2 and all(len(m) == 1 for m in b)
    text = str(b[0][0].content)
    assert "<evidence>" not in text and "P(unsupported)" not in text
    assert text == CORRECTION_PROMPTS.triple_messages(Triple.from_list(BORN_PARIS), CONTEXT)[0].content
    assert all(c.reason == "step 1: the model returned the triple unchanged" for c in result.changes)
    assert not any(c.follow_up for c in result.changes)


# --------------------------------------------------------------------------- no triple to correct
def test_an_output_flagged_without_triples_gets_the_direct_prompt() -> None:
    out = "Marie Curie won three Nobel Prizes."
    claim = ClaimCheck(claim=out, p_unsupported=0.8, unsupported=True)
    report = Report(output=out, mode="graph", threshold=0.5, hallucinated=True, score=0.2, claims=[claim],
                    extraction=Extraction(triples=[], attempts=3, fallback=True))
    model = Model(direct=lambda summary: summary.replace("three", "two"))
    result = make(model, method="evidence").correct(CONTEXT, out, report=report)
    assert len(model.of("D")) == 1 and not model.of("B")
    assert result.corrected == "Marie Curie won two Nobel Prizes."
    assert [c.kind for c in result.changes] == ["graph", "direct"] and result.llm_calls == 1
    assert result.changes[0].reason is not None and "whole-output claim" in result.changes[0].reason
    # the paper's procedure has nothing to correct there
    paper = Model()
    kept = make(paper, method="graph").correct(CONTEXT, out, report=report)
    assert kept.status == "unchanged" and not paper.of("D")
    # constrained (the default) replaces the number the context does not state, with no chat-model call
    default = Model()
    restated = make(default).correct(CONTEXT, out, report=report)
    assert restated.corrected == "Marie Curie won two Nobel Prizes." and default.calls == []


# --------------------------------------------------------------------------- options and helpers
def test_options_are_validated() -> None:
    engine = GraphEval(llm=Model().llm, scorer=KeywordScorer())
    with pytest.raises(InputError, match="batch_step1"):
        GraphCorrect(engine, method="evidence", batch_step1=True)
    with pytest.raises(InputError, match="evidence_sentences"):
        GraphCorrect(engine, method="evidence", evidence_sentences=0)
    with pytest.raises(InputError, match="strategy"):
        GraphCorrect(engine, strategy="vote")  # type: ignore[arg-type]


def test_evidence_sentences_limits_what_step_1_sees() -> None:
    model = Model()
    make(model, method="evidence", evidence_sentences=1).correct(CONTEXT, OUTPUT)
    for messages in model.of("B"):
        evidence = _tag("evidence", str(messages[0].content))
        assert evidence.count(".") == 1


def test_closest_sentences_ranks_by_shared_words_and_keeps_passage_order() -> None:
    passage = "Rome is old. The weather was fine. Paris hosted the games in 2024. Paris is big."
    t = Triple(subject="Paris", relation="hosted", object="the games in 2028")
    assert closest_sentences(passage, t, k=1) == "Paris hosted the games in 2024."
    assert closest_sentences(passage, t, k=2) == "Paris hosted the games in 2024. Paris is big."
    assert closest_sentences(passage, Triple(subject="Zed", relation="x", object="y")) == ""
    with pytest.raises(ValueError):
        closest_sentences(passage, t, k=0)


def test_the_reason_gives_the_score_and_the_threshold() -> None:
    assert failure_reason(0.93, 0.5) == (
        "a fact checker judged it not supported by the context (P(unsupported) = 0.93, above the threshold 0.50)"
    )
