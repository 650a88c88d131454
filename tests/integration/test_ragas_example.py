"""The Ragas example end to end with real local models (the 0.5B GGUF model as extractor and judge), on 3 rows."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

if importlib.util.find_spec("ragas") is None:
    pytest.skip("ragas is not installed (extra 'ragas')", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
LLM = "local:qwen2.5-coder-0.5b"
SCORER = "judge:local:qwen2.5-coder-0.5b"


@pytest.fixture(scope="module")
def local_models_available() -> None:
    """Skip (with the reason) when the local 0.5B model cannot be loaded here."""
    from grapheval_plugins import GraphEval

    try:
        report = GraphEval(llm=LLM, scorer=SCORER).evaluate("The sky is blue.", "The sky is blue.")
    except (ImportError, OSError, RuntimeError, ValueError) as exc:  # MissingDependencyError, ModelLoadError, …
        pytest.skip(f"the local 0.5B model cannot load here: {type(exc).__name__}: {exc}")
    if not report.ok:
        pytest.skip(f"the local 0.5B model cannot run here: {report.explain()}")


def test_example_evaluates_three_rows_with_the_local_models(
    local_models_available: None, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("ragas_example", ROOT / "examples" / "ragas" / "evaluate_dataset.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    result = module.main(["--rows", "3", "--no-progress", "--llm", LLM, "--scorer", SCORER])

    values = [row["grapheval_faithfulness"] for row in result.scores]
    assert len(values) == 3
    assert all(not math.isnan(v) and 0.0 <= v <= 1.0 for v in values), values
    assert values[1] < values[0], values  # "completed in 1901 ... by Le Corbusier" below "completed in 1889"
    for trace in result.traces:  # every row got a verdict and a reason from the real models
        report = trace["grapheval_faithfulness"]["grapheval"]["output"]["report"]
        assert report["errors"] == [] and report["hallucinated"] in (True, False)
        assert "qwen2.5-coder-0.5b" in report["llm"].lower()
    printed = capsys.readouterr().out
    assert "{'grapheval_faithfulness':" in printed and "eiffel-bad" in printed
