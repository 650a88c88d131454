"""Peak memory of ``grapheval evaluate`` against the number of input rows: is the input streamed?

For each size, a JSONL file of small generated rows (about 100 bytes each) is checked by ``grapheval evaluate`` in
a child process, with the fake models of :mod:`grapheval_plugins.testing` (naive triples, keyword overlap; no model
loaded) minus their call recording (the test fakes keep every prompt and pair they saw, which is their job in a test
and a leak here), so the run measures the command line's own memory (reading, batching, writing, bookkeeping) and
not a model's. The child's peak resident set size comes from ``os.wait4`` (the kernel's ``ru_maxrss`` of that
child alone). With ``--compare REF``, the same runs are made with the package as it was at git commit REF (its
``grapheval_plugins`` folder extracted with ``git archive``), side by side in the same invocation.

    nice -n 10 .venv/bin/python benchmarks/memory_curve.py                        # 1k, 10k, 100k rows
    nice -n 10 .venv/bin/python benchmarks/memory_curve.py --sizes 1000,10000 --compare 3a3f10f

Writes ``benchmarks/results/memory-curve.json``.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "memory-curve.json"
LLM = "py:memory_curve:quiet_llm"
SCORER = "py:memory_curve:quiet_scorer"

app = typer.Typer(add_completion=False)


def quiet_llm() -> Any:
    """:func:`grapheval_plugins.testing.naive_triples_chat_model` without its record of every call."""
    from grapheval_plugins.testing import ScriptedChatModel, _naive_triples

    class QuietChatModel(ScriptedChatModel):
        def _answer(self, messages: list[Any]) -> str:
            return _naive_triples(list(messages))

    return QuietChatModel(model_label="naive-triples")


def quiet_scorer() -> Any:
    """:class:`grapheval_plugins.testing.KeywordScorer` without its record of every batch."""
    from grapheval_plugins.testing import KeywordScorer, keyword_support

    class QuietKeywordScorer(KeywordScorer):
        def predict_support(self, pairs: Any) -> list[float]:
            return [keyword_support(p, h) for p, h in pairs]

    return QuietKeywordScorer()


def write_rows(path: Path, n: int) -> None:
    """``n`` small rows, one JSON object a line."""
    with path.open("w", encoding="utf-8") as fh:
        for i in range(n):
            fh.write(json.dumps({"id": f"r{i}", "context": f"Item {i} is kept in box {i % 7}.",
                                 "output": f"Item {i} is kept in box {(i * 3) % 7}."}) + "\n")


def measure(tree: Path, rows: Path, out: Path, batch_rows: int) -> dict[str, Any]:
    """Run ``grapheval evaluate`` on ``rows`` with the package found in ``tree``; its peak RSS and wall time."""
    out.unlink(missing_ok=True)
    command = [sys.executable, "-m", "grapheval_plugins.cli", "evaluate", str(rows), "-o", str(out),
               "--llm", LLM, "--scorer", SCORER, "--batch-rows", str(batch_rows)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(ROOT / "benchmarks")]), "TQDM_DISABLE": "1"}
    started = time.perf_counter()
    # cwd: the output's folder, so that ``python -m`` finds the package in ``tree`` and not in the repository
    proc = subprocess.Popen(command, env=env, cwd=out.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    stderr = proc.stderr.read()  # read before waiting: a full pipe would block the child
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    if proc.returncode != 0:
        raise RuntimeError(f"evaluate failed ({proc.returncode}): {stderr.decode(errors='replace')[-2000:]}")
    with out.open("rb") as fh:
        written = sum(1 for _ in fh)
    return {"peak_rss_mib": round(usage.ru_maxrss / 1024, 1), "seconds": round(seconds, 1), "rows_written": written}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _extract(ref: str, folder: Path) -> Path:
    """The package as it was at git commit ``ref``, extracted under ``folder``."""
    archive = folder / "tree.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "-C", str(ROOT), "archive", ref, "grapheval_plugins"], stdout=fh, check=True)
    tree = folder / f"tree-{ref}"
    with tarfile.open(archive) as tar:
        tar.extractall(tree, filter="data")
    return tree


@app.command()
def main(
    sizes: Annotated[str, typer.Option(help="Comma-separated row counts.")] = "1000,10000,100000",
    compare: Annotated[Optional[str], typer.Option(help="Also measure the package at this git commit.")] = None,
    batch_rows: Annotated[int, typer.Option(help="--batch-rows of the runs.")] = 16,
    out: Annotated[Path, typer.Option(help="Where to write the JSON results.")] = OUT,
) -> None:
    """Measure peak RSS of ``grapheval evaluate`` for each size (and, with --compare, for an older commit)."""
    counts = [int(s) for s in sizes.split(",") if s.strip()]
    with tempfile.TemporaryDirectory(prefix="grapheval-memory-") as tmp:
        folder = Path(tmp)
        trees = {"this tree": ROOT}
        if compare:
            trees[f"commit {compare}"] = _extract(compare, folder)
        runs: list[dict[str, Any]] = []
        for n in counts:
            rows = folder / f"rows-{n}.jsonl"
            write_rows(rows, n)
            for label, tree in trees.items():
                result = {"code": label, "rows": n, "input_mib": round(rows.stat().st_size / 2**20, 2),
                          **measure(tree, rows, folder / "out.jsonl", batch_rows)}
                runs.append(result)
                typer.echo(json.dumps(result))
            rows.unlink()
    slopes = {}
    for label in trees:
        mine = sorted((r for r in runs if r["code"] == label), key=lambda r: r["rows"])
        if len(mine) >= 2 and mine[-1]["rows"] > mine[0]["rows"]:
            rise = mine[-1]["peak_rss_mib"] - mine[0]["peak_rss_mib"]
            slopes[label] = round(1024 * rise / ((mine[-1]["rows"] - mine[0]["rows"]) / 1000), 1)
    result = {
        "command": "benchmarks/memory_curve.py " + " ".join(sys.argv[1:]),
        "machine": {"cpu": _cpu_model(), "cores": os.cpu_count(), "python": platform.python_version(),
                    "platform": platform.platform()},
        "llm": LLM, "scorer": SCORER, "batch_rows": batch_rows,
        "runs": runs,
        "kib_per_1000_rows": slopes,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    typer.echo(f"slopes (KiB of peak RSS per 1,000 rows): {slopes}; written to {out}")


if __name__ == "__main__":
    app()
