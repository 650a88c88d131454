"""``detection.py``'s fidelity tables (``lab-report``, ``fidelity``) derive what the engine decides
(``GraphEval(fidelity="drop")``): the derived decision is the live one, the lab subset is drawn as documented, and
on every committed row the round trip as far as needed decides as the full one."""

from __future__ import annotations

from typing import Any

import pytest

from grapheval_plugins import GraphEval
from grapheval_plugins.aggregate import HybridWeights
from grapheval_plugins.extract.prompts import KG_PROMPT
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel

CONTEXT = "Marie Curie was born in Warsaw. She won two Nobel Prizes."
OUTPUT = "Marie Curie, born in Warsaw, won two Nobel Prizes."
# The second triple is an extraction error: the output never says it.
ANSWER = '<python>[["Marie Curie", "born in", "Warsaw"], ["Marie Curie", "moved to", "Berlin"]]</python>'
WEIGHTS = HybridWeights(whole=0.6, claims=0.2, bias=0.0, fitted_on="test")
DEFAULT_JUDGE = "judge:local:qwen2.5-coder-1.5b"


def engine(answer: str = ANSWER, **kwargs: Any) -> GraphEval:
    return GraphEval(llm=ScriptedChatModel(responses=[answer]), cache=False, **kwargs)


def _detection_script():  # type: ignore[no-untyped-def]
    from bench_scripts import load_script

    return load_script("benchmarks/detection.py", "bench_detection_script")


@pytest.mark.parametrize("output", [OUTPUT, "Pierre moved to Berlin in 1891."])
def test_the_benchmarks_derived_decision_is_the_engines(output: str) -> None:
    """``detection.py lab-report`` re-decides committed rows with the fidelity scores; the engine decides live."""
    module = _detection_script()
    scorer = KeywordScorer()
    plain = engine(scorer=scorer, hybrid_weights=WEIGHTS).evaluate(CONTEXT, output)
    assert plain.whole_output is not None
    row = {"p_raw": plain.whole_output.p_unsupported, "triples": [[*c.triple.as_list(), c.p_unsupported]
                                                                  for c in plain.claims if c.triple is not None],
           "id": "r", "dataset": "toy", "label": 1, "prompt": "v", "render": "concat"}
    claims = [c.claim for c in plain.claims if c.triple is not None]
    fid = module.fidelity_row(row, scorer.check([(output,)] * len(claims), claims), scorer, 0.0, len(claims))
    live = engine(scorer=scorer, hybrid_weights=WEIGHTS, fidelity="drop").evaluate(CONTEXT, output)
    derived = WEIGHTS.probability(*module.lab_scores(row, fid))
    assert live.score == pytest.approx(1 - derived)
    kept = [t[:3] for t in module.kept_triples(fid)]
    assert all(t in [c.triple.as_list() for c in live.claims if c.triple is not None] for t in kept)


def test_the_lab_subset_is_stratified_seeded_and_in_a_random_order() -> None:
    module = _detection_script()
    rows = [{"id": f"r{i:03d}", "label": int(i % 3 == 0)} for i in range(300)]
    a = module.draw_lab_subset({"toy": rows}, 60, seed=0)["toy"]
    assert a == module.draw_lab_subset({"toy": list(reversed(rows))}, 60, seed=0)["toy"]  # input order is irrelevant
    assert len(set(a)) == 60 and sum(int(i[1:]) % 3 == 0 for i in a) == 20
    assert a != sorted(a)
    assert module.draw_lab_subset({"toy": rows}, 60, seed=1)["toy"] != a


def test_on_every_committed_row_the_round_trip_as_far_as_needed_decides_as_the_full_one() -> None:
    """Replayed on the committed fidelity files (874 rows of the offline default judge): the same P(hallucination)
    as scoring every triple against its output, with about half the triples scored."""
    from grapheval_plugins.aggregate import fitted_weights

    module = _detection_script()
    weights = fitted_weights(DEFAULT_JUDGE, KG_PROMPT.version, "drop")
    assert weights is not None
    needed = total = 0
    for name in ("summeval", "qags_c", "qags_x"):
        path = module.result_path(name, module.LAB_LLM, DEFAULT_JUDGE, module.DEFAULT_TAG, "concat")
        default = {r["id"]: r for r in module.bench.load_results(path)}
        for fid in module.bench.load_results(module.fidelity_path(name, module.LAB_LLM, DEFAULT_JUDGE)):
            row = default[fid["id"]]
            full = weights.probability(*module.lab_scores(row, fid))
            assert weights.probability(*module.lab_scores(row, module.round_trip_row(fid))) == pytest.approx(full)
            assert max(module.lab_scores(row, module.round_trip_row(fid))[1]) == max(module.lab_scores(row, fid)[1])
            needed += len(module.round_trip_needed(fid))
            total += len(fid["triples"])
    assert total > 2500 and needed < 0.6 * total
