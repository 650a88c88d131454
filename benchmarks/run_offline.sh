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
# Random subsets first (the run order is a seeded shuffle), then the rest; the default models (1.5B) first.
run qags_x 0.5b --limit 60
run qags_c 0.5b --limit 40
run qags_c 1.5b --limit 40
run qags_x 1.5b --limit 30
# Lever: accept [subject, predicate] pairs (no LLM call: re-reads the committed answers; rows of the base runs;
# rows whose graph it leaves unchanged are copied, only the fallback rows are judged again).
run qags_x 1.5b --pairs
run qags_c 1.5b --pairs
run qags_c 1.5b              # full QAGS-C (done)
# Correction study on the first 80 QAGS-C rows in file order (detection verdicts reused from the run above).
"$PY" benchmarks/bench_correct.py run qags_c --variant paper --limit 80 >> benchmarks/.cache/correct-qags_c.log 2>&1
"$PY" benchmarks/bench_correct.py run qags_c --variant direct --limit 80 >> benchmarks/.cache/correct-qags_c.log 2>&1
run qags_c 1.5b --pairs      # the pairs lever on the rest of QAGS-C
run qags_x 1.5b              # full QAGS-X (done)
run summeval 1.5b --sample 400   # the stratified 400-row sample (run as two processes: docs/benchmarks.md, "Reproducing")
run qags_c 0.5b
run qags_x 0.5b
# Lever with no model at all: keep only triples whose words occur in the output.
"$PY" benchmarks/detection.py grounded --llm local:qwen2.5-coder-1.5b --scorer judge:local:qwen2.5-coder-1.5b \
    --datasets qags_c,qags_x
