#!/usr/bin/env bash
# The detection runs reported in docs/benchmarks.md, one process at a time.
# Resumable: stop it at any point and start it again; rows already in the result files are skipped, and the run
# order is a seeded shuffle, so `--limit N` scores a random subset that later runs extend.
# Logs: benchmarks/.cache/run-*.log (git-ignored).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
mkdir -p benchmarks/.cache
run() {  # data set, model size, extra options
  local ds=$1 size=$2; shift 2
  "$PY" benchmarks/detection.py run "$ds" --llm "local:qwen2.5-coder-$size" \
    --scorer "judge:local:qwen2.5-coder-$size" "$@" >> "benchmarks/.cache/run-$ds-$size.log" 2>&1
}
# First random subsets (the run order is a seeded shuffle), then the rest; the default models (1.5B) before 0.5B.
run qags_x 0.5b --limit 60
run qags_c 0.5b --limit 40
run qags_c 1.5b --limit 40
run qags_x 1.5b --limit 30
# Lever: accept [subject, predicate] pairs (no LLM call: re-reads the committed answers; rows of the base runs).
run qags_x 1.5b --pairs
run qags_c 1.5b --pairs
run qags_c 1.5b
run qags_x 1.5b
run qags_c 0.5b
run qags_x 0.5b
run summeval 1.5b --sample 400
