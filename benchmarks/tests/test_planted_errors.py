"""The planted-errors benchmark: scoring a correction against the truth (no spaCy, no model), the committed cases,
the generator (spaCy, skipped when it is not installed) and the runner end to end on fake models."""

from __future__ import annotations

import importlib
import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest
from bench_scripts import ROOT, load_harness

load_harness()  # puts benchmarks/ on sys.path: the scripts import each other by name, as when they run
pe = importlib.import_module("planted_errors")

CASES_FILE = ROOT / "benchmarks" / "results" / "planted-errors.jsonl"
HELD_OUT_FILE = ROOT / "benchmarks" / "results" / "planted-errors-heldout.jsonl"
SECOND_HELD_OUT_FILE = ROOT / "benchmarks" / "results" / "planted-errors-heldout2.jsonl"


def score(corrupted: str, planted: str, original_value: str, corrected: str, original: str | None = None) -> Any:
    start = corrupted.index(planted)
    return pe.score_correction(corrupted, (start, start + len(planted)), original_value, planted, corrected,
                               original=original)


# ----------------------------------------------------------------------------------------------- scoring
def test_the_original_back_in_place_is_restored_with_no_collateral() -> None:
    s = score("Rome is the capital of France.", "Rome", "Paris", "Paris is the capital of France.",
              original="Paris is the capital of France.")
    assert (s.restored, s.exact, s.collateral, s.deleted, s.unchanged, s.outcome) == (
        True, True, False, False, False, "restored")
    assert s.region == "Paris" and s.collateral_words == 0


@pytest.mark.parametrize(
    ("corrupted", "planted", "original_value", "corrected"),
    [
        ("He paid 2400 mg a day.", "2400", "3,200", "He paid 3200 mg a day."),  # thousands separator
        ("She won three prizes.", "three", "two", "She won 2 prizes."),  # number spelling
        ("Talks in london ended.", "london", "Paris", "Talks in paris ended."),  # case
        ("He met Smith in Rome.", "Smith", "the Pope", "He met Pope in Rome."),  # article
        ("The rate fell 20 per cent.", "20 per cent", "30 %", "The rate fell 30 percent."),  # per cent / %
    ],
)
def test_restored_ignores_case_articles_separators_and_number_spelling(
    corrupted: str, planted: str, original_value: str, corrected: str
) -> None:
    s = score(corrupted, planted, original_value, corrected)
    assert s.restored and not s.collateral, s


def test_a_change_outside_the_span_is_collateral_and_counted() -> None:
    s = score("Rome is the capital of France.", "Rome", "Paris", "Paris is the old capital of France.")
    assert s.restored and s.collateral and s.collateral_words == 1 and s.outcome == "restored+collateral"
    assert s.outside_words == 5


def test_the_block_at_the_span_may_hold_as_many_words_as_the_span_or_the_value() -> None:
    shorter = score("He lives in New York now.", "New York", "Paris", "He lives in Paris now.")
    assert shorter.restored and not shorter.collateral
    grown = score("He lives in Rome now.", "Rome", "Paris", "He lives in Paris, France now.")
    assert grown.restored and grown.collateral and grown.collateral_words == 1  # "France" was added

def test_a_word_changed_away_from_the_span_is_collateral() -> None:
    far = score("He lives in Rome now. It is big.", "Rome", "Paris", "He lives in Paris now. It is huge.")
    assert far.restored and far.collateral and far.collateral_words == 1


def test_unchanged_and_wrong_value() -> None:
    same = score("Rome is big.", "Rome", "Paris", "Rome is big.")
    assert same.unchanged and not same.restored and not same.collateral and same.outcome == "unchanged"
    assert score("rome is big.", "rome", "Paris", "Rome is big!").unchanged  # case and punctuation aside
    wrong = score("Rome is big.", "Rome", "Paris", "Milan is big.")
    assert not wrong.restored and not wrong.deleted and wrong.outcome == "wrong" and wrong.region == "Milan"


def test_a_value_next_to_the_planted_one_is_not_restored() -> None:
    s = score("Talks in London ended.", "London", "Paris", "Talks in London and Paris ended.")
    assert not s.restored


def test_the_span_removed_or_its_sentence_gutted_is_deleted() -> None:
    gone = score("Rome is the capital of France. It has 3 million people.", "Rome", "Paris",
                 "It has 3 million people.")
    assert gone.deleted and not gone.restored and gone.outcome == "deleted" and gone.region == ""
    dropped = score("Ann won 3 medals in Rome. She is 20.", "3", "2", "Ann won. She is 20.")
    assert dropped.deleted
    hollow = score("Ann won 3 medals in the city of Rome. She is 20.", "3", "2", "Ann got 4 prizes. She is 20.")
    assert hollow.deleted  # most of the sentence's words gone


def test_negation_added_and_removed() -> None:
    # added: the planted "was not" contains the original "was"; only "was" alone restores it
    assert score("He was not born in Rome.", "was not", "was", "He was born in Rome.").restored
    assert not score("He was not born in Rome.", "was not", "was", "He was not born in Rome.").restored
    # removed: "was" planted for "was not"
    assert score("He was born in Rome.", "was", "was not", "He was not born in Rome.").restored
    assert score("He was born in Rome.", "was", "was not", "He wasn't born in Rome.").restored
    assert not score("He was born in Rome.", "was", "was not", "He was born in Milan.").restored


def test_score_rejects_a_span_outside_the_text() -> None:
    with pytest.raises(ValueError):
        pe.score_correction("abc", (2, 9), "x", "c", "abc")


def test_rouge_l_outside_the_span_when_rouge_score_is_installed() -> None:
    pytest.importorskip("rouge_score")
    clean = score("Rome is the capital of France.", "Rome", "Paris", "Paris is the capital of France.")
    messy = score("Rome is the capital of France.", "Rome", "Paris", "Paris, a city, is in France.")
    assert clean.rougeL_outside == pytest.approx(1.0) and messy.rougeL_outside is not None
    assert messy.rougeL_outside < 0.9


def test_normalise_and_tokens() -> None:
    assert [t.text for t in pe.tokens("It cost $3,200, didn't it?")] == [
        "It", "cost", "$", "3,200", ",", "did", "n't", "it", "?"]
    assert pe.value_words("The United Nations") == ["united", "nations"]
    assert pe.normalise_word("Twelve") == "12" and pe.normalise_word("1,000,000") == "1000000"


# ----------------------------------------------------------------------------------------------- records, draws
def test_plant_and_json_round_trip(tmp_path: Path) -> None:
    case = pe.plant("Ann won two medals.", 8, 11, "three", id="a-number", source_id="a", set="s",
                    kind="number-change", ent_label=None, context="Ann won two medals in 2020.")
    assert case.corrupted == "Ann won three medals." and case.span == (8, 13) and case.original_span == (8, 11)
    path = tmp_path / "c.jsonl"
    assert pe.write_cases(path, [case]) == 1
    assert pe.read_cases(path) == [case]
    with pytest.raises(ValueError):
        pe.plant("Ann won two medals.", 8, 11, "two", id="x", source_id="a", set="s", kind="k", ent_label=None,
                 context="")


def test_draw_is_seeded_and_takes_the_kinds_in_turn() -> None:
    cases = [pe.PlantedCase(str(i), "r", "s", pe.KINDS[i % 3], None, "c", "x", "y", (0, 1), (0, 1), "y", "x")
             for i in range(30)]
    a, b = pe.draw(cases, 9, 5), pe.draw(cases, 9, 5)
    assert [c.id for c in a] == [c.id for c in b]
    assert [c.kind for c in a] == list(pe.KINDS[:3]) * 3
    assert [c.id for c in pe.draw(cases, 9, 6)] != [c.id for c in a]


def test_held_out_draws_leave_out_every_earlier_draw() -> None:
    bp = importlib.import_module("bench_planted")
    cases = pe.read_cases(CASES_FILE)
    first = {c.id for c in bp.select(cases, 32, 1, None)}
    second = {c.id for c in bp.select(cases, 32, 2, None, [(32, 1)])}
    third = {c.id for c in bp.select(cases, 32, 3, None, [(32, 1), (32, 2)])}
    assert len(first) == len(second) == len(third) == 32
    assert not first & second and not first & third and not second & third
    assert bp._draws(["32:1", "32:2"]) == [(32, 1), (32, 2)]
    with pytest.raises(Exception, match="N:SEED"):
        bp._draws(["32"])


def test_number_and_date_shapes_and_changes() -> None:
    assert pe.number_shape("$ 800,000") == pe.number_shape("$ 1,200") != pe.number_shape("800,000")
    assert pe.date_shape("2016") == pe.date_shape("1998") == "Y"
    assert pe.date_shape("monday 27") != pe.date_shape("saturday") and pe.date_shape("this week") is None
    rng = random.Random(0)
    for value in (1, 2, 5, 12, 13, 47, 100, 2_500, 1_000_000):
        for _ in range(20):
            new = pe.changed_number(value, 0, rng)
            assert new != value and new >= 1
    assert all(abs(pe.changed_number(2016, 0, rng, is_year=True) - 2016) in (1, 2, 3) for _ in range(20))


def test_relation_candidates_swap_both_ways_and_keep_case() -> None:
    text = "Born in Rome, she died in Paris before the war."
    found = pe.relation_candidates(text)
    assert [(c.planted, c.start) for c in found] == [("Died", 0), ("born", text.index("died")),
                                                     ("after", text.index("before"))]


# ----------------------------------------------------------------------------------------------- the committed cases
@pytest.fixture(scope="module")
def committed() -> list[Any]:
    if not CASES_FILE.exists():
        pytest.skip("benchmarks/results/planted-errors.jsonl is not there")
    return list(pe.read_cases(CASES_FILE))


def test_the_committed_cases_are_consistent(committed: list[Any]) -> None:
    assert len(committed) == 300 and len({c.id for c in committed}) == 300
    assert {c.kind for c in committed} == set(pe.KINDS) and {c.set for c in committed} == set(pe.SETS)
    for c in committed:
        s, e = c.span
        os_, oe = c.original_span
        assert c.corrupted[s:e] == c.planted_value and c.original[os_:oe] == c.original_value
        assert c.corrupted[:s] == c.original[:os_] and c.corrupted[e:] == c.original[oe:]
        assert c.corrupted != c.original and c.original_value.casefold() != c.planted_value.casefold()
        if c.kind in ("entity", "number", "date"):
            assert c.planted_value.casefold() in c.context.casefold(), c.id  # a value of the same context


@pytest.fixture(scope="module")
def held_out() -> list[Any]:
    if not HELD_OUT_FILE.exists():
        pytest.skip("benchmarks/results/planted-errors-heldout.jsonl is not there")
    return list(pe.read_cases(HELD_OUT_FILE))


@pytest.fixture(scope="module")
def second_held_out() -> list[Any]:
    if not SECOND_HELD_OUT_FILE.exists():
        pytest.skip("benchmarks/results/planted-errors-heldout2.jsonl is not there")
    return list(pe.read_cases(SECOND_HELD_OUT_FILE))


def test_the_held_out_cases_share_no_context_with_the_tuning_cases(committed: list[Any], held_out: list[Any]) -> None:
    assert len(held_out) == 120 and len({c.id for c in held_out}) == 120
    assert not {c.context for c in held_out} & {c.context for c in committed}


def test_the_second_held_out_set_shares_no_context_with_the_earlier_ones(
    committed: list[Any], held_out: list[Any], second_held_out: list[Any]
) -> None:
    assert len(second_held_out) == 83 and len({c.id for c in second_held_out}) == 83
    earlier = {c.context for c in [*committed, *held_out]}
    assert not {c.context for c in second_held_out} & earlier


def test_the_committed_cases_score_as_they_should(
    committed: list[Any], held_out: list[Any], second_held_out: list[Any]
) -> None:
    for c in [*committed, *held_out, *second_held_out]:
        back = pe.score_case(c, c.original)
        assert back.restored and back.exact and not back.collateral and not back.deleted, c.id
        kept = pe.score_case(c, c.corrupted)
        assert kept.unchanged and not kept.restored and not kept.collateral and kept.outcome == "unchanged", c.id


# ----------------------------------------------------------------------------------------------- the generator
def test_generate_plants_every_kind_on_a_small_set() -> None:
    pytest.importorskip("spacy")
    pytest.importorskip(pe.SPACY_MODEL)
    context = ("Barack Obama was born in Hawaii in 1961 and met Angela Merkel in Berlin on Monday. He won two "
               "elections. On Friday 2,000 people and 300 police gathered in Paris in 2015.")
    rows = [
        {"id": "r1", "label": 0, "context": context, "output": "Barack Obama was born in Hawaii. He won two elections."},
        {"id": "r2", "label": 0, "context": context, "output": "Obama met Merkel in Berlin on Monday."},
        {"id": "r3", "label": 0, "context": context, "output": "2,000 people gathered in Paris in 2015."},
        {"id": "r4", "label": 0, "context": context, "output": "He did not lose the elections."},
        {"id": "r5", "label": 1, "context": context, "output": "Obama was born in Kenya."},
    ]
    cases = pe.generate(["toy"], per_set=20, seed=3, rows_by_set={"toy": rows}, max_per_row=9)
    again = pe.generate(["toy"], per_set=20, seed=3, rows_by_set={"toy": rows}, max_per_row=9)
    assert [c.to_json() for c in cases] == [c.to_json() for c in again]
    assert pe.generate(["toy"], per_set=20, seed=3, rows_by_set={"toy": rows}, exclude_contexts={context}) == []
    assert cases and all(c.source_id != "r5" for c in cases)  # only faithful rows
    kinds = {c.kind for c in cases}
    assert {"entity", "number-change", "negation-added", "negation-removed", "relation"} <= kinds, kinds
    for c in cases:
        assert c.corrupted[c.span[0]:c.span[1]] == c.planted_value


# ----------------------------------------------------------------------------------------------- the runner
@pytest.fixture()
def runner_module() -> Any:
    return importlib.import_module("bench_planted")


def _cases_file(tmp_path: Path) -> tuple[Path, list[Any]]:
    cases = [
        pe.plant("Paris is the capital of France. It is big.", 0, 5, "Lyon", id="c1-entity", source_id="c1",
                 set="toy", kind="entity", ent_label="GPE", context="Paris is the capital of France. Lyon is not."),
        pe.plant("Ann won two medals in Rome.", 8, 11, "three", id="c2-number-change", source_id="c2", set="toy",
                 kind="number-change", ent_label=None, context="Ann won two medals in Rome in 2020."),
        pe.plant("The team won the final.", 9, 12, "lost", id="c3-relation", source_id="c3", set="toy",
                 kind="relation", ent_label=None, context="The team won the final on Sunday."),
    ]
    path = tmp_path / "cases.jsonl"
    pe.write_cases(path, cases)
    return path, cases


def test_run_and_table_end_to_end_on_fake_models(tmp_path: Path, runner_module: Any,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake chat model whose Direct Prompt answer is the original output, and a scorer that flags every claim:
    every case is flagged, the direct method restores all of them, and the table says so; a second run is a
    no-op (resumable)."""
    import bench_correct
    from typer.testing import CliRunner

    from grapheval_plugins.testing import FunctionScorer, ScriptedChatModel, naive_triples_chat_model

    path, cases = _cases_file(tmp_path)
    truth = {c.corrupted: c.original for c in cases}
    naive = naive_triples_chat_model()

    def respond(messages: list[Any]) -> str:
        text = str(messages[-1].content)
        if "<summary>" in text:  # prompt D
            summary = text.split("<summary>")[1].split("</summary>")[0].strip()
            return str(truth.get(summary, summary))
        return str(naive.respond(messages))  # type: ignore[misc]

    def fakes() -> tuple[Any, Any]:
        return (ScriptedChatModel(respond=respond, model_label="fake"),
                FunctionScorer(lambda premise, hypothesis: 0.0, name="never-supported"))

    monkeypatch.setattr(bench_correct, "fake_models", fakes)
    out = tmp_path / "results"
    args = ["--cases", str(path), "--fake", "--results-dir", str(out), "--tag", "t"]
    result = CliRunner().invoke(runner_module.app, ["run", "--method", "direct", *args])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in
            (out / "planted-correct-fake-keyword-overlap-direct-t.jsonl").read_text().splitlines()]
    assert {r["id"] for r in rows} == {c.id for c in cases}
    assert all(r["restored"] and r["exact"] and not r["collateral"] and r["outcome"] == "restored" for r in rows)
    assert all(r["llm_calls"] == 1 and r["seconds"] >= 0 for r in rows)
    detections = (out / "planted-detect-fake-keyword-overlap-t.jsonl").read_text().splitlines()
    assert len(detections) == 3 and all(json.loads(d)["flagged"] for d in detections)

    again = CliRunner().invoke(runner_module.app, ["run", "--method", "direct", *args])
    assert again.exit_code == 0 and "direct:" not in again.output  # nothing redone
    assert len((out / "planted-correct-fake-keyword-overlap-direct-t.jsonl").read_text().splitlines()) == 3

    table = CliRunner().invoke(runner_module.app, ["table", *args[:-2], "--tag", "t"])
    assert table.exit_code == 0, table.output
    assert "| all | 3 | 100 % (3/3) |" in table.output
    assert "| direct | 3 | 100 % (3/3) | 100 % (3/3) | 0 % (0/3) | 0 % (0/3) |" in table.output
    assert "| 1.000 |" in table.output or "| — |" in table.output  # ROUGE-L outside (— without rouge-score)


def test_a_second_run_of_the_same_method_and_tag_is_refused_while_the_first_writes(tmp_path: Path,
                                                                                    runner_module: Any) -> None:
    from typer.testing import CliRunner

    path, _ = _cases_file(tmp_path)
    out = tmp_path / "results"
    out.mkdir()
    busy = runner_module.correct_path(out, "fake", "keyword-overlap", "direct", "t")
    with runner_module.bench.write_lock(busy, "--method"):  # another process writing that file
        refused = CliRunner().invoke(runner_module.app, ["run", "--method", "direct", "--cases", str(path), "--fake",
                                                         "--results-dir", str(out), "--tag", "t"])
    assert refused.exit_code != 0 and "another run is writing" in refused.output
    assert not busy.exists()


def test_run_with_the_stock_fakes_on_committed_cases(tmp_path: Path, runner_module: Any,
                                                     committed: list[Any]) -> None:
    from typer.testing import CliRunner

    out = tmp_path / "results"
    result = CliRunner().invoke(runner_module.app, [
        "run", "--fake", "--sample", "5", "--seed", "2", "--method", "direct", "--method", "evidence",
        "--method", "paper", "--results-dir", str(out)])
    assert result.exit_code == 0, result.output
    detections = (out / "planted-detect-fake-keyword-overlap.jsonl").read_text().splitlines()
    assert len(detections) == 5
    table = CliRunner().invoke(runner_module.app, ["table", "--fake", "--results-dir", str(out)])
    assert table.exit_code == 0 and "| all | 5 |" in table.output, table.output
    assert "original flagged" not in table.output
    originals = CliRunner().invoke(runner_module.app, [
        "originals", "--fake", "--sample", "5", "--seed", "2", "--results-dir", str(out)])
    assert originals.exit_code == 0, originals.output
    assert len((out / "planted-detect-original-fake-keyword-overlap.jsonl").read_text().splitlines()) == 5
    table = CliRunner().invoke(runner_module.app, ["table", "--fake", "--results-dir", str(out)])
    assert table.exit_code == 0 and "original flagged | flagged, original not |" in table.output, table.output


def test_on_target_names_the_planted_value() -> None:
    bp = importlib.import_module("bench_planted")
    from grapheval_plugins.types import ClaimCheck, Report, Triple

    case = pe.plant("Ann won two medals.", 8, 11, "three", id="x", source_id="a", set="s", kind="number-change",
                    ent_label=None, context="")
    hit = ClaimCheck(claim="Ann won three medals", triple=Triple(subject="Ann", relation="won",
                                                                 object="three medals"), p_unsupported=0.9,
                     unsupported=True)
    miss = ClaimCheck(claim="Ann is an athlete", triple=Triple(subject="Ann", relation="is", object="an athlete"),
                      p_unsupported=0.9, unsupported=True)
    report = Report(output=case.corrupted, mode="graph", threshold=0.5, hallucinated=True, claims=[hit])
    assert bp.on_target(report, case) is True
    assert bp.on_target(report.model_copy(update={"claims": [miss]}), case) is False
    assert bp.on_target(report.model_copy(update={"hallucinated": False, "claims": []}), case) is None
    removed = pe.plant("The feature is not as secure.", 12, 18, "is", id="y", source_id="b", set="s",
                       kind="negation-removed", ent_label=None, context="")
    near = ClaimCheck(claim="The feature is as secure", unsupported=True, p_unsupported=0.9)
    other = ClaimCheck(claim="The phone is new", unsupported=True, p_unsupported=0.9)
    flagged = Report(output=removed.corrupted, mode="graph", threshold=0.5, hallucinated=True, claims=[near])
    assert bp.on_target(flagged, removed) is True  # "is" and the word after it, "as"
    assert bp.on_target(flagged.model_copy(update={"claims": [other]}), removed) is False


@pytest.mark.parametrize("script", ["planted_errors.py", "bench_planted.py"])
def test_the_scripts_answer_help(script: str) -> None:
    import subprocess

    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--help"], capture_output=True,
                         text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "Usage" in out.stdout
