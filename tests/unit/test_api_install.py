"""An install with API extras only: the DeepEval, Ragas and LangChain paths with an API model never import
llama_cpp, torch or transformers, and asking for the offline default without its extra names the extra to install.

Run in a child interpreter in which those packages cannot be imported (``sys.modules[name] = None``), as in a fresh
``pip install "grapheval-plugins[deepeval,ragas,openai]"``; scripts/wheel_smoke.sh checks the same from the wheel.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = r'''
import os, re, sys
for name in ("llama_cpp", "torch", "transformers"):
    sys.modules[name] = None  # as if not installed
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

class ApiModel(BaseChatModel):
    """Stands for a provider's chat model: answers prompt A and the judge, with usage_metadata."""
    @property
    def _llm_type(self):
        return "api-model"
    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        user = str(messages[-1].content)
        if "Claims:" in user:
            text = "\n".join(f"{n}: supported" for n in re.findall(r"^(\d+)\. ", user, flags=re.M))
        else:
            text = '<python>[["Paris", "is in", "France"]]</python>'
        usage = {"input_tokens": 40, "output_tokens": 5, "total_tokens": 45}
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text, usage_metadata=usage))])

llm, ctx, out = ApiModel(), "Paris is in France.", "Paris is in France."
from grapheval_plugins import GraphEval
report = GraphEval(llm=llm, scorer=llm).evaluate(ctx, out)
assert report.ok and report.usage["extract"].calls == 1 and report.usage["check"].input_tokens == 40, report
from grapheval_plugins.integrations.langchain import GraphEvalRunnable
assert GraphEvalRunnable(llm=llm, scorer=llm).invoke({"context": ctx, "output": out})["grapheval"].ok
from deepeval.test_case import LLMTestCase
from grapheval_plugins.integrations.deepeval import GraphEvalMetric
metric = GraphEvalMetric(llm=llm, scorer=llm, prices={"input": 1.0, "output": 2.0})
metric.measure(LLMTestCase(input="q", actual_output=out, retrieval_context=[ctx]), _show_indicator=False)
assert metric.success and metric.evaluation_cost == 2 * (40 + 10) / 1e6, metric.evaluation_cost
from ragas.dataset_schema import SingleTurnSample
from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness
sample = SingleTurnSample(user_input="q", response=out, retrieved_contexts=[ctx])
assert GraphEvalFaithfulness(llm=llm, scorer=llm).single_turn_score(sample) > 0.5
heavy = [name for name in ("llama_cpp", "torch", "transformers") if sys.modules.get(name) is not None]
assert not heavy, heavy
from grapheval_plugins.exceptions import MissingDependencyError
try:
    GraphEval().evaluate(ctx, out)
except MissingDependencyError as exc:
    print("HINT:", exc)
'''


def test_api_model_paths_import_no_native_package_and_the_default_says_what_to_install(tmp_path: Path) -> None:
    pytest.importorskip("deepeval")
    pytest.importorskip("ragas")
    env = {**os.environ, "DEEPEVAL_TELEMETRY_OPT_OUT": "YES", "RAGAS_DO_NOT_TRACK": "true",
           "DEEPEVAL_DISABLE_DOTENV": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    hint = next(line for line in done.stdout.splitlines() if line.startswith("HINT:"))
    assert "pip install 'grapheval-plugins[offline]'" in hint and "openai" in hint, hint
