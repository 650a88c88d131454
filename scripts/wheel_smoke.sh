#!/usr/bin/env bash
# Build the sdist and the wheel, check them, and install the wheel into fresh virtual environments (not editable,
# not from the checkout) to check that it works on its own and that every extra resolves on its own.
#
# Usage: bash scripts/wheel_smoke.sh
#   PYTHON       the interpreter that builds (needs `build` and `twine`: the dev extra); default .venv/bin/python
#   SMOKE_FULL   extras installed in full, each in its own fresh venv ("core" = no extra); default "core offline"
#   SMOKE_DRY    extras only resolved (`pip install --dry-run`, in a fresh venv); default "hf deepeval ragas aws"
#   SMOKE_KEEP=1 keep the work folder (printed at the end)
# In the "offline" venv the installed `grapheval` runs `--help`, `doctor` (exit 0 required; in the core venv it must
# exit 1 and name llama-cpp-python) and `demo --fast` with the model hub off; the other full venvs import what their extra provides and
# run `pip check`. torch is always installed first, pinned (TORCH_VERSION, default 2.13.0): a bare torch requirement
# resolves to a multi-GB CUDA build.
# Measured 2026-12-01 on the 2-core machine shared with other jobs (load 13-30), every extra in full
# (SMOKE_FULL="core offline hf deepeval ragas" SMOKE_DRY=aws): 37 min wall, 7.2 CPU-minutes; build + twine + contents
# 109 s, core 397 s, offline 769 s (demo --fast 410 s of it), hf 382 s, deepeval 255 s, ragas 253 s, aws (dry) 66 s.
# CI runs the defaults (full: core, offline; resolve only: the heavy hf, deepeval, ragas, aws; setup.sh already
# imports ragas, deepeval, llama_cpp and transformers in .venv).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PYTHON=${PYTHON:-$ROOT/.venv/bin/python}
TORCH_VERSION=${TORCH_VERSION:-2.13.0}
SMOKE_FULL=${SMOKE_FULL-core offline}
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
    if [ "$extra" = core ]; then
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
