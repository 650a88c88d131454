"""GraphCorrect and the Direct Prompt baseline, with a scripted chat model and the keyword scorer."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage
from typer.testing import CliRunner

import grapheval_plugins
from grapheval_plugins import GraphEval, InputError, MissingDependencyError, Report, Triple
from grapheval_plugins.correct import (
    CORRECTION_PROMPTS,
    CorrectionPrompts,
    CorrectionReport,
    GraphCorrect,
    TextPrompt,
    check_rewrite,
    clean_rewrite,
    rouge_scores,
    word_diff,
)
from grapheval_plugins.correct import text as correct_text
from grapheval_plugins.testing import FunctionScorer, KeywordScorer, ScriptedChatModel, keyword_support

ROOT = Path(__file__).resolve().parents[2]
PaperCorrect = functools.partial(GraphCorrect, strategy="paper")  # this module tests the paper's procedure

CONTEXT = "Marie Curie was born in Warsaw. She won two Nobel Prizes. She died in 1934."
OUTPUT = "Marie Curie was born in Paris. She won three Nobel Prizes. She died in 1934."
FAITHFUL = "Marie Curie was born in Warsaw. She died in 1934."
FIXED = "Marie Curie was born in Warsaw. She won two Nobel Prizes. She died in 1934."

BORN_PARIS = ["Marie Curie", "born in", "Paris"]
BORN_WARSAW = ["Marie Curie", "born in", "Warsaw"]
WON_THREE = ["Marie Curie", "won", "three Nobel Prizes"]
WON_TWO = ["Marie Curie", "won", "two Nobel Prizes"]
DIED = ["Marie Curie", "died in", "1934"]

_TAG = {
    name: re.compile(rf"<{name}>(.*?)</{name}>", re.S)
    for name in ("input", "triple", "triples", "context", "summary", "old_triple", "new_triple")
}


def _tag(name: str, text: str) -> str:
    found = _TAG[name].search(text)
    assert found is not None, f"no <{name}> in the prompt"
    return found.group(1)


class World:
    """A scripted chat model answering prompts A, B (single and batched), C and D, routed by their tags.

    Prompt A: the knowledge graph from ``kg`` (by exact text), else one naive triple per sentence.
    Prompt B: the triple from ``fix``. Prompt C: old object → new object in the output. Prompt D: ``direct``.
    Any step can be overridden with a function; ``log`` records (kind, prompt text) in call order.
    """

    def __init__(
        self,
        kg: dict[str, list[list[str]]] | None = None,
        fix: dict[tuple[str, ...], list[str]] | None = None,
        step1: Callable[[list[str]], str] | None = None,
        step2: Callable[[str, list[str], list[str]], str] | None = None,
        batch: Callable[[list[list[str]]], str] | None = None,
        direct: Callable[[str, str], str] | None = None,
    ) -> None:
        self.kg = {OUTPUT: [BORN_PARIS, WON_THREE, DIED], FAITHFUL: [BORN_WARSAW, DIED], **(kg or {})}
        self.fix = {tuple(BORN_PARIS): BORN_WARSAW, tuple(WON_THREE): WON_TWO, **(fix or {})}
        self.step1, self.step2, self.batch, self.direct = step1, step2, batch, direct
        self.log: list[tuple[str, str]] = []
        self.llm = ScriptedChatModel(respond=self.respond, model_label="world")

    def kinds(self) -> list[str]:
        return [k for k, _ in self.log]

    def respond(self, messages: list[BaseMessage]) -> str:
        text = str(messages[-1].content)
        if "<old_triple>" in text:
            self.log.append(("C", text))
            summary = _tag("context", text)
            old, new = json.loads(_tag("old_triple", text)), json.loads(_tag("new_triple", text))
            if self.step2 is not None:
                return self.step2(summary, old, new)
            return "<context>" + summary.replace(old[2], new[2]) + "</context>"
        if "<triples>" in text:
            self.log.append(("Bn", text))
            olds = json.loads(_tag("triples", text))
            if self.batch is not None:
                return self.batch(olds)
            return "<python>" + json.dumps([self.fix[tuple(t)] for t in olds]) + "</python>"
        if "<triple>" in text:
            self.log.append(("B", text))
            old = json.loads(_tag("triple", text))
            if self.step1 is not None:
                return self.step1(old)
            return json.dumps(self.fix[tuple(old)])
        if "<summary>" in text:
            self.log.append(("D", text))
            assert self.direct is not None, "no direct answer scripted"
            return self.direct(_tag("summary", text), _tag("context", text))
        self.log.append(("A", text))
        source = _tag("input", next(str(m.content) for m in messages if "<input>" in str(m.content)))
        if source in self.kg:
            return "<python>" + json.dumps(self.kg[source]) + "</python>"
        triples = []
        for sentence in re.findall(r"[^.]+\.", source):
            words = sentence.strip().rstrip(".").split()
            triples.append([" ".join(words[:2]), words[2], " ".join(words[3:])])
        return "<python>" + json.dumps(triples) + "</python>"


def make(world: World, **options: Any) -> GraphCorrect:
    return PaperCorrect(GraphEval(llm=world.llm, scorer=KeywordScorer()), **options)


# --------------------------------------------------------------------------- the prompts
def test_prompts_b_c_d_carry_the_papers_wording_and_the_right_inputs() -> None:
    world = World()
    result = make(world).correct(CONTEXT, OUTPUT)
    b = [t for k, t in world.log if k == "B"]
    c = [t for k, t in world.log if k == "C"]
    assert b[0].startswith("You are an expert at extracting information in structured formats from text.")
    assert "<triple>" + json.dumps(BORN_PARIS) + "</triple>" in b[0]
    assert "<context>" + CONTEXT + "</context>" in b[0]
    assert OUTPUT not in b[0]  # step 1 sees the triple and the grounding context, not the output
    assert b[0].rstrip().endswith("Remember, it is important that you only return the corrected triple.")
    assert c[0].startswith("In the following context, replace the information of the old triple")
    assert "<context>" + OUTPUT + "</context>" in c[0]  # prompt C's "context" is the output being corrected
    assert CONTEXT not in c[0]  # … and the grounding context is not sent in step 2
    assert "<old_triple>" + json.dumps(BORN_PARIS) + "</old_triple>" in c[0]
    assert "<new_triple>" + json.dumps(BORN_WARSAW) + "</new_triple>" in c[0]
    assert result.prompt_version == (
        "correct-b/1+correct-c/1+correct-d/1+correct-b-batch/1+correct-b-evidence/1+correct-b-followup/1"
        "+correct-choice/1"
    )

    d = CORRECTION_PROMPTS.direct_messages("S {context} S", "C")[0].content
    assert "<summary>S {context} S</summary>\n<context>C</context>" in d  # placeholders filled in one pass
    assert "don't make it longer" in d and d.startswith("The following summary contains factually incorrect")


def test_prompts_are_overridable_and_checked() -> None:
    custom = TextPrompt(
        version="mine/1",
        template="Fix <triple>{triple}</triple> using <context>{context}</context>.",
        fields=("triple", "context"),
        system="Be terse.",
    )
    prompts = CorrectionPrompts(triple=custom)
    msgs = prompts.triple_messages(Triple.from_list(BORN_PARIS), "ctx")
    assert [m.type for m in msgs] == ["system", "human"]
    assert (
        msgs[1].content
        == 'Fix <triple>["Marie Curie", "born in", "Paris"]</triple> using <context>ctx</context>.'
    )
    assert prompts.version.startswith("mine/1+")
    with pytest.raises(ValueError, match="lacks the placeholder"):
        TextPrompt(version="bad/1", template="no fields", fields=("triple",))
    with pytest.raises(ValueError, match="must declare"):
        CorrectionPrompts(triple=TextPrompt(version="x/1", template="{context}", fields=("context",)))
    world = World(step1=lambda old: json.dumps(BORN_WARSAW))
    make(world, prompts=prompts).correct(
        CONTEXT,
        "Marie Curie was born in Paris.",
    )
    assert [text[:4] for kind, text in world.log if kind == "B"] == ["Fix "]


# --------------------------------------------------------------------------- the procedure
def test_each_flagged_triple_is_corrected_in_turn_and_substitutions_apply_one_after_another() -> None:
    world = World()
    result = make(world).correct(CONTEXT, OUTPUT)
    assert world.kinds() == ["A", "B", "C", "B", "C", "A"]  # detect, (B, C) per triple, re-check
    second_c = [t for k, t in world.log if k == "C"][1]
    assert (
        "<context>Marie Curie was born in Warsaw. She won three Nobel Prizes." in second_c
    )  # sees the 1st fix
    assert result.corrected == FIXED
    assert [(c.old.as_list(), c.new.as_list(), c.applied) for c in result.changes] == [
        (BORN_PARIS, BORN_WARSAW, True),
        (WON_THREE, WON_TWO, True),
    ]
    assert result.status == "corrected" and result.flagged is True and result.passed is True
    assert result.llm_calls == 4 and result.detection_llm_calls == 1 and result.recheck_llm_calls == 1
    assert all(c.llm_calls == 2 for c in result.changes)
    assert (
        result.diff
        == "Marie Curie was born in [-Paris.-]{+Warsaw.+} She won [-three-]{+two+} Nobel Prizes. She died in 1934."
    )
    assert result.llm == "world"
    assert result.changed and result.applied == result.changes and result.rejected == []


def test_the_recheck_is_graph_eval_on_the_corrected_output() -> None:
    world = World()
    scorer = KeywordScorer()
    result = PaperCorrect(GraphEval(llm=world.llm, scorer=scorer)).correct(CONTEXT, OUTPUT)
    assert result.recheck is not None and result.recheck.output == FIXED
    assert result.recheck.hallucinated is False
    assert _tag("input", world.log[-1][1]) == FIXED  # the last call extracts the corrected output's graph
    hypotheses = [h for batch in scorer.batches for _, h in batch]
    assert "Marie Curie born in Warsaw" not in hypotheses[:3]  # detection scored the original triples …
    assert any(
        h.startswith("Marie Curie was born in Warsaw") or "Warsaw" in h for h in hypotheses[3:]
    )  # … then new ones
    assert [r.round for r in result.rounds] == [1] and result.rounds[0].applied == 2


def test_a_recheck_that_still_flags_is_reported_as_such() -> None:
    # Step 1 "corrects" to another unsupported value: the substitution applies but the re-check still flags.
    world = World(fix={tuple(BORN_PARIS): ["Marie Curie", "born in", "Lyon"], tuple(WON_THREE): WON_THREE})
    result = make(world).correct(CONTEXT, OUTPUT)
    assert result.corrected == "Marie Curie was born in Lyon. She won three Nobel Prizes. She died in 1934."
    assert result.status == "still_flagged" and result.passed is False
    assert result.changes[1].reason == "step 1: the model returned the triple unchanged"
    assert world.kinds() == ["A", "B", "C", "B", "A"]  # no step 2 for an unchanged triple
    assert result.recheck is not None and result.recheck.hallucinated is True


def test_nothing_flagged_returns_the_output_unchanged_with_zero_correction_calls() -> None:
    world = World()
    result = make(world).correct(CONTEXT, FAITHFUL)
    assert world.kinds() == ["A"]
    assert result.status == "unflagged" and result.corrected == FAITHFUL and not result.changed
    assert result.llm_calls == 0 and result.changes == [] and result.diff == ""
    assert result.flagged is False and result.passed is True and result.recheck is None
    assert result.rouge is not None and result.rouge.rougeL == 1.0
    assert result.explain() == "unflagged: nothing to correct"


def test_a_report_passed_in_skips_detection() -> None:
    world = World()
    grapheval = GraphEval(llm=world.llm, scorer=KeywordScorer())
    report = grapheval.evaluate(CONTEXT, OUTPUT)
    world.log.clear()
    result = PaperCorrect(grapheval).correct(CONTEXT, OUTPUT, report=report)
    assert world.kinds() == ["B", "C", "B", "C", "A"]
    assert result.detection is report or result.detection == report
    with pytest.raises(InputError, match="report: was made for a different output"):
        PaperCorrect(grapheval).correct(CONTEXT, FAITHFUL, report=report)


async def test_async_api_and_sync_api_agree() -> None:
    result = await make(World()).acorrect(CONTEXT, OUTPUT, id="r1")
    assert result.corrected == FIXED and result.id == "r1"
    assert (
        make(World()).correct(CONTEXT, OUTPUT).corrected == result.corrected
    )  # run_sync inside a running loop


# --------------------------------------------------------------------------- failure paths
def test_unparseable_corrected_triple_keeps_the_original_and_says_why() -> None:
    world = World(step1=lambda old: "I cannot help with that." if old == BORN_PARIS else json.dumps(WON_TWO))
    result = make(world).correct(CONTEXT, OUTPUT)
    first, second = result.changes
    assert not first.applied and first.new is None
    assert first.reason == "step 1: no triple could be parsed from the answer"
    assert first.raw_answers == ["I cannot help with that."] and first.llm_calls == 1
    assert second.applied
    assert result.corrected == "Marie Curie was born in Paris. She won two Nobel Prizes. She died in 1934."
    assert result.status == "still_flagged"
    assert world.kinds() == ["A", "B", "B", "C", "A"]


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "step 1: empty answer"),
        ('["Marie Curie", "born in"]', "step 1: no triple could be parsed"),
        ('["Marie Curie", "", "Warsaw"]', "step 1: no triple could be parsed"),
        (json.dumps(["Marie Curie", "born in", "Warsaw " * 80]), "step 1: the corrected triple is too long"),
    ],
)
def test_invalid_step1_answers_are_refused(answer: str, reason: str) -> None:
    world = World(step1=lambda old: answer)
    result = make(world).correct(CONTEXT, OUTPUT)
    assert result.corrected == OUTPUT and result.status == "unchanged"
    assert all(c.reason is not None and c.reason.startswith(reason) for c in result.changes)
    assert "C" not in world.kinds()
    assert result.recheck is result.detection or result.recheck == result.detection  # same text: no re-check
    assert result.recheck_llm_calls == 0 and result.passed is False and result.diff == ""


def test_a_chat_model_that_raises_is_retried_then_recorded() -> None:
    calls = {"n": 0}

    def step1(old: list[str]) -> str:
        calls["n"] += 1
        raise ConnectionError("provider down")

    result = make(World(step1=step1), max_retries=1).correct(CONTEXT, OUTPUT)
    assert calls["n"] == 4  # 2 triples × (1 call + 1 retry)
    assert [c.llm_calls for c in result.changes] == [2, 2]
    assert result.changes[0].reason == "step 1: the chat model raised ConnectionError: provider down"
    assert result.status == "unchanged" and result.corrected == OUTPUT


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "step 2: empty answer"),
        ("<context></context>", "step 2: empty answer"),
        (
            "<context>" + OUTPUT.replace("Paris", "Warsaw") + " " + "And more words. " * 20 + "</context>",
            "step 2: answer too long",
        ),
        (
            "<context>Warsaw-born physicist Curie received two Nobel awards before dying in 1934.</context>",
            "step 2: rewrote the whole output",
        ),
        ("<context>" + OUTPUT + "</context>", "step 2: the rewrite changed nothing"),
    ],
)
def test_bad_substitutions_are_refused_and_the_text_before_them_kept(answer: str, reason: str) -> None:
    world = World(
        step2=lambda summary, old, new: (
            answer if old == BORN_PARIS else "<context>" + summary.replace(old[2], new[2]) + "</context>"
        )
    )
    result = make(world).correct(CONTEXT, OUTPUT)
    first, second = result.changes
    assert not first.applied and first.reason is not None and first.reason.startswith(reason)
    assert first.new is not None and first.new.as_list() == BORN_WARSAW  # step 1 worked; step 2 was refused
    assert second.applied
    assert result.corrected == "Marie Curie was born in Paris. She won two Nobel Prizes. She died in 1934."


def test_whole_output_claims_have_no_triple_to_correct() -> None:
    world = World(kg={OUTPUT: []})  # nothing parsed: GraphEval checks the whole output as one claim
    result = make(world).correct(CONTEXT, OUTPUT)
    assert result.detection is not None and result.detection.extraction is not None
    assert result.detection.extraction.fallback
    assert len(result.changes) == 1 and result.changes[0].old is None
    assert "whole-output claim" in (result.changes[0].reason or "")
    assert result.status == "unchanged" and result.llm_calls == 0


def test_a_detection_failure_is_an_error_report_not_an_exception() -> None:
    def broken(premise: str, hypothesis: str) -> float:
        raise RuntimeError("scorer crashed")

    result = PaperCorrect(GraphEval(llm=World().llm, scorer=FunctionScorer(broken))).correct(CONTEXT, OUTPUT)
    assert result.status == "error" and result.corrected == OUTPUT and result.flagged is None
    assert result.errors and result.errors[0].stage == "check"
    assert result.explain().startswith("error: check:")


def test_a_failing_recheck_keeps_the_correction_and_reports_the_failure() -> None:
    def scorer_fn(premise: str, hypothesis: str) -> float:
        if hypothesis.startswith("Marie Curie was born in Warsaw"):  # a claim of the corrected output only
            raise RuntimeError("scorer crashed on the re-check")
        return keyword_support(premise, hypothesis)

    world = World()
    result = PaperCorrect(GraphEval(llm=world.llm, scorer=FunctionScorer(scorer_fn))).correct(CONTEXT, OUTPUT)
    assert result.status == "recheck_failed" and result.passed is None and result.corrected == FIXED
    assert result.errors and result.errors[0].stage == "check"
    assert result.recheck is not None and not result.recheck.ok


# --------------------------------------------------------------------------- the Direct Prompt baseline
def test_direct_prompt_is_one_call_and_its_wrapper_is_stripped() -> None:
    world = World(
        direct=lambda summary, ctx: "Here is the corrected summary:\n<summary>" + FIXED + "</summary>"
    )
    result = make(world, strategy="direct").correct(CONTEXT, OUTPUT)
    assert world.kinds() == ["A", "D", "A"]
    d = [t for k, t in world.log if k == "D"][0]
    assert "<summary>" + OUTPUT + "</summary>" in d and "<context>" + CONTEXT + "</context>" in d
    assert result.corrected == FIXED and result.status == "corrected" and result.llm_calls == 1
    assert result.changes[0].kind == "direct" and result.changes[0].applied
    assert result.method == "direct"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("", "direct: empty answer"),
        ("Curie. " * 40, "direct: answer too long"),
        (
            "A Polish scientist, she was honoured twice before 1935 ended her life.",
            "direct: rewrote the whole output",
        ),
    ],
)
def test_direct_prompt_failures_keep_the_original(answer: str, reason: str) -> None:
    result = make(World(direct=lambda s, c: answer), strategy="direct").correct(CONTEXT, OUTPUT)
    assert result.corrected == OUTPUT and result.status == "unchanged"
    assert result.changes[0].reason is not None and result.changes[0].reason.startswith(reason)


# --------------------------------------------------------------------------- options beyond the paper
def test_verify_loop_corrects_again_what_the_recheck_still_flags() -> None:
    # Round 1 fixes the birthplace only; the re-check flags the prize count; round 2 fixes it.
    world = World(step1=lambda old: json.dumps(WON_TWO if old[2].startswith("three") else BORN_WARSAW))
    half = "Marie Curie was born in Warsaw. She won three Nobel Prizes. She died in 1934."
    world.kg[half] = [BORN_WARSAW, WON_THREE, DIED]
    world.kg[OUTPUT] = [BORN_PARIS, DIED]  # the first extraction misses the prize claim
    single = make(world).correct(CONTEXT, OUTPUT)
    assert single.corrected == half and single.status == "still_flagged" and len(single.rounds) == 1
    looped = make(World(step1=world.step1, kg=dict(world.kg)), max_rounds=3).correct(CONTEXT, OUTPUT)
    assert looped.corrected == FIXED and looped.status == "corrected"
    assert [(r.round, r.applied, r.hallucinated) for r in looped.rounds] == [(1, 1, True), (2, 1, False)]
    assert [c.round for c in looped.changes] == [1, 2]
    assert looped.recheck_llm_calls == 2


def _drop_last_sentence(summary: str, old: list[str], new: list[str]) -> str:
    replaced = summary.replace(old[2], new[2])
    return "<context>" + replaced.replace(" She died in 1934.", "") + "</context>"


@pytest.mark.parametrize("guard", ["reject", True])
def test_guard_rejects_a_substitution_that_drops_a_supported_triple(guard: Any) -> None:
    scorer = KeywordScorer()
    world = World(
        step2=lambda s, o, n: (
            _drop_last_sentence(s, o, n)
            if o == WON_THREE
            else "<context>" + s.replace(o[2], n[2]) + "</context>"
        )
    )
    result = PaperCorrect(GraphEval(llm=world.llm, scorer=scorer), guard=guard).correct(CONTEXT, OUTPUT)
    first, second = result.changes
    assert first.applied and first.guard_lost == []
    assert not second.applied and second.reason == "guard: the substitution drops 1 supported triple(s)"
    assert [t.as_list() for t in second.guard_lost] == [DIED]
    assert result.corrected == "Marie Curie was born in Warsaw. She won three Nobel Prizes. She died in 1934."
    assert result.guard_checks == 2  # one supported triple, checked after each of the two substitutions
    guard_pairs = [p for b in scorer.batches for p in b if p[0] != CONTEXT]
    assert guard_pairs[-1] == (
        "Marie Curie was born in Warsaw. She won two Nobel Prizes.",
        "Marie Curie died in 1934",
    )


def test_guard_flag_applies_the_change_and_records_what_it_lost() -> None:
    world = World(
        step2=lambda s, o, n: (
            _drop_last_sentence(s, o, n)
            if o == WON_THREE
            else "<context>" + s.replace(o[2], n[2]) + "</context>"
        )
    )
    result = make(world, guard="flag").correct(CONTEXT, OUTPUT)
    assert result.corrected == "Marie Curie was born in Warsaw. She won two Nobel Prizes."
    assert result.changes[1].applied and [t.as_list() for t in result.changes[1].guard_lost] == [DIED]
    assert any(i.startswith("guard: substituting") for i in result.issues)
    unguarded = make(World(step2=world.step2)).correct(CONTEXT, OUTPUT)
    assert unguarded.guard_checks == 0 and unguarded.changes[1].guard_lost == []


def test_batched_step1_makes_one_call_for_all_flagged_triples() -> None:
    world = World()
    result = make(world, batch_step1=True).correct(CONTEXT, OUTPUT)
    assert world.kinds() == ["A", "Bn", "C", "C", "A"]
    batch_prompt = [t for k, t in world.log if k == "Bn"][0]
    assert json.dumps([BORN_PARIS, WON_THREE]) in batch_prompt
    assert result.corrected == FIXED and result.llm_calls == 3
    assert [c.llm_calls for c in result.changes] == [2, 1]  # the batched call is counted on the first change


def test_batched_step1_falls_back_to_one_call_per_triple_on_a_count_mismatch() -> None:
    world = World(batch=lambda olds: "<python>" + json.dumps([BORN_WARSAW]) + "</python>")
    result = make(world, batch_step1=True).correct(CONTEXT, OUTPUT)
    assert world.kinds() == ["A", "Bn", "B", "C", "B", "C", "A"]
    assert result.corrected == FIXED and result.llm_calls == 5
    assert any("batched step 1 returned 1 triple(s) for 2" in i for i in result.issues)


def test_constructor_validates_its_options() -> None:
    grapheval = GraphEval(llm=World().llm, scorer=KeywordScorer())
    for kwargs, field in [
        ({"strategy": "rewrite"}, "strategy"),
        ({"method": "rewrite"}, "method"),  # the deprecated name names itself
        ({"max_rounds": 0}, "max_rounds"),
        ({"guard": "maybe"}, "guard"),
        ({"max_growth": 0.9}, "max_growth"),
        ({"min_similarity": 1.5}, "min_similarity"),
        ({"max_retries": -1}, "max_retries"),
    ]:
        with pytest.raises(InputError) as info:
            GraphCorrect(grapheval, **kwargs)
        assert info.value.field == field
    with pytest.raises(InputError, match="context: is empty"):
        GraphCorrect(grapheval).correct("  ", OUTPUT)


def test_a_separate_correction_model_can_be_given() -> None:
    detector, fixer = World(), World()
    result = PaperCorrect(GraphEval(llm=detector.llm, scorer=KeywordScorer()), llm=fixer.llm).correct(
        CONTEXT, OUTPUT
    )
    assert detector.kinds() == ["A", "A"] and fixer.kinds() == ["B", "C", "B", "C"]
    assert result.corrected == FIXED


# --------------------------------------------------------------------------- many rows
def test_correct_many_keeps_order_ids_and_isolates_failing_rows() -> None:
    world = World()

    def scorer_fn(premise: str, hypothesis: str) -> float:
        if "Oslo" in hypothesis:
            raise RuntimeError("scorer crashed on this row")
        return keyword_support(premise, hypothesis)

    fixer = PaperCorrect(GraphEval(llm=world.llm, scorer=FunctionScorer(scorer_fn)))
    rows = [
        {"id": "a", "context": CONTEXT, "output": OUTPUT},
        {"id": "b", "context": CONTEXT, "output": FAITHFUL},
        {"id": "c", "context": "", "output": OUTPUT},
        {"id": "d", "context": CONTEXT, "output": "Oslo is a city in Norway."},
        (CONTEXT, OUTPUT),
    ]
    results = fixer.correct_many(rows)
    assert [r.id for r in results] == ["a", "b", "c", "d", None]
    assert [r.status for r in results] == ["corrected", "unflagged", "error", "error", "corrected"]
    assert results[2].errors[0].stage == "input" and "context" in results[2].errors[0].message
    assert results[3].errors[0].stage == "check"
    assert results[0].corrected == FIXED == results[4].corrected
    assert results[1].llm_calls == 0


def test_an_unexpected_failure_in_one_row_does_not_stop_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    from grapheval_plugins.correct.strategies import GraphStrategy

    fixer = make(World())
    original = GraphStrategy.run_round

    async def flaky(self: GraphStrategy, editor: Any, job: Any) -> Any:
        if "Paris" in job.original and "Nobel" not in job.original:
            raise RuntimeError("unexpected bug")
        return await original(self, editor, job)

    monkeypatch.setattr(GraphStrategy, "run_round", flaky)
    results = fixer.correct_many([(CONTEXT, "Marie Curie was born in Paris."), (CONTEXT, OUTPUT)])
    assert results[0].status == "error" and results[0].errors[-1].stage == "correct"
    assert (
        results[0].errors[-1].message == "unexpected bug"
        and results[0].corrected == "Marie Curie was born in Paris."
    )
    assert results[1].status == "corrected"


# --------------------------------------------------------------------------- text helpers
@pytest.mark.parametrize(
    ("answer", "original", "expected"),
    [
        ("<context>Paris is in France.</context>", "Paris is in Italy.", "Paris is in France."),
        (
            "Sure!\nHere is the new context:\n\nParis is in France.",
            "Paris is in Italy.",
            "Paris is in France.",
        ),
        ("Corrected summary: Paris is in France.", "Paris is in Italy.", "Paris is in France."),
        ("```\nParis is in France.\n```", "Paris is in Italy.", "Paris is in France."),
        ('"Paris is in France."', "Paris is in Italy.", "Paris is in France."),
        (
            '<context>Paris is in France.</context>\n<old_triple>["a", "b", "c"]</old_triple>',
            "Paris is in Italy.",
            "Paris is in France.",
        ),
        (
            "Paris is in France.\n\n(Note: only the country changed.)",
            "Paris is in Italy.",
            "Paris is in France.",
        ),
        (
            "Here's the corrected version:",
            "Paris is in Italy.",
            "Here's the corrected version:",
        ),  # nothing after
        ("New York is big.", "New York is small.", "New York is big."),  # not a preamble
        ("Summary: Paris is in France.", "Summary: Paris is in Italy.", "Summary: Paris is in France."),
        ('"Paris" is in France.', '"Paris" is in Italy.', '"Paris" is in France.'),
        ("The new context is: Paris is in France.", "Paris is in Italy.", "Paris is in France."),
        (
            "OK Go sold 2 million.\nIt is a band.",
            "OK Go sold 5 million.\nIt is a band.",
            "OK Go sold 2 million.\nIt is a band.",
        ),
        ("New York: Paris is in France.", "New York: Paris is in Italy.", "New York: Paris is in France."),
    ],
)
def test_clean_rewrite(answer: str, original: str, expected: str) -> None:
    assert clean_rewrite(answer, original) == expected


def test_check_rewrite_and_word_diff() -> None:
    text = "Marie Curie was born in Paris and won three prizes."
    assert check_rewrite(text.replace("Paris", "Warsaw"), text, text, 1.5, 0.5) is None
    assert check_rewrite("Short.", "Short one.", "Short one.", 1.5, 0.0) is None
    long_ok = "Oslo is in the Kingdom of Norway."  # a short output may grow by 40 characters
    assert check_rewrite(long_ok, "Oslo is in Spain.", "Oslo is in Spain.", 1.5, 0.0) is None
    assert "too long" in (check_rewrite("x" * 100, "Oslo is in Spain.", "Oslo is in Spain.", 1.5, 0.0) or "")
    assert word_diff("a b c", "a b c") == ""
    assert word_diff("a b c", "a c") == "a [-b-] c"


def test_rouge_uses_rouge_score_f_measures() -> None:
    scores = rouge_scores(OUTPUT, FIXED)
    from rouge_score import rouge_scorer

    expected = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True).score(OUTPUT, FIXED)
    assert scores.rouge1 == pytest.approx(expected["rouge1"].fmeasure)
    assert scores.rouge2 == pytest.approx(expected["rouge2"].fmeasure)
    assert scores.rougeL == pytest.approx(expected["rougeL"].fmeasure)
    assert 0.8 < scores.rouge1 < 1.0 and scores.rouge2 < scores.rouge1


def test_missing_rouge_score_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    correct_text._rouge_scorer.cache_clear()
    monkeypatch.setitem(sys.modules, "rouge_score.rouge_scorer", None)
    with pytest.raises(MissingDependencyError, match=r"grapheval-plugins\[correct\]"):
        rouge_scores("a b", "a c")
    fixer = make(World(), rouge=True)  # asked for explicitly: a missing extra fails before any model work
    with pytest.raises(MissingDependencyError):
        fixer.correct_many([(CONTEXT, OUTPUT)])
    assert make(World(), rouge=False).correct(CONTEXT, OUTPUT).rouge is None


def test_rouge_is_on_by_default_when_rouge_score_is_installed_and_off_with_a_note_otherwise(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with_extra = make(World()).correct(CONTEXT, OUTPUT)
    assert with_extra.rouge is not None and with_extra.rouge.rougeL < 1.0
    correct_text._rouge_scorer.cache_clear()
    monkeypatch.setitem(sys.modules, "rouge_score", None)  # the extra is not installed
    monkeypatch.setitem(sys.modules, "rouge_score.rouge_scorer", None)
    with caplog.at_level("INFO", logger="grapheval_plugins.correct.corrector"):
        results = make(World()).correct_many([(CONTEXT, OUTPUT), (CONTEXT, FAITHFUL)])
    assert [r.status for r in results] == ["corrected", "unflagged"]
    assert all(r.rouge is None for r in results)
    assert any("ROUGE is off" in m and "grapheval-plugins[correct]" in m for m in caplog.messages)
    assert make(World()).correct(CONTEXT, OUTPUT).corrected == FIXED


def test_the_report_round_trips_through_json() -> None:
    result = make(World()).correct(CONTEXT, OUTPUT)
    data = json.loads(json.dumps(result.model_dump(mode="json")))
    assert data["changed"] is True and data["rouge"]["rougeL"] < 1.0
    again = CorrectionReport.model_validate(data)
    assert again.corrected == result.corrected and isinstance(again.recheck, Report)
    assert "[-Paris.-]{+Warsaw.+}" in again.explain()


def test_importing_the_correct_module_loads_no_rouge_or_model() -> None:
    code = (
        "import sys, grapheval_plugins.correct, grapheval_plugins;"
        "grapheval_plugins.GraphCorrect;"
        "print([m for m in ('rouge_score', 'nltk', 'torch', 'llama_cpp') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
    assert grapheval_plugins.GraphCorrect is GraphCorrect


# --------------------------------------------------------------------------- the command line
def _world_model() -> ScriptedChatModel:
    return World().llm


def test_cli_correct_writes_reports_and_a_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grapheval_plugins import testing
    from grapheval_plugins.cli import app

    monkeypatch.setattr(testing, "correction_world_model", _world_model, raising=False)
    src = tmp_path / "in.jsonl"
    src.write_text(
        "\n".join(
            [
                json.dumps({"id": "x1", "context": CONTEXT, "output": OUTPUT}),
                json.dumps({"id": "x2", "context": CONTEXT, "output": FAITHFUL}),
                "{broken",
                json.dumps({"id": "x3", "context": "", "output": OUTPUT}),
            ]
        )
        + "\n"
    )
    out = tmp_path / "out.jsonl"
    fakes = [
        "--llm",
        "py:grapheval_plugins.testing:correction_world_model",
        "--scorer",
        "py:grapheval_plugins.testing:KeywordScorer",
    ]
    result = CliRunner().invoke(app, ["correct", str(src), "-o", str(out), *fakes])
    assert result.exit_code == 0, result.output
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["id"], r["status"]) for r in lines] == [
        ("x1", "corrected"),
        ("x2", "unflagged"),
        ("x3", "error"),
    ]
    assert lines[0]["corrected"] == FIXED
    assert re.search(r"flagged\s*│\s*1\b", result.output) and re.search(
        r"pass after correction\s*│\s*1\b", result.output
    )
    assert "mean rougeL (flagged rows)" in result.output and "line 3: invalid JSON" in result.output
    again = CliRunner().invoke(app, ["correct", str(src), "-o", str(out), *fakes, "--strategy", "direct"])
    assert again.exit_code == 0 and len(out.read_text().splitlines()) == 3  # resumed: nothing redone
    bad = CliRunner().invoke(app, ["correct", str(src), "-o", str(out), "--strategy", "rewrite"])
    assert bad.exit_code == 2
    constrained = tmp_path / "constrained.jsonl"
    done = CliRunner().invoke(app, ["correct", str(src), "-o", str(constrained), *fakes, "--strategy", "constrained"])
    assert done.exit_code == 0, done.output
    first = json.loads(constrained.read_text().splitlines()[0])
    assert (first["method"], first["status"], first["corrected"]) == ("constrained", "corrected", FIXED)


def test_cli_correct_writes_the_html_report_of_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jinja2")
    from grapheval_plugins import testing
    from grapheval_plugins.cli import app

    monkeypatch.setattr(testing, "correction_world_model", _world_model, raising=False)
    src = tmp_path / "in.jsonl"
    src.write_text(json.dumps({"id": "x1", "context": CONTEXT, "output": OUTPUT}) + "\n"
                   + json.dumps({"id": "x2", "context": CONTEXT, "output": FAITHFUL}) + "\n")
    out, html = tmp_path / "out.jsonl", tmp_path / "fixes.html"
    result = CliRunner().invoke(app, [
        "correct", str(src), "-o", str(out), "--report", str(html),
        "--llm", "py:grapheval_plugins.testing:correction_world_model",
        "--scorer", "py:grapheval_plugins.testing:KeywordScorer",
    ])
    assert result.exit_code == 0, result.output
    assert "HTML report of 2 correction(s) (1 flagged, 1 changed, 1 pass the re-check" in result.output
    page = html.read_text(encoding="utf-8")
    assert "<script" not in page
    assert page.count('<section class="row"') == 2
    assert "<del>Paris" in page and "<ins>Warsaw" in page  # the word diff of x1
    assert "corrected to Marie Curie | born in | Warsaw" in page  # the triple that changed
    assert CONTEXT in page  # the context, from the input rows


# --------------------------------------------------------------------------- nothing passed unverified
class _GuardBlindScorer(KeywordScorer):
    """The keyword scorer, except against a changed output (the guard's premise, a bare string): there it gives no
    verdict (``fail="error"``) or raises (``fail="raise"``)."""

    def __init__(self, fail: str) -> None:
        super().__init__()
        self.fail = fail

    async def acheck(self, contexts: Any, claims: Any) -> Any:
        from grapheval_plugins.check.base import ClaimScore
        from grapheval_plugins.exceptions import ScoringError

        guarded = [isinstance(c, str) for c in contexts]
        if any(guarded) and self.fail == "raise":
            raise ScoringError("the scorer is down")
        scores = await super().acheck(contexts, claims)
        return [ClaimScore(float("nan"), -1, "", error="no verdict") if g else s for g, s in zip(guarded, scores)]


@pytest.mark.parametrize("fail", ["error", "raise"])
def test_guard_refuses_a_change_it_could_not_verify(fail: str) -> None:
    """A guard check the scorer cannot judge (no verdict: NaN; or a raised error) does not let the change through."""
    world = World()
    result = PaperCorrect(GraphEval(llm=world.llm, scorer=_GuardBlindScorer(fail)), guard="reject").correct(
        CONTEXT, OUTPUT)
    assert [c.applied for c in result.changes] == [False, False]
    assert all((c.reason or "").startswith("guard:") for c in result.changes)
    assert result.corrected == OUTPUT and result.status == "unchanged" and result.passed is False
    assert any("not verified" in issue for issue in result.issues)


def test_deepeval_says_passes_the_recheck_only_for_a_scored_pass() -> None:
    """Raw mode (no triple): the value step corrects "3" into "2"; the whole output, scored again, is still
    unsupported ("Rome", no place of the context to put in its stead), and the reason says so."""
    pytest.importorskip("deepeval")
    from deepeval.test_case import LLMTestCase

    from grapheval_plugins.integrations.deepeval import GraphEvalMetric

    support = lambda premise, claim: 0.0 if "3 medals" in claim or "Rome" in claim else 1.0  # noqa: E731
    metric = GraphEvalMetric(scorer=FunctionScorer(support), mode="raw", suggest_correction=True)
    metric.measure(LLMTestCase(input="q", actual_output="Ann won 3 medals in 2012. Bob lives in Rome.",
                               context=["Ann won 2 medals in 2012. Bob lives abroad."]), _show_indicator=False)
    assert metric.reason is not None and "passes the re-check" not in metric.reason
    assert "suggested correction (still flagged by the re-check): Ann won 2 medals in 2012. Bob lives in Rome." in (
        metric.reason)
