"""The claim-score cache: a second pass scores nothing; a changed premise, claim or judge prompt is scored again."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from grapheval_plugins import GraphEval
from grapheval_plugins.check.base import ClaimScore, Scorer
from grapheval_plugins.check.judge import JudgeCalibration, JudgeScorer, LabelReading
from grapheval_plugins.score_cache import (
    CachedScorer,
    MemoryScoreCache,
    ScoreKey,
    SQLiteScoreCache,
    make_score_cache,
    premise_hash,
)
from grapheval_plugins.testing import FunctionScorer, KeywordScorer, ScriptedChatModel

CONTEXT = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
OUTPUT = "Marie Curie, born in Warsaw, won three Nobel Prizes."
ANSWER = '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "won", "three Nobel Prizes"]]</python>'


def scored(scorer: FunctionScorer) -> list[str]:
    """Every hypothesis the fake scorer was asked about, in order."""
    return [h for batch in scorer.batches for _, h in batch]


@pytest.fixture(params=["memory", "sqlite"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> MemoryScoreCache | SQLiteScoreCache:
    return MemoryScoreCache() if request.param == "memory" else SQLiteScoreCache(tmp_path / "scores.sqlite")


def test_a_second_pass_scores_nothing_and_returns_the_same_scores(store: MemoryScoreCache | SQLiteScoreCache) -> None:
    inner = KeywordScorer()
    scorer = CachedScorer(inner, store)
    first = scorer.check([CONTEXT, CONTEXT], ["Marie Curie born in Warsaw", "Marie Curie won three Nobel Prizes"])
    asked = len(scored(inner))
    second = scorer.check([CONTEXT, CONTEXT], ["Marie Curie born in Warsaw", "Marie Curie won three Nobel Prizes"])
    assert len(scored(inner)) == asked == 2
    assert second == first
    assert (scorer.hits, scorer.misses) == (2, 2)


def test_a_changed_premise_or_claim_is_scored_again_and_only_it(store: MemoryScoreCache | SQLiteScoreCache) -> None:
    inner = KeywordScorer()
    scorer = CachedScorer(inner, store)
    scorer.check([CONTEXT, CONTEXT], ["Marie Curie born in Warsaw", "Marie Curie won two Nobel Prizes"])
    inner.batches.clear()
    scorer.check([CONTEXT, CONTEXT + " She died in 1934."],
                 ["Marie Curie born in Warsaw", "Marie Curie won two Nobel Prizes"])
    assert scored(inner) == ["Marie Curie won two Nobel Prizes"]  # its premise changed
    inner.batches.clear()
    scorer.check([CONTEXT, CONTEXT], ["Marie Curie born in Warsaw", "Marie Curie won 2 Nobel Prizes"])
    assert scored(inner) == ["Marie Curie won 2 Nobel Prizes"]  # its claim changed


def test_a_duplicate_claim_in_one_call_is_scored_once() -> None:
    inner = KeywordScorer()
    scores = CachedScorer(inner, MemoryScoreCache()).check([CONTEXT] * 3, ["Warsaw", "Warsaw", "Paris"])
    assert scored(inner) == ["Warsaw", "Paris"]
    assert scores[0] == scores[1] and scores[0].p_unsupported == 0.0 and scores[2].p_unsupported == 1.0


def test_passages_are_part_of_the_premise() -> None:
    assert premise_hash(["A.", "B."]) != premise_hash("A.\n\nB.")
    inner = KeywordScorer()
    scorer = CachedScorer(inner, MemoryScoreCache())
    scorer.check([["Warsaw is a city.", "Paris too."]], ["Paris"])
    scorer.check(["Warsaw is a city.\n\nParis too."], ["Paris"])
    assert len(inner.batches) == 2  # one per premise
    # The cached score keeps its deciding chunk and passage.
    again = scorer.check([["Warsaw is a city.", "Paris too."]], ["Paris"])[0]
    assert len(inner.batches) == 2
    assert (again.passage_index, again.chunk) == (1, "Paris too.")


@dataclass
class _Table:
    """A label-logits backend: a claim is supported when it occurs in the context."""

    name: str = "table"
    calls: int = 0

    def label_logprobs(self, context: str, claims: Sequence[str], labels: Sequence[str]) -> list[LabelReading]:
        self.calls += 1
        return [LabelReading(verdict="supported" if c in context else "unknown") for c in claims]


def test_a_changed_judge_prompt_or_calibration_is_scored_again() -> None:
    backend = _Table()
    judge = JudgeScorer(backend)
    scorer = CachedScorer(judge, MemoryScoreCache())
    scorer.check([CONTEXT], ["Warsaw"])
    scorer.check([CONTEXT], ["Warsaw"])
    assert backend.calls == 1
    before = judge.fingerprint()
    judge.calibration = JudgeCalibration(slope=2.0)
    assert judge.fingerprint() != before
    scorer.check([CONTEXT], ["Warsaw"])
    assert backend.calls == 2
    backend.prompt = "another wording"  # type: ignore[attr-defined]  # a backend's prompt counts too
    scorer.check([CONTEXT], ["Warsaw"])
    assert backend.calls == 3


def test_two_scorers_of_different_names_do_not_share_scores() -> None:
    store = MemoryScoreCache()
    a = FunctionScorer(lambda p, h: 1.0, name="a")
    b = FunctionScorer(lambda p, h: 0.0, name="b")
    assert CachedScorer(a, store).check([CONTEXT], ["x"])[0].p_unsupported == 0.0
    assert CachedScorer(b, store).check([CONTEXT], ["x"])[0].p_unsupported == 1.0


class _Unjudged(Scorer):
    """Gives every claim an error (no verdict), counting its calls."""

    name = "unjudged"

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def predict_support(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        raise AssertionError("not used")

    def check(self, contexts: Sequence[str | Sequence[str]], claims: Sequence[str]) -> list[ClaimScore]:
        self.calls += 1
        return [ClaimScore(p_unsupported=math.nan, chunk_index=-1, chunk="", error="no verdict") for _ in claims]


def test_a_claim_without_a_verdict_is_not_cached(store: MemoryScoreCache | SQLiteScoreCache) -> None:
    inner = _Unjudged()
    scorer = CachedScorer(inner, store)
    assert scorer.check([CONTEXT], ["x"])[0].error == "no verdict"
    scorer.check([CONTEXT], ["x"])
    assert inner.calls == 2


def test_the_sqlite_cache_persists_across_instances_and_processes_share_it(tmp_path: Path) -> None:
    path = tmp_path / "scores.sqlite"
    inner = KeywordScorer()
    CachedScorer(inner, SQLiteScoreCache(path)).check([CONTEXT], ["Warsaw"])
    again = KeywordScorer()
    CachedScorer(again, SQLiteScoreCache(path)).check([CONTEXT], ["Warsaw"])
    assert again.batches == []
    assert len(SQLiteScoreCache(path)) == 1
    key = ScoreKey("keyword-overlap", again.fingerprint(), premise_hash(CONTEXT), "Warsaw")
    assert SQLiteScoreCache(path).get_many([key])[key].p_unsupported == 0.0


def test_acheck_uses_the_cache_too() -> None:
    inner = KeywordScorer()
    scorer = CachedScorer(inner, MemoryScoreCache())
    asyncio.run(scorer.acheck([CONTEXT], ["Warsaw"]))
    assert asyncio.run(scorer.acheck([CONTEXT], ["Warsaw"]))[0].p_unsupported == 0.0
    assert scored(inner) == ["Warsaw"]


def test_make_score_cache_reads_the_engine_option(tmp_path: Path) -> None:
    assert make_score_cache(None) is None and make_score_cache(False) is None
    assert isinstance(make_score_cache(True), MemoryScoreCache)
    assert isinstance(make_score_cache(tmp_path / "s.sqlite"), SQLiteScoreCache)
    store = MemoryScoreCache()
    assert make_score_cache(store) is store
    with pytest.raises(TypeError):
        make_score_cache(42)  # type: ignore[arg-type]


def engine(scorer: Scorer, **kwargs: object) -> GraphEval:
    return GraphEval(llm=ScriptedChatModel(responses=[ANSWER]), scorer=scorer, rule="paper", **kwargs)  # type: ignore[arg-type]


def test_the_engine_option_re_decides_without_scoring_again() -> None:
    inner = KeywordScorer()
    ge = engine(inner, score_cache=True)
    first = ge.evaluate(CONTEXT, OUTPUT)
    asked = len(scored(inner))
    strict = ge.with_options(hallucination_threshold=0.1)  # a view shares the cache
    second = strict.evaluate(CONTEXT, OUTPUT)
    many = ge.evaluate_many([{"context": CONTEXT, "output": OUTPUT}])
    assert len(scored(inner)) == asked == 2
    assert [c.p_unsupported for c in second.claims] == [c.p_unsupported for c in first.claims]
    assert many[0].score == first.score
    assert ge.scorer is inner  # the engine's scorer is still the one given


def test_the_engine_scores_every_time_without_a_cache() -> None:
    inner = KeywordScorer()
    ge = engine(inner)
    ge.evaluate(CONTEXT, OUTPUT)
    ge.evaluate(CONTEXT, OUTPUT)
    assert len(scored(inner)) == 4


def test_the_engine_with_a_cache_file_scores_a_new_output_only(tmp_path: Path) -> None:
    inner = KeywordScorer()
    engine(inner, score_cache=tmp_path / "scores.sqlite").evaluate(CONTEXT, OUTPUT)
    inner.batches.clear()
    other = GraphEval(llm=ScriptedChatModel(responses=['<python>[["Marie Curie", "born in", "Warsaw"], '
                                                       '["Marie Curie", "died in", "Paris"]]</python>']),
                      scorer=inner, rule="paper", score_cache=tmp_path / "scores.sqlite")
    other.evaluate(CONTEXT, "Marie Curie, born in Warsaw, died in Paris.")
    assert scored(inner) == ["Marie Curie died in Paris"]
