"""Lever 2's extraction prompt (keep numbers, dates, qualifiers and negations in the triple) and its report."""

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


def _detection_script():  # type: ignore[no-untyped-def]
    from repo_scripts import load_script

    return load_script("benchmarks/detection.py", "bench_detection_script")


def test_the_prompt_report_numbers_on_toy_rows() -> None:
    module = _detection_script()
    assert "keep-qualifiers" in module.PROMPTS and module.PROMPTS["keep-qualifiers"] is KG_PROMPT_KEEP_QUALIFIERS

    def row(label: int, p_raw: float, triples: list[tuple[float, float | None]]) -> tuple[dict, dict]:
        d = {"label": label, "p_raw": p_raw, "triples": [["s", "r", "o", pc] for pc, _ in triples]}
        f = {"triples": [["s", "r", "o", pc, po] for pc, po in triples]}
        return d, f

    rows = [
        row(0, 0.1, [(0.9, 0.8), (0.2, 0.1)]),  # a false alarm that the fidelity drop removes
        row(0, 0.2, []),  # no triple: the whole output decides
        row(1, 0.7, [(0.6, 0.3), (0.4, None)]),  # an unjudged triple is kept, not counted in the round trip
        row(1, 0.3, [(0.8, 0.2)]),
    ]
    st = module.prompt_stats(rows)
    assert st["rows"] == 4 and st["triples_per_row"] == 5 / 4 and st["no_triple"] == 1
    assert st["round_trip"] == 3 / 4 and st["unjudged"] == 1
    assert st["fa_triples"] == 0.5 and st["fa_fidelity"] == 0.0 and st["fa_raw"] == 0.0
    assert st["auc_fidelity"] == 1.0 and st["auc_triples"] == 0.5
    assert module.prompt_tables({"toy": {"a": rows, "b": rows}}, n_boot=50).count("| toy |") == 2
