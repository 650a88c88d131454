#!/usr/bin/env bash
# Create .venv and install grapheval-plugins with every extra, the offline model weights and the dev tools.
# Usage: bash scripts/setup.sh            (PYTHON=python3.11 VENV=.venv to override)
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}

[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
# torch first, pinned: a bare 'torch' requirement resolved in a fresh virtualenv pulls a multi-GB CUDA build.
"$VENV/bin/python" -m pip install -q "torch==${TORCH_VERSION:-2.13.0}"
# llama-cpp-python builds from source the first time (about 12 minutes on 2 cores); pip caches the wheel.
"$VENV/bin/python" -m pip install -q -c scripts/constraints.txt -e ".[all,dev,docs]"
"$VENV/bin/python" -c "import grapheval_plugins, ragas, deepeval, llama_cpp, transformers; print('grapheval-plugins', grapheval_plugins.__version__, 'installed')"
# What the main job will run on (CPU features, weights, one real decode in a child process); a problem here is
# reported, not fatal: `grapheval doctor` says what to change.
"$VENV/bin/grapheval" doctor --no-verify || echo "setup: grapheval doctor reported a problem (see above)"
