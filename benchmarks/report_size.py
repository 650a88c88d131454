"""Size and load time of the HTML run report for runs of 50 to 10 000 rows, in headless Chromium.

Rows are the committed QAGS-C reports (20 full reports with spans and deciding passages) and every committed
detection-study row of the 1.5B runs on SummEval, QAGS-C and QAGS-X rebuilt into a report (about 890 distinct rows),
repeated with fresh ids up to the run size, each with its context when the data sets are found. For each size the page is written,
then opened in Debian's ``chromium`` (driven by playwright, a new profile per load, no network) and timed with the
Navigation Timing API; the median of ``--repeats`` loads is kept. Also timed: drawing a row view on demand (large
runs keep row views in inert blocks) and sorting the table by score.

    .venv/bin/python benchmarks/report_size.py                      # 50, 300, 1000, 10000 rows
    .venv/bin/python benchmarks/report_size.py --sizes 10000 --repeats 5
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))  # the harness beside this script

import harness as bench  # noqa: E402

from grapheval_plugins.report import DEFAULT_INLINE_ROWS, load_rows, run_html  # noqa: E402
from grapheval_plugins.types import Report  # noqa: E402

REPORTS = ROOT / "benchmarks" / "results" / "reports-qags_c-local-qwen2.5-coder-1.5b-judge-local-qwen2.5-coder-1.5b.jsonl"
OUT = ROOT / "benchmarks" / "results" / "report-size.json"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run", "--disable-sync", "--disable-dev-shm-usage"]

app = typer.Typer(add_completion=False)


def _distinct_reports() -> tuple[list[Report], dict[str, str]]:
    """The 20 committed full reports, then every detection-study row of the three sets rebuilt into a report (spans
    located when drawn, no deciding passage), each with its context when the data sets are found."""
    reports = [r.report for r in load_rows(REPORTS)[0]]
    contexts: dict[str, str] = {}
    for name in bench.DATASETS:
        try:
            data = {r["id"]: r for r in bench.load_dataset(name)}
        except Exception:  # noqa: BLE001  (the data sets are optional: without them the passages stand alone)
            continue
        contexts.update({k: r["context"] for k, r in data.items()})
        path = ROOT / "benchmarks" / "results" / (
            f"detect-{name}-local-qwen2.5-coder-1.5b-judge-local-qwen2.5-coder-1.5b-examples-first-concat.jsonl")
        if path.exists():
            reports += [bench.report_from_detection_row(row, data[row["id"]]["output"])
                        for row in bench.load_results(path) if not row.get("error") and row["id"] in data]
    return reports, contexts


def _rows(n: int) -> tuple[list[Report], list[str | None]]:
    base, contexts = _distinct_reports()
    reports, ctx = [], []
    for i in range(n):
        src = base[i % len(base)]
        reports.append(src.model_copy(update={"id": f"{src.id}#{i // len(base)}"}))
        ctx.append(contexts.get(str(src.id)))
    return reports, ctx


def _load_once(chromium: str, page_path: Path, lazy_row: str | None) -> dict[str, float]:
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as profile, sync_playwright() as pw:
        context = pw.chromium.launch_persistent_context(profile, executable_path=chromium, args=FLAGS, headless=True,
                                                        viewport={"width": 1280, "height": 1000})
        context.route("**/*", lambda r: r.continue_() if r.request.url.startswith("file:") else r.abort())
        page = context.new_page()
        page.goto(page_path.as_uri(), wait_until="load")
        page.wait_for_function("() => document.documentElement.dataset.geReady === '1'")
        timing = page.evaluate("""() => {
            const n = performance.getEntriesByType('navigation')[0];
            const paint = performance.getEntriesByName('first-contentful-paint')[0];
            return {dom_content_loaded_ms: n.domContentLoadedEventEnd, load_ms: n.loadEventEnd,
                    ready_ms: Number(document.documentElement.dataset.geReadyMs),
                    first_contentful_paint_ms: paint ? paint.startTime : null,
                    nodes: document.getElementsByTagName('*').length};
        }""")
        started = time.perf_counter()
        page.click("#ge-table th[data-key=score] button")
        page.wait_for_function("() => document.querySelector('#ge-table th[data-key=score]').getAttribute('aria-sort')")
        timing["sort_ms"] = (time.perf_counter() - started) * 1000
        if lazy_row:
            started = time.perf_counter()
            page.evaluate(f"location.hash = '#{lazy_row}'")
            page.wait_for_selector(f"#ge-viewer #{lazy_row} .output")
            timing["open_row_ms"] = (time.perf_counter() - started) * 1000
        context.close()
    return timing


@app.command()
def main(
    sizes: Annotated[str, typer.Option(help="Comma-separated run sizes.")] = "50,300,1000,10000",
    repeats: Annotated[int, typer.Option(help="Browser loads per size (the median is kept).")] = 3,
    chromium: Annotated[str, typer.Option(help="The Chromium binary.")] = "/usr/bin/chromium",
    keep: Annotated[Path, typer.Option(help="Folder for the generated pages.")] = ROOT / "benchmarks" / ".cache",
    out: Annotated[Path, typer.Option(help="Where to write the figures (JSON).")] = OUT,
    inline_rows: Annotated[int, typer.Option(help="Row views in the page up to this many rows.")] = DEFAULT_INLINE_ROWS,
) -> None:
    keep.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    for n in (int(s) for s in sizes.split(",")):
        reports, contexts = _rows(n)
        started = time.perf_counter()
        html = run_html(reports, contexts=contexts, title=f"GraphEval run ({n} rows)", inline_rows=inline_rows)
        render_s = time.perf_counter() - started
        path = keep / f"report-{n}{'-lazy' if n > inline_rows else ''}.html"
        path.write_text(html, encoding="utf-8")
        lazy = n > inline_rows
        loads = [_load_once(chromium, path, f"row-{n // 2}" if lazy else None) for _ in range(repeats)]
        row: dict[str, Any] = {"rows": n, "lazy_row_views": lazy, "bytes": path.stat().st_size,
                               "render_s": round(render_s, 2)}
        for key in loads[0]:
            values = [x[key] for x in loads if x.get(key) is not None]
            row[key] = round(statistics.median(values), 1) if values else None
        results.append(row)
        typer.echo(json.dumps(row))
    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())
    import subprocess

    version = subprocess.run([chromium, "--version"], capture_output=True, text=True).stdout.strip()
    summary = {"machine": f"{platform.system()} {platform.machine()}, {cpu}, {os.cpu_count()} cores",
               "load_average_1_5_15": [round(x, 1) for x in os.getloadavg()], "browser": version,
               "repeats": repeats, "results": results}
    out.write_text(json.dumps(summary, indent=1) + "\n", encoding="utf-8")
    base = results[0]
    typer.echo("\n| rows | row views | page size | ready (ms) | load (ms) | first paint (ms) | "
               "DOM nodes | sort (ms) | open a row (ms) | write (s) | size × | ready × |")
    typer.echo("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in results:
        opened = "-" if r.get("open_row_ms") is None else f"{r['open_row_ms']:.0f}"
        typer.echo(
            f"| {r['rows']} | {'on demand' if r['lazy_row_views'] else 'in the page'} | {r['bytes'] / 1e6:.2f} MB | "
            f"{r['ready_ms']:.0f} | {r['load_ms']:.0f} | {r['first_contentful_paint_ms'] or 0:.0f} | "
            f"{r['nodes']:.0f} | {r['sort_ms']:.0f} | {opened} | "
            f"{r['render_s']:.1f} | {r['bytes'] / base['bytes']:.1f} | {r['ready_ms'] / base['ready_ms']:.1f} |"
        )


if __name__ == "__main__":
    app()
