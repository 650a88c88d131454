"""Stages 2 and 3, and the engine's batch behaviour."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from langchain_core.documents import Document

from grapheval_plugins import ClaimCheck, GraphEval, InputError, Report, Triple
from grapheval_plugins.aggregate import PAPER
from grapheval_plugins.check.base import Scorer, split_context
from grapheval_plugins.testing import FunctionScorer, KeywordScorer, ScriptedChatModel


def llm_for(triples: list[list[str]]) -> ScriptedChatModel:
    return ScriptedChatModel(responses=["<python>" + json.dumps(triples) + "</python>"])


class TableScorer(Scorer):
    """P(supported) looked up per hypothesis; records batches."""

    name = "table"

    def __init__(self, table: dict[str, float], default: float = 1.0) -> None:
        super().__init__()
        self.table, self.default, self.batches = table, default, []

    def predict_support(self, pairs):
        self.batches.append(list(pairs))
        return [self.table.get(h, self.default) for _, h in pairs]


# --------------------------------------------------------------------------- decision rule
def test_decision_rule_is_any_triple_strictly_above_the_threshold() -> None:
    def paper(*ps: float) -> bool:
        claims = [ClaimCheck(claim=str(i), p_unsupported=p, unsupported=p > 0.5) for i, p in enumerate(ps)]
        return PAPER.decide(claims, threshold=0.5).hallucinated

    assert paper(0.5, 0.2) is False  # 0.5 is not above 0.5
    assert paper(0.5001) is True
    assert PAPER.decide([], threshold=0.5).p_hallucination == 0.0
    llm = llm_for([["A", "is", "x"], ["B", "is", "y"], ["C", "is", "z"]])
    scorer = TableScorer({"A is x": 0.9, "B is y": 0.3, "C is z": 0.6})  # p_unsupported 0.1, 0.7, 0.4
    report = GraphEval(llm=llm, scorer=scorer).evaluate("ctx", "A is x. B is y. C is z.")
    assert report.hallucinated is True
    assert report.score == pytest.approx(0.3)
    assert [c.triple.as_list() for c in report.unsupported] == [["B", "is", "y"]]
    strict = GraphEval(llm=llm, scorer=scorer, threshold=0.75).evaluate("ctx", "A is x. B is y. C is z.")
    assert strict.hallucinated is False and strict.unsupported == []


def test_raw_mode_scores_the_whole_output_once_and_calls_no_llm() -> None:
    llm = ScriptedChatModel(responses=["unused"])
    scorer = TableScorer({"The whole output.": 0.2})
    report = GraphEval(llm=llm, scorer=scorer, mode="raw").evaluate("ctx", "The whole output.")
    assert llm.calls == []
    assert [c.claim for c in report.claims] == ["The whole output."] and report.claims[0].triple is None
    assert report.mode == "raw" and report.hallucinated is True and report.score == pytest.approx(0.2)
    assert report.llm is None and report.extraction is None


# --------------------------------------------------------------------------- chunking
def test_long_context_is_chunked_and_the_best_chunk_decides() -> None:
    filler = " ".join(f"Sentence number {i} says nothing useful." for i in range(60))
    context = filler + " The treaty was signed in Vienna in 1815. " + filler
    scorer = FunctionScorer(lambda p, h: 0.95 if "Vienna" in p else 0.05, max_premise_tokens=80)
    chunks = scorer.chunks(context)
    assert len(chunks) > 5 and all(scorer.count_tokens(c) <= 80 for c in chunks)
    report = GraphEval(llm=llm_for([["The treaty", "signed in", "Vienna"]]), scorer=scorer).evaluate(
        context, "The treaty was signed in Vienna."
    )
    claim = report.claims[0]
    assert claim.p_unsupported == pytest.approx(0.05)
    assert "Vienna" in claim.evidence and chunks[claim.evidence_index] == claim.evidence
    assert report.hallucinated is False


def test_no_silent_truncation_every_word_of_the_context_is_in_some_chunk() -> None:
    context = " ".join(f"w{i}" for i in range(1000))
    chunks = split_context(context, max_tokens=64)
    covered = set(" ".join(chunks).split())
    assert covered == set(context.split())


# --------------------------------------------------------------------------- batching
ROWS = [
    {"id": "a", "context": "Paris is the capital of France.", "output": "Paris is the capital of France."},
    {"id": "b", "context": "Berlin is in Germany.", "output": "Berlin is in Austria."},
    {"id": "c", "context": "Rome has the Colosseum.", "output": "Rome has the Colosseum and the Louvre."},
]


def naive_llm() -> ScriptedChatModel:
    from grapheval_plugins.testing import naive_triples_chat_model

    return naive_triples_chat_model()


def test_batched_scores_equal_one_by_one_scores() -> None:
    scorer = KeywordScorer()
    engine = GraphEval(llm=naive_llm(), scorer=scorer, check_batch_rows=8)
    batched = engine.evaluate_many(ROWS)
    assert len(scorer.batches) == 1  # all rows' claims in one scorer pass
    single = [GraphEval(llm=naive_llm(), scorer=KeywordScorer()).evaluate(r["context"], r["output"]) for r in ROWS]
    assert [r.id for r in batched] == ["a", "b", "c"]
    assert [[c.p_unsupported for c in r.claims] for r in batched] == [[c.p_unsupported for c in r.claims] for r in single]
    assert [r.hallucinated for r in batched] == [False, True, True]


class GatedScorer(KeywordScorer):
    """A keyword scorer whose passes wait until the test opens the gate (``started`` is set when one waits)."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.gate = threading.Event()

    def predict_support(self, pairs):
        self.started.set()
        assert self.gate.wait(10), "the test never opened the gate"
        return super().predict_support(pairs)


async def _until(predicate, what: str) -> None:  # type: ignore[no-untyped-def]
    """Yield to the loop until ``predicate()`` holds (no timing: bounded by a number of turns)."""
    for _ in range(100_000):
        if predicate():
            return
        await asyncio.sleep(0)
    raise AssertionError(f"never happened: {what}")


def _submitted(engine: GraphEval) -> list[int]:
    """Wrap the running loop's batcher so that each submit is counted (returns the live counter)."""
    batcher = engine._batchers[asyncio.get_running_loop()]
    counter = [0]
    submit = batcher.submit

    async def counting(contexts, claims):  # type: ignore[no-untyped-def]
        counter[0] += 1
        return await submit(contexts, claims)

    batcher.submit = counting  # type: ignore[method-assign]
    return counter


def test_concurrent_aevaluate_calls_share_scorer_passes() -> None:
    scorer = GatedScorer()
    engine = GraphEval(llm=naive_llm(), scorer=scorer)

    async def run() -> list[Report]:
        await engine._batcher()
        submitted = _submitted(engine)
        calls = [asyncio.ensure_future(engine.aevaluate(r["context"], r["output"])) for r in ROWS * 5]
        await _until(lambda: submitted[0] == 15, "all 15 calls reached the batcher")
        scorer.gate.set()  # the first pass (whatever it took) and one more serve everything
        return list(await asyncio.wait_for(asyncio.gather(*calls), timeout=10))

    reports = asyncio.run(run())
    assert len(reports) == 15 and all(r.ok for r in reports)
    assert len(scorer.batches) <= 2  # 15 samples, at most two scorer passes


def test_a_call_submitted_while_a_scorer_pass_runs_is_served_by_the_next_pass() -> None:
    scorer = GatedScorer()
    engine = GraphEval(llm=naive_llm(), scorer=scorer)

    async def run() -> list[Report]:
        await engine._batcher()
        submitted = _submitted(engine)
        first = asyncio.ensure_future(engine.aevaluate(ROWS[0]["context"], ROWS[0]["output"]))
        await asyncio.to_thread(scorer.started.wait, 10)  # the first pass is now running in its worker thread
        second = asyncio.ensure_future(engine.aevaluate(ROWS[1]["context"], ROWS[1]["output"]))
        await _until(lambda: submitted[0] == 2, "the second call reached the batcher")
        scorer.gate.set()
        return list(await asyncio.wait_for(asyncio.gather(first, second), timeout=10))

    reports = asyncio.run(run())
    assert [r.hallucinated for r in reports] == [False, True]
    assert len(scorer.batches) == 2


def test_a_scorer_pass_never_exceeds_max_batch_claims() -> None:
    scorer = KeywordScorer()
    rows = [{"id": str(i), "context": "Paris is in France.", "output": f"Paris {i} is in France."} for i in range(9)]
    reports = GraphEval(llm=naive_llm(), scorer=scorer, max_batch_claims=2, check_batch_rows=32).evaluate_many(rows)
    assert all(r.ok for r in reports) and len(reports) == 9
    claims_per_pass = [len({h for _, h in batch}) for batch in scorer.batches]
    assert max(claims_per_pass) <= 2 and sum(claims_per_pass) == 9

    gated = GatedScorer()
    engine = GraphEval(llm=naive_llm(), scorer=gated, max_batch_claims=4, batch_wait_s=60)

    async def run() -> list[Report]:
        await engine._batcher()
        submitted = _submitted(engine)
        calls = [asyncio.ensure_future(engine.aevaluate(r["context"], r["output"])) for r in rows[:8]]
        await _until(lambda: submitted[0] == 8, "all calls reached the batcher")
        gated.gate.set()
        # batch_wait_s=60: the passes start because the pending claims fill a pass, not because time passed
        return list(await asyncio.wait_for(asyncio.gather(*calls), timeout=30))

    assert all(r.ok for r in asyncio.run(run()))
    assert [len(b) for b in gated.batches] and max(len({h for _, h in b}) for b in gated.batches) <= 4


def test_models_are_resolved_off_the_event_loop(monkeypatch) -> None:
    import grapheval_plugins.models as models

    threads: dict[str, int] = {}

    def resolve_scorer(spec=None, **kw):  # type: ignore[no-untyped-def]
        threads["scorer"] = threading.get_ident()
        return KeywordScorer()

    def resolve_llm(spec=None, **kw):  # type: ignore[no-untyped-def]
        threads["llm"] = threading.get_ident()
        return naive_llm()

    monkeypatch.setattr(models, "resolve_scorer", resolve_scorer)
    monkeypatch.setattr(models, "resolve_llm", resolve_llm)
    engine = GraphEval(llm="local:any", scorer="any")

    async def run() -> int:
        assert (await engine.aevaluate(ROWS[0]["context"], ROWS[0]["output"])).ok
        return threading.get_ident()

    loop_thread = asyncio.run(run())
    assert set(threads) == {"llm", "scorer"} and loop_thread not in threads.values()


def test_a_caller_cancelled_while_waiting_does_not_disturb_the_others() -> None:
    scorer = GatedScorer()
    engine = GraphEval(llm=naive_llm(), scorer=scorer)

    async def run() -> tuple[list[Report], bool]:
        await engine._batcher()
        submitted = _submitted(engine)
        calls = [asyncio.ensure_future(engine.aevaluate(r["context"], r["output"])) for r in ROWS]
        await _until(lambda: submitted[0] == 3, "all calls reached the batcher")
        calls[1].cancel()
        scorer.gate.set()
        done = await asyncio.wait_for(asyncio.gather(calls[0], calls[2]), timeout=10)
        return list(done), calls[1].cancelled()

    (first, third), cancelled = asyncio.run(run())
    assert cancelled and first.hallucinated is False and third.hallucinated is True


def test_cancelling_the_scorer_pass_cancels_its_waiters_instead_of_leaving_them_hanging() -> None:
    scorer = GatedScorer()
    engine = GraphEval(llm=naive_llm(), scorer=scorer)

    async def run() -> list[BaseException | Report]:
        batcher = await engine._batcher()
        submitted = _submitted(engine)
        calls = [asyncio.ensure_future(engine.aevaluate(r["context"], r["output"])) for r in ROWS]
        await _until(lambda: submitted[0] == 3, "all calls reached the batcher")
        await asyncio.to_thread(scorer.started.wait, 10)  # a pass is running (the rest wait for the next)
        assert batcher._flush_task is not None
        batcher._flush_task.cancel()  # what loop shutdown or a KeyboardInterrupt does to it
        try:
            return list(await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), timeout=10))
        finally:
            scorer.gate.set()  # let the worker thread finish

    results = asyncio.run(run())
    assert results and all(isinstance(r, asyncio.CancelledError) for r in results)
    again = engine.evaluate(ROWS[1]["context"], ROWS[1]["output"])  # the engine still works afterwards
    assert again.hallucinated is True


def test_a_scorer_raising_outside_its_contract_fails_the_waiting_rows_instead_of_hanging() -> None:
    class Broken(KeywordScorer):
        async def acheck(self, contexts, claims):
            raise KeyError("not a ScoringError")

    engine = GraphEval(llm=naive_llm(), scorer=Broken())

    async def run() -> None:
        await asyncio.wait_for(engine.aevaluate(ROWS[0]["context"], ROWS[0]["output"]), timeout=10)

    with pytest.raises(KeyError):
        asyncio.run(run())


def test_one_bad_row_never_sinks_the_batch() -> None:
    class FailsOnBerlin(KeywordScorer):
        def predict_support(self, pairs):
            if any("Berlin" in p for p, _ in pairs):
                raise RuntimeError("CUDA out of memory")
            return super().predict_support(pairs)

    rows = [*ROWS, {"id": "d", "context": "", "output": "x"}, {"id": "e", "context": "ctx"}, "not a row"]
    reports = GraphEval(llm=naive_llm(), scorer=FailsOnBerlin()).evaluate_many(rows)
    assert len(reports) == 6
    by_id = {r.id: r for r in reports}
    assert by_id["a"].ok and by_id["c"].ok
    assert not by_id["b"].ok and by_id["b"].errors[0].stage == "check"
    assert "out of memory" in by_id["b"].errors[0].message
    assert by_id["d"].errors[0].stage == "input" and "rows[3].context" in by_id["d"].errors[0].message
    assert "rows[4].output" in by_id["e"].errors[0].message
    assert reports[5].errors[0].stage == "input"


def test_invalid_probabilities_from_a_scorer_are_errors_not_verdicts() -> None:
    report = GraphEval(llm=naive_llm(), scorer=FunctionScorer(lambda p, h: float("nan"))).evaluate_many(ROWS[:1])[0]
    assert not report.ok and "invalid probability" in report.errors[0].message


# --------------------------------------------------------------------------- inputs
@pytest.mark.parametrize(
    ("context", "output", "field"),
    [
        ("", "out", "context"),
        ("   ", "out", "context"),
        (None, "out", "context"),
        ("ctx", "", "output"),
        ("ctx", None, "output"),
        ("ctx", 42, "output"),
        (["", "  "], "out", "context"),
        ([1, 2], "out", "context[0]"),
        (b"bytes", "out", "context"),
    ],
)
def test_bad_input_raises_a_typed_error_naming_the_field(context, output, field) -> None:
    engine = GraphEval(llm=naive_llm(), scorer=KeywordScorer())
    with pytest.raises(InputError) as info:
        engine.evaluate(context, output)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)


def test_context_may_be_a_list_of_strings_or_documents_with_empty_items_skipped() -> None:
    scorer = KeywordScorer()
    docs = [Document(page_content="Berlin is in Germany."), Document(page_content=""), "Paris is the capital of France."]
    report = GraphEval(llm=naive_llm(), scorer=scorer).evaluate(docs, "Paris is the capital of France.")
    assert report.hallucinated is False
    # Each passage is scored on its own (never joined into one premise).
    assert [p for p, _ in scorer.batches[0]] == ["Berlin is in Germany.", "Paris is the capital of France."]
    assert report.claims[0].evidence_passage == 1


def test_constructor_validates_and_loads_nothing(monkeypatch) -> None:
    import grapheval_plugins.models as models

    calls = []
    monkeypatch.setattr(models, "resolve_scorer", lambda spec=None, **kw: calls.append(spec))
    GraphEval(llm="local:does-not-matter", scorer="hhem")
    assert calls == []
    with pytest.raises(InputError):
        GraphEval(mode="tree")  # type: ignore[arg-type]
    with pytest.raises(InputError):
        GraphEval(threshold=1.5)
    with pytest.raises(InputError, match="max_batch_claims"):
        GraphEval(max_batch_claims=0)


def test_report_serialises_and_reads_back() -> None:
    report = GraphEval(llm=naive_llm(), scorer=KeywordScorer()).evaluate(ROWS[1]["context"], ROWS[1]["output"])
    data = json.loads(report.model_dump_json())
    assert data["ok"] is True and data["hallucinated"] is True
    back = Report.model_validate({k: v for k, v in data.items() if k != "ok"})
    assert back.claims == report.claims
    assert report.explain().startswith("hallucination (score") and " unsupported" in report.explain()
    span = report.claims[0].span
    assert span is not None and ROWS[1]["output"][span[0] : span[1]].startswith("Berlin")
    assert isinstance(report.claims[0].triple, Triple)
