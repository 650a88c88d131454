"""The safe parser of prompt A's answers: repairs, rejects, and never executes anything."""

from __future__ import annotations

import builtins
import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grapheval_plugins.extract.parser import parse_single_triple, parse_triples

GOOD = [["Amanda Jackson", "born in", "Springfield, Ohio, USA"], ["Amanda Jackson", "occupation", "basketball player"]]


def lists(result):
    return [t.as_list() for t in result.triples]


@pytest.mark.parametrize(
    "answer",
    [
        "<python>" + json.dumps(GOOD) + "</python>",
        "Here is the graph:\n<python>" + json.dumps(GOOD) + "</python>\nHope this helps.",
        "```python\n" + json.dumps(GOOD) + "\n```",
        json.dumps(GOOD),
        "<python>" + repr(GOOD) + "</python>",  # Python literal with single quotes
        "<python>" + json.dumps(GOOD)[:-1] + ",]</python>",  # trailing comma
        "<python>" + json.dumps(GOOD).replace('"', "\u201c", 1) + "</python>",  # a smart quote
        "<python>" + json.dumps(GOOD),  # missing closing tag
    ],
)
def test_usual_defects_are_repaired(answer: str) -> None:
    assert lists(parse_triples(answer)) == GOOD


def test_truncated_last_triple_keeps_the_complete_ones() -> None:
    answer = '<python>[["A", "knows", "B"], ["B", "lives in", "C"], ["C", "is'
    result = parse_triples(answer)
    assert lists(result) == [["A", "knows", "B"], ["B", "lives in", "C"]]
    assert "list recovered item by item" in result.issues


def test_malformed_items_are_dropped_and_reported() -> None:
    answer = '<python>[["A", "knows", "B"], ["only", "two"], ["x", "", "y"], [1, 2, 3], ["", "b", "c", "d"]]</python>'
    result = parse_triples(answer)
    assert lists(result) == [["A", "knows", "B"]]
    assert any("malformed" in issue for issue in result.issues)


def test_whitespace_is_collapsed_and_duplicates_removed() -> None:
    answer = '<python>[["  Paris ", "capital   of", "France"], ["paris", "Capital of", "france"]]</python>'
    result = parse_triples(answer)
    assert lists(result) == [["Paris", "capital of", "France"]]
    assert "duplicate triple removed" in result.issues


def test_extra_items_are_kept_in_the_object() -> None:
    answer = '<python>[["Nordlys Bikes", "opened its second factory", "Riga, Latvia", "in 2021"]]</python>'
    assert lists(parse_triples(answer)) == [["Nordlys Bikes", "opened its second factory", "Riga, Latvia in 2021"]]
    flat = '["Nordlys Bikes", "opened its second factory", "Riga, Latvia", "in 2021"]'
    assert lists(parse_triples(flat)) == [["Nordlys Bikes", "opened its second factory", "Riga, Latvia in 2021"]]


# A real answer of the 1.5B extraction model (benchmarks/results/kg-local-qwen2.5-coder-1.5b.jsonl, QAGS-C):
# pairs instead of triples, which a quarter of its QAGS-C answers were before pairs were read.
PAIRS_ANSWER = (
    '<python>[["Jesper blomqvist", "helped coach youngsters from Manchester United Foundation\'s street red project"], '
    '["Jesper blomqvist", "was on a bridge over a week ago"], ["Jesper blomqvist", "is back in manchester"]]</python>'
)


def test_an_answer_of_pairs_is_read_pair_by_pair_with_the_pairs_own_words() -> None:
    triples = parse_triples(PAIRS_ANSWER).triples
    assert [t.as_list() for t in triples][1:] == [
        ["Jesper blomqvist", "was", "on a bridge over a week ago"], ["Jesper blomqvist", "is", "back in manchester"]]
    assert triples[0].sentence() == (
        "Jesper blomqvist helped coach youngsters from Manchester United Foundation's street red project")
    assert lists(parse_triples('[["Sofia", "smiles"]]')) == [["Sofia", "is", "smiles"]]


def test_pairs_among_triples_and_where_one_triple_is_required_are_dropped() -> None:
    mixed = '[["A", "knows", "B"], ["A", "lives in Rome"]]'
    assert lists(parse_triples(mixed)) == [["A", "knows", "B"]]
    assert parse_triples(PAIRS_ANSWER, pairs=False).triples == []
    assert parse_single_triple('<triple>["Marie Curie", "born in"]</triple>') is None


def test_a_flat_list_of_3k_strings_is_k_triples() -> None:
    flat = '["Paris", "capital of", "France", "Rome", "capital of", "Italy"]'
    assert lists(parse_triples(flat)) == [["Paris", "capital of", "France"], ["Rome", "capital of", "Italy"]]


def test_a_single_bare_triple_is_accepted() -> None:
    assert parse_single_triple('["Paris", "capital of", "France"]').as_list() == ["Paris", "capital of", "France"]


@pytest.mark.parametrize("answer", ["", "   ", "I cannot help with that.", "<python></python>", "[[1, 2, 3]]", "{}"])
def test_nothing_parsable_gives_no_triples(answer: str) -> None:
    result = parse_triples(answer)
    assert result.triples == []
    assert not result.ok


def test_code_in_the_answer_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    payloads = [
        f'<python>[["a", "b", __import__("pathlib").Path("{marker}").touch()]]</python>',
        f'<python>__import__("os").system("touch {marker}")</python>',
        f'<python>[["a", "b", "c"]] + [open("{marker}", "w").write("x")]</python>',
        "<python>[x for x in ().__class__.__base__.__subclasses__()]</python>",
    ]
    for payload in payloads:
        result = parse_triples(payload)
        assert all(isinstance(p, str) for t in result.triples for p in t.as_list())
    assert not marker.exists()


# --------------------------------------------------------------------------- property test
_piece = st.sampled_from(
    ["[", "]", "[[", "]]", ",", '"', "'", "\u201c", "\u201d", "<python>", "</python>", "```", "```python",
     "\\", "\n", " ", "None", "1", "(", ")", "{", "}", "__import__('os')", "exec(", "eval(", "A", "born in", "B"]
)


def _mangle(draw_list: list[str], good: str) -> str:
    return "".join(draw_list) + good + "".join(reversed(draw_list))


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    noise=st.lists(_piece, max_size=12),
    cut=st.integers(min_value=0, max_value=400),
    text=st.text(max_size=80),
    mode=st.sampled_from(["prefix", "cut", "text", "splice"]),
)
def test_property_mangled_answers_never_raise_or_execute(noise, cut, text, mode) -> None:
    good = "<python>" + json.dumps(GOOD + [["Darius Van Arman", "attended", "Gonzaga College High School"]]) + "</python>"
    if mode == "prefix":
        answer = _mangle(noise, good)
    elif mode == "cut":
        answer = good[: cut % (len(good) + 1)] + "".join(noise)
    elif mode == "text":
        answer = text + "".join(noise)
    else:
        k = cut % (len(good) + 1)
        answer = good[:k] + text + "".join(noise) + good[k:]
    with _no_eval():
        result = parse_triples(answer)
    for triple in result.triples:
        parts = triple.as_list()
        assert len(parts) == 3
        assert all(isinstance(p, str) and p and p == p.strip() and "  " not in p for p in parts)
    keys = [tuple(p.casefold() for p in t.as_list()) for t in result.triples]
    assert len(keys) == len(set(keys))


@contextlib.contextmanager
def _no_eval():
    """eval and exec raise while the parser runs: it must never reach them."""

    def forbidden(*args, **kwargs):
        raise AssertionError("the parser called eval/exec")

    saved = builtins.eval, builtins.exec
    builtins.eval = builtins.exec = forbidden
    try:
        yield
    finally:
        builtins.eval, builtins.exec = saved
