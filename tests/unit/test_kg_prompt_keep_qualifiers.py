"""Lever 2's extraction prompt (keep numbers, dates, qualifiers and negations in the triple); its report is tested with
the research scripts (``benchmarks/tests/test_prompt_report.py``)."""

from __future__ import annotations

import json

from grapheval_plugins.extract.parser import parse_triples
from grapheval_plugins.extract.prompts import KG_PROMPT, KG_PROMPT_KEEP_QUALIFIERS, KG_PROMPT_PAPER


def test_it_renders_the_defaults_format_and_order_with_its_own_tips_and_examples() -> None:
    msgs = KG_PROMPT_KEEP_QUALIFIERS.messages("Refunds take at least 5 days.")
    assert [m.type for m in msgs] == ["system", "human", "human", "human"]
    assert msgs[0].content == KG_PROMPT.messages("x")[0].content  # the same system message and format
    assert "Refunds take at least 5 days." in msgs[-1].content
    tips, shots = msgs[1].content, msgs[2].content
    for word in ("number", "unit", "date", '"more than"', '"about"', '"at least"', '"not"', '"never"',
                 "Only state what the input says"):
        assert word in tips
    assert '["Electronics", "carry", "a 15% restocking fee"]' in shots
    assert '["Electronics", "cannot be returned after", "30 days"]' in shots
    for ex in KG_PROMPT_KEEP_QUALIFIERS.examples:  # each example's triples parse as the model's answer would
        listed = json.dumps([list(t) for t in ex.triples])
        assert [t.as_list() for t in parse_triples(f"<python>{listed}</python>").triples] == [list(t) for t in ex.triples]


def test_it_has_its_own_cache_id_and_leaves_the_default_alone() -> None:
    assert KG_PROMPT_KEEP_QUALIFIERS.version == "kg-b/1-keep-qualifiers"
    ids = {KG_PROMPT.cache_id, KG_PROMPT_PAPER.cache_id, KG_PROMPT_KEEP_QUALIFIERS.cache_id}
    assert len(ids) == 3
    assert KG_PROMPT.cache_id.startswith("kg-a/1-examples-first#")
