#!/usr/bin/env bash
# Build the sdist and the wheel, check them, and install the wheel into fresh virtual environments (not editable,
# not from the checkout) to check that it works on its own and that every extra resolves on its own.
#
# Usage: bash scripts/wheel_smoke.sh
#   PYTHON       the interpreter that builds (needs `build` and `twine`: the dev extra); default .venv/bin/python
#   SMOKE_FULL   extras installed in full, each in its own fresh venv ("core" = no extra); default
#                "core offline deepeval,openai"
#   SMOKE_DRY    extras only resolved (`pip install --dry-run`, in a fresh venv); default "hf deepeval ragas aws"
#   SMOKE_KEEP=1 keep the work folder (printed at the end)
# In the "offline" venv the installed `grapheval` runs `--help`, `doctor` (exit 0 required; in the core venv it must
# exit 1 and name llama-cpp-python) and `demo --fast` with the model hub off; the other full venvs import what their extra provides and
# run `pip check`. The "deepeval,openai" venv (the API install: no native build) must hold neither llama-cpp-python nor
# torch; DeepEval metrics (by "openai:<model>" spec, and by DeepEval's own model name) and a LangChain Runnable
# (ChatOpenAI) score a row through a fake OpenAI-compatible endpoint on 127.0.0.1, with the tokens it counted in the
# reports' usage; and the other API installs ([ragas,openai], [anthropic], [aws]) are resolved in that venv and must
# plan neither. torch is always installed first, pinned (TORCH_VERSION, default 2.13.0): a bare torch requirement
# resolves to a multi-GB CUDA build.
# Measured 2026-12-01 on the 2-core machine shared with other jobs (load 13-30), every extra in full
# (SMOKE_FULL="core offline hf deepeval ragas" SMOKE_DRY=aws): 37 min wall, 7.2 CPU-minutes; build + twine + contents
# 109 s, core 397 s, offline 769 s (demo --fast 410 s of it), hf 382 s, deepeval 255 s, ragas 253 s, aws (dry) 66 s.
# The "deepeval,openai" venv, measured 2026-12-04 on the same machine (pip from its cache): 180 s, build and twine
# included 201 s (SMOKE_FULL=deepeval,openai SMOKE_DRY=).
# CI runs the defaults (full: core, offline; resolve only: the heavy hf, deepeval, ragas, aws; setup.sh already
# imports ragas, deepeval, llama_cpp and transformers in .venv).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
SMOKE_FULL=${SMOKE_FULL-core offline deepeval,openai}
SMOKE_DRY=${SMOKE_DRY-hf deepeval ragas aws}
export PIP_DISABLE_PIP_VERSION_CHECK=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
export DEEPEVAL_TELEMETRY_OPT_OUT=YES RAGAS_DO_NOT_TRACK=true

WORK=$(mktemp -d "${TMPDIR:-/tmp}/grapheval-wheel-smoke.XXXXXX")
if [ "${SMOKE_KEEP:-0}" != 1 ]; then trap 'rm -rf "$WORK"' EXIT; fi
START=$SECONDS
step() { printf '\n== %s (%ds)\n' "$*" "$((SECONDS - START))"; }
fail() { echo "wheel smoke: FAILED: $*" >&2; exit 1; }

step "build sdist and wheel (the wheel is built from the sdist)"
"$PYTHON" -m build --outdir "$WORK/dist" "$ROOT" >"$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; fail "build"; }
SDIST=$(ls "$WORK"/dist/*.tar.gz)
WHEEL=$(ls "$WORK"/dist/*.whl)
echo "$SDIST"; echo "$WHEEL"

step "twine check"
"$PYTHON" -m twine check --strict "$WORK"/dist/* || fail "twine check"

step "wheel and sdist contents"
"$PYTHON" - "$WHEEL" "$SDIST" "$ROOT" <<'PY' || fail "contents"
import re
import sys
import tarfile
import zipfile
from pathlib import Path

wheel, sdist, root = sys.argv[1], sys.argv[2], Path(sys.argv[3])
names = set(zipfile.ZipFile(wheel).namelist())
version = re.search(r'^__version__ = "([^"]+)"', (root / "grapheval_plugins/_version.py").read_text(), re.M)[1]
dist_info = f"grapheval_plugins-{version}.dist-info"
required = [
    "grapheval_plugins/py.typed",
    "grapheval_plugins/data/demo.jsonl",
    "grapheval_plugins/extract/prompts.py",
    "grapheval_plugins/correct/prompts.py",
    "grapheval_plugins/local/judge.py",
    f"{dist_info}/licenses/LICENSE",
    f"{dist_info}/entry_points.txt",
]
missing = [n for n in required if n not in names]
assert not missing, f"missing from the wheel: {missing}"
# every module of the source tree is in the wheel, and nothing outside the package is
sources = {str(p.relative_to(root)) for p in (root / "grapheval_plugins").rglob("*.py")}
assert not sources - names, f"modules missing from the wheel: {sorted(sources - names)}"
stray = [n for n in names if not n.startswith(("grapheval_plugins/", dist_info + "/"))]
assert not stray, f"files outside the package in the wheel: {stray}"
zf = zipfile.ZipFile(wheel)
metadata = zf.read(f"{dist_info}/METADATA").decode()
assert f"\nVersion: {version}\n" in metadata, "METADATA version differs from grapheval_plugins.__version__"
assert "License-Expression: Apache-2.0" in metadata, "no SPDX licence expression in METADATA"
entry = zf.read(f"{dist_info}/entry_points.txt").decode()
assert "grapheval = grapheval_plugins.cli:main" in entry, entry
members = tarfile.open(sdist).getnames()
for needed in ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "grapheval_plugins/data/demo.jsonl"):
    assert any(m.endswith("/" + needed) for m in members), f"missing from the sdist: {needed}"
print(f"wheel: {len(names)} files, version {version}; sdist: {len(members)} members")
PY

fresh_venv() {  # $1: name -> prints the venv path; pip up to date
    local venv="$WORK/venv-$1"
    "$PYTHON" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --upgrade pip
    echo "$venv"
}

cd "$WORK"  # never import the checkout's package: run from elsewhere
for extra in $SMOKE_FULL; do
    step "fresh venv, full install: ${extra}"
    venv=$(fresh_venv "$extra")
    spec="$WHEEL"
    [ "$extra" = core ] || spec="$WHEEL[$extra]"
    case " $extra " in *" hf "*|*" all "*) "$venv/bin/pip" install -q "torch==$TORCH_VERSION" ;; esac
    "$venv/bin/pip" install -q "$spec" || fail "pip install $spec"
    "$venv/bin/pip" check || fail "pip check ($extra)"
    where=$("$venv/bin/python" -c "import grapheval_plugins, sys; print(grapheval_plugins.__file__)")
    case "$where" in "$venv"/*) ;; *) fail "imported grapheval_plugins from $where, not from the venv" ;; esac
    "$venv/bin/python" -c "import importlib.metadata as m, grapheval_plugins as g; assert m.version('grapheval-plugins') == g.__version__"
    "$venv/bin/grapheval" --help >/dev/null || fail "grapheval --help ($extra)"
    if [ "$extra" = core ] || [ "$extra" = deepeval,openai ]; then
        # without the local extra the main job cannot run: doctor must say so (exit 1) and name what to install
        if out=$("$venv/bin/grapheval" doctor 2>&1); then echo "$out"; fail "doctor passed without the local extra"; fi
        echo "$out" | grep -q "llama-cpp-python" || { echo "$out"; fail "doctor without llama.cpp did not name it"; }
    else
        "$venv/bin/grapheval" doctor || fail "grapheval doctor ($extra)"
    fi
    case "$extra" in
        core)
            # without the local extra the demo must say what to install, not crash with a traceback
            if out=$("$venv/bin/grapheval" demo --fast 2>&1); then fail "demo ran without the local extra"; fi
            echo "$out" | grep -q "pip install" || { echo "$out"; fail "demo without llama.cpp gave no install hint"; }
            "$venv/bin/python" - <<'PY' || fail "core import"
import sys
import grapheval_plugins
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel
llm = ScriptedChatModel(responses=['<python>[["Sky", "is", "green"]]</python>'])
report = grapheval_plugins.GraphEval(llm=llm, scorer=KeywordScorer()).evaluate("The sky is blue.", "The sky is green.")
assert report.hallucinated is True
heavy = [m for m in ("torch", "transformers", "deepeval", "ragas", "llama_cpp") if m in sys.modules]
assert not heavy, heavy
print("core: GraphEval with fakes works; no heavy import")
PY
            ;;
        offline|local|all)
            GRAPHEVAL_CACHE_DIR="$WORK/model-cache" "$venv/bin/grapheval" demo --fast || fail "grapheval demo --fast"
            ;;
        hf) "$venv/bin/python" -c "import torch, transformers; from grapheval_plugins.check.hf import HHEMScorer; print('torch', torch.__version__)" ;;
        deepeval) "$venv/bin/python" -c "from grapheval_plugins.integrations.deepeval import GraphEvalMetric" ;;
        ragas) "$venv/bin/python" -c "from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness" ;;
        aws) "$venv/bin/python" -c "from grapheval_plugins.bedrock import chat_bedrock; import langchain_aws" ;;
        deepeval,openai)
            "$venv/bin/python" - <<'PY' || fail "API install (deepeval,openai)"
import importlib.util, json, os, re, sys, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

native = [m for m in ("llama_cpp", "torch", "transformers") if importlib.util.find_spec(m) is not None]
assert not native, f"the API install holds {native}"
counted, logprobs = [], []  # (prompt tokens, completion tokens) of every request; whether it asked for logprobs

class FakeOpenAI(BaseHTTPRequestHandler):  # POST /v1/chat/completions, as OpenAI-compatible servers answer it
    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        content = body["messages"][-1]["content"]  # a string, or text parts (DeepEval's GPTModel)
        user = content if isinstance(content, str) else "".join(part.get("text", "") for part in content)
        logprobs.append(bool(body.get("logprobs")))
        if "Claims:" in user:
            text = "\n".join(f"{n}: supported" for n in re.findall(r"^(\d+)\. ", user, flags=re.M))
        else:
            text = '<python>[["Paris", "is in", "France"]]</python>'
        prompt = sum(len(str(m["content"]).split()) for m in body["messages"])
        completion = len(text.split())
        counted.append((prompt, completion))
        data = json.dumps({"id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
                           "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                                        "finish_reason": "stop", "logprobs": None}],
                           "usage": {"prompt_tokens": prompt, "completion_tokens": completion,
                                     "total_tokens": prompt + completion}}).encode()
        self.send_response(200); self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data))); self.end_headers(); self.wfile.write(data)
    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
threading.Thread(target=server.serve_forever, daemon=True).start()
base = f"http://127.0.0.1:{server.server_address[1]}/v1"
os.environ.update(OPENAI_BASE_URL=base, OPENAI_API_KEY="sk-local")
try:
    from deepeval.test_case import LLMTestCase
    from langchain_openai import ChatOpenAI
    from grapheval_plugins.integrations.deepeval import GraphEvalMetric
    from grapheval_plugins.integrations.langchain import GraphEvalRunnable
    from grapheval_plugins.types import total_usage

    ctx, out = "Paris is the capital of France.", "Paris is in France."
    metric = GraphEvalMetric(llm="openai:fake-model", scorer="judge:openai:fake-model",
                             prices={"input": 0.15, "output": 0.6})
    metric.measure(LLMTestCase(input="Where is Paris?", actual_output=out, retrieval_context=[ctx]),
                   _show_indicator=False)
    assert metric.success and metric.evaluation_cost, (metric.reason, metric.evaluation_cost)
    chat = ChatOpenAI(model="fake-model", base_url=base, api_key="sk-local", max_retries=0)
    report = GraphEvalRunnable(llm=chat, scorer=chat).invoke({"context": ctx, "output": out + " Yes."})["grapheval"]
    assert report.ok, report.errors
    loaded = [m for m in ("llama_cpp", "torch", "transformers") if m in sys.modules]
    assert not loaded, loaded
    usage = total_usage([report.usage])
    # for each host: extraction, then the judge's five answers (this endpoint gives no log-probabilities)
    assert len(counted) == 12, counted
    assert (usage.calls, usage.input_tokens, usage.output_tokens) == (
        6, sum(p for p, _ in counted[6:]), sum(c for _, c in counted[6:])), (report.usage, counted)
    # DeepEval's own way: a model name; it extracts, then judges asking for log-probabilities (G-Eval's call)
    named = GraphEvalMetric(model="gpt-4o-mini")
    named.measure(LLMTestCase(input="Where is Paris?", actual_output=out, retrieval_context=[ctx]),
                  _show_indicator=False)
    assert named.success and named.evaluation_cost and logprobs[12:] == [False, True], (named.reason, logprobs)
    print(f"API install: DeepEval and LangChain scored through a fake OpenAI endpoint; cost {metric.evaluation_cost:.2e}"
          f" USD; the Runnable's row: {usage.calls} calls, {usage.input_tokens} prompt tokens")
finally:
    server.shutdown()
PY
            for api in "ragas,openai" anthropic aws; do  # resolved in this venv: what each would add
                "$venv/bin/pip" install --dry-run "$WHEEL[$api]" >"$WORK/dry-api-$api.log" 2>&1 \
                    || { tail -20 "$WORK/dry-api-$api.log"; fail "pip install --dry-run $WHEEL[$api]"; }
                would=$(grep '^Would install' "$WORK/dry-api-$api.log" || true)
                if echo "$would" | grep -qiE "llama[-_]cpp|(^| )torch-|nvidia-"; then fail "[$api] would install: $would"; fi
                echo "[$api]: no native build ($(echo "$would" | wc -w) words in pip's plan)"
            done
            ;;
    esac
    rm -rf "$venv"
done

for extra in $SMOKE_DRY; do
    step "fresh venv, resolve only: ${extra}"
    venv=$(fresh_venv "dry-$extra")
    case " $extra " in *" hf "*|*" all "*) "$venv/bin/pip" install -q "torch==$TORCH_VERSION" ;; esac
    "$venv/bin/pip" install --dry-run "$WHEEL[$extra]" >"$WORK/dry-$extra.log" 2>&1 \
        || { tail -20 "$WORK/dry-$extra.log"; fail "pip install --dry-run $WHEEL[$extra]"; }
    would=$(grep '^Would install' "$WORK/dry-$extra.log" || true)
    if echo "$would" | grep -qiE "nvidia-|cuda|(^| )torch-"; then fail "$extra would pull torch/CUDA packages: $would"; fi
    echo "$extra resolves: $(echo "$would" | wc -w) words in pip's plan"
    rm -rf "$venv"
done

step "done"
echo "wheel smoke passed in $((SECONDS - START)) s (full: ${SMOKE_FULL:-none}; resolved only: ${SMOKE_DRY:-none})"
[ "${SMOKE_KEEP:-0}" = 1 ] && echo "work folder kept: $WORK"
exit 0
