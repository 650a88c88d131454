"""The DeepEval example suite, reduced to the Marie Curie pair, with the real local 0.5B model (extraction and judge).

Runs the example as users do: ``deepeval test run`` (DeepEval's CLI and result files) and plain pytest, each in a
fresh process with no network and DeepEval's telemetry off.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

pytest.importorskip("deepeval")

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "deepeval" / "test_grapheval_suite.py"
MODEL = "qwen2.5-coder-0.5b"
LLM = f"local:{MODEL}"
SCORER = f"judge:local:{MODEL}"
TIMEOUT_S = 1500


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    """The subprocess environment, or a skip when ``grapheval_plugins.local`` cannot provide the 0.5B model."""
    try:
        import llama_cpp  # noqa: F401

        from grapheval_plugins.local import resolve_model_path

        path = resolve_model_path(MODEL, hub=False, show_progress=False)
    except Exception as exc:  # noqa: BLE001 - any reason the local model is unavailable means: skip
        pytest.skip(f"grapheval_plugins.local cannot load {MODEL}: {type(exc).__name__}: {exc}")
    if not Path(path).is_file():
        pytest.skip(f"grapheval_plugins.local resolved {MODEL} to a missing file: {path}")
    return {
        **os.environ,
        "GRAPHEVAL_LLM": LLM,
        "GRAPHEVAL_SCORER": SCORER,
        "DEEPEVAL_TELEMETRY_OPT_OUT": "YES",
        "DEEPEVAL_NO_INSPECT_PROMPT": "1",
        "HF_HUB_OFFLINE": "1",
    }


def _run(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout[-6000:]}\n{done.stderr[-3000:]}"
    return done


def test_example_passes_under_deepeval_test_run(env: dict[str, str], tmp_path: Path) -> None:
    deepeval_cli = Path(sys.executable).with_name("deepeval")
    _run([str(deepeval_cli), "test", "run", str(EXAMPLE), "-k", "curie", "-p", "no:cacheprovider"], tmp_path, env)
    # DeepEval writes its results under the working directory only.
    data = json.loads((tmp_path / ".deepeval" / ".latest_test_run.json").read_text())["testRunData"]
    cases = {c["name"]: c for c in data["testCases"]}
    assert sorted(cases) == ["curie-error", "curie-ok"]
    ok, error = cases["curie-ok"]["metricsData"][0], cases["curie-error"]["metricsData"][0]
    assert ok["name"] == error["name"] == "GraphEval"
    assert ok["evaluationModel"] == f"{LLM} + {SCORER}"
    assert ok["success"] is True and ok["score"] >= 0.5 and ok.get("error") is None
    assert error["success"] is False and error["score"] < 0.5
    assert "Vienna" in error["reason"] and "P(unsupported)=" in error["reason"]
    assert "Knowledge graph:" in error["verboseLogs"]


def test_example_passes_under_plain_pytest(env: dict[str, str], tmp_path: Path) -> None:
    done = _run(
        [sys.executable, "-m", "pytest", str(EXAMPLE), "-k", "curie", "-q", "-p", "no:cacheprovider"], tmp_path, env
    )
    assert "2 passed" in done.stdout
