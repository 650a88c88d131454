"""Evaluate a Ragas ``EvaluationDataset`` with GraphEval, offline, and print Ragas's result table.

    python examples/ragas/evaluate_dataset.py                    # the bundled RAG samples, the local default models
    python examples/ragas/evaluate_dataset.py --data path/to/qags_x.jsonl --rows 10
    python examples/ragas/evaluate_dataset.py --llm local:qwen2.5-coder-0.5b --scorer judge:local:qwen2.5-coder-0.5b

Rows are read from a JSON-lines file in either of two layouts:

* Ragas columns: ``{"user_input", "retrieved_contexts": [...], "response"}`` (the bundled ``samples.jsonl``);
* a hallucination benchmark: ``{"id", "context", "output", "label"}`` (label 1 = contains a hallucination), e.g. the
  SummEval / QAGS files; the context becomes one retrieved passage.

The metric extracts triples with the chat model given to it (``GraphEvalFaithfulness(llm=...)``); Ragas's own LLM
metrics take theirs from ``ragas.evaluate(llm=...)``, so pass the same model to both to share it:
``evaluate(dataset, metrics=[GraphEvalFaithfulness(llm=llm), Faithfulness()], llm=llm)``.
Nothing here calls a paid API or the network: the default models run locally (``pip install
'grapheval-plugins[ragas,offline]'``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

os.environ.setdefault("RAGAS_DO_NOT_TRACK", "true")  # Ragas's usage telemetry: off
os.environ.setdefault("HF_HUB_OFFLINE", "1")

HERE = Path(__file__).resolve().parent
BUNDLED = HERE / "samples.jsonl"
SUMMARY_QUESTION = "Summarize the article."


def load_rows(path: Path, limit: int | None = None) -> list[dict[str, Any]]:
    """Rows as Ragas sample dicts (plus ``id`` and ``label`` when the file has them)."""
    rows: list[dict[str, Any]] = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            item = json.loads(line)
            if "response" in item or "retrieved_contexts" in item:
                row = {k: item.get(k) for k in ("user_input", "retrieved_contexts", "response")}
            elif "output" in item and "context" in item:
                row = {"user_input": SUMMARY_QUESTION, "retrieved_contexts": [item["context"]], "response": item["output"]}
            else:
                raise SystemExit(f"{path}:{n}: expected Ragas columns or context/output, got keys {sorted(item)}")
            row["id"] = str(item.get("id", n))
            row["label"] = item.get("label")
            rows.append(row)
            if limit is not None and len(rows) >= limit:
                break
    return rows


def build_dataset(rows: list[dict[str, Any]]) -> Any:
    """A Ragas ``EvaluationDataset`` of single-turn samples from the rows."""
    from ragas import EvaluationDataset, SingleTurnSample

    return EvaluationDataset(
        samples=[
            SingleTurnSample(
                user_input=r.get("user_input"), retrieved_contexts=r.get("retrieved_contexts"), response=r.get("response")
            )
            for r in rows
        ]
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", type=Path, default=BUNDLED, help="JSON-lines rows (default: the bundled samples)")
    p.add_argument("--rows", type=int, default=None, help="use the first N rows only")
    p.add_argument("--llm", default=None, help="extraction chat model spec (default: the offline local model)")
    p.add_argument("--scorer", default=None, help="scorer spec (default: the offline local judge)")
    p.add_argument("--binary", action="store_true", help="score with the paper's 0/1 verdict")
    p.add_argument("--timeout", type=int, default=3600, help="seconds allowed per sample (local models queue)")
    p.add_argument("--no-progress", action="store_true", help="hide Ragas's progress bar")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> Any:
    """Run the evaluation; returns Ragas's ``EvaluationResult``."""
    args = parse_args(argv)
    from ragas import RunConfig, evaluate

    from grapheval_plugins import resolve_llm
    from grapheval_plugins.integrations.ragas import GraphEvalFaithfulness

    rows = load_rows(args.data, args.rows)
    if not rows:
        raise SystemExit(f"no rows in {args.data}")
    dataset = build_dataset(rows)

    chat_model = resolve_llm(args.llm)  # loads on first call, not here
    metric = GraphEvalFaithfulness(llm=chat_model, scorer=args.scorer, binary=args.binary)
    result = evaluate(
        dataset,
        metrics=[metric],
        run_config=RunConfig(timeout=args.timeout, max_workers=8),
        show_progress=not args.no_progress,
    )

    import pandas as pd

    table = result.to_pandas()
    table.insert(0, "id", [r["id"] for r in rows])
    if any(r["label"] is not None for r in rows):
        table["label"] = [r["label"] for r in rows]
    table["reason"] = [
        (trace.get(metric.name, {}).get("grapheval", {}).get("output", {}).get("reason") or "").replace("\n", " | ")
        for trace in result.traces
    ]
    shown = [c for c in ("id", "response", metric.name, "label", "reason") if c in table.columns]
    print(f"\n{result}")
    with pd.option_context("display.max_colwidth", 70, "display.width", 200):
        print(table[shown].to_string(index=False))
    return result


if __name__ == "__main__":
    main(sys.argv[1:])
