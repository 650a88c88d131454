"""A generated run report in headless Chromium: spans, graph and table render, injected script never runs."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("jinja2")

from grapheval_plugins.report import load_rows, run_html  # noqa: E402
from grapheval_plugins.types import ClaimCheck, Extraction, Report, Triple  # noqa: E402

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
REPORTS = RESULTS / "reports-qags_c-local-qwen2.5-coder-1.5b-judge-local-qwen2.5-coder-1.5b.jsonl"
INJECTED = ('Ann won gold. <script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
            '</textarea><svg onload="window.__pwned = 3"></svg>')


def hostile() -> Report:
    t = Triple(subject="Ann", relation='won "<script>window.__pwned=4</script>"', object="gold")
    return Report(
        output=INJECTED, mode="graph", threshold=0.5, hallucinated=True, score=0.1, id="hostile <b>row</b>",
        claims=[ClaimCheck(claim=t.sentence(), triple=t, p_unsupported=0.9, unsupported=True, span=(0, 13),
                           evidence="Ann won silver. <script>window.__pwned = 5</script>", evidence_index=0)],
        extraction=Extraction(triples=[t]),
    )


def write_run(tmp_path: Path, inline_rows: int = 300) -> Path:
    rows, _ = load_rows(REPORTS)
    page = tmp_path / f"run-{inline_rows}.html"
    page.write_text(run_html([hostile(), *rows], inline_rows=inline_rows), encoding="utf-8")
    return page


# wait_for_function gets arrow functions: a bare expression would be polled through eval, which the page's
# Content-Security-Policy refuses.
def check_clean(page) -> None:  # type: ignore[no-untyped-def]
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.network_requests == []  # opened without any network
    assert page.problems == []  # no script error, no blocked inline script (CSP) report


def test_run_report_renders_in_chromium_and_injected_script_does_not_run(
    browser_page, tmp_path: Path, screenshot  # type: ignore[no-untyped-def]
) -> None:
    page = browser_page
    page.goto(write_run(tmp_path).as_uri())
    page.wait_for_function("() => document.documentElement.dataset.geReady === '1'")  # our own script ran
    check_clean(page)
    # The injected markup is shown as text.
    assert "<script>window.__pwned = 1</script>" in page.inner_text("#row-1 .output")
    # The run table: 21 rows, sortable and filterable.
    assert page.locator("#ge-table tbody tr").count() == 21
    page.click("#ge-table th[data-key=score] button")
    scores = page.eval_on_selector_all("#ge-table tbody tr", "rows => rows.map(r => parseFloat(r.dataset.score))")
    assert scores == sorted(scores)
    page.fill("#ge-filter", "qags_c-01")
    assert page.locator("#ge-table tbody tr:not([hidden])").count() == 10
    assert "10 of 21 rows match" in page.inner_text("#ge-count")
    page.select_option("#ge-status", "hallucinated")
    assert page.locator("#ge-table tbody tr:not([hidden])").count() == 5
    page.fill("#ge-filter", "")
    page.select_option("#ge-status", "")
    # Highlighted spans are drawn with their colour, and focusing one shows its tooltip.
    seg = page.locator("#row-4 .seg.unsupported").first
    assert seg.is_visible()
    assert seg.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(251, 226, 208)"
    seg.focus()
    tip = page.locator("#row-4 .seg.unsupported").first.locator(".tip")
    assert tip.is_visible() and "P(unsupported)" in tip.inner_text() and "deciding passage" in tip.inner_text()
    # The knowledge graph: nodes and edges laid out with a real size.
    graph = page.locator("#row-4 .graph svg")
    box = graph.bounding_box()
    assert box is not None and box["width"] > 300 and box["height"] > 100
    assert page.locator("#row-4 .graph .edge").count() == 4
    assert page.locator("#row-4 .graph .edge.unsupported path").first.evaluate(
        "e => getComputedStyle(e).strokeDasharray") != "none"
    # The summary histogram.
    assert page.locator(".hist svg > rect").count() == 10
    screenshot(page, "report-run-summary.png")
    seg.scroll_into_view_if_needed()
    seg.focus()
    screenshot(page, "report-row-tooltip.png")
    check_clean(page)


def test_large_run_draws_a_row_view_on_demand(browser_page, tmp_path: Path, screenshot) -> None:  # type: ignore[no-untyped-def]
    page = browser_page
    page.goto(write_run(tmp_path, inline_rows=5).as_uri())
    page.wait_for_function("() => document.documentElement.dataset.geReady === '1'")
    assert page.locator("section.row").count() == 0  # no row view until one is asked for
    assert page.inner_text("#ge-count") == "21 rows"
    # Filtering unpacks the whole table from its compressed block (7 committed reports flagged + the hostile row).
    page.select_option("#ge-status", "hallucinated")
    page.wait_for_function("() => document.querySelectorAll('#ge-table tbody tr').length === 8")
    assert page.inner_text("#ge-count") == "8 of 21 rows match"
    page.select_option("#ge-status", "")
    page.wait_for_function("() => document.querySelectorAll('#ge-table tbody tr').length === 21")
    page.click("#ge-table a[href='#row-1']")
    page.wait_for_selector("#ge-viewer #row-1")
    assert "<script>window.__pwned = 1</script>" in page.inner_text("#row-1 .output")
    page.click("#ge-table a[href='#row-4']")
    page.wait_for_selector("#ge-viewer #row-4 .graph svg")
    assert page.locator("section.row").count() == 1
    assert page.locator("#row-4 .seg").count() > 0
    screenshot(page, "report-lazy-row.png")
    check_clean(page)


def test_a_large_run_shows_its_first_page_and_unpacks_the_rest_when_asked(  # type: ignore[no-untyped-def]
    browser_page, tmp_path: Path
) -> None:
    rows, _ = load_rows(REPORTS)
    reports = [r.report.model_copy(update={"id": f"{r.id}#{k}"}) for k in range(6) for r in rows]  # 120 rows
    path = tmp_path / "run-120.html"
    path.write_text(run_html([hostile(), *reports], inline_rows=50), encoding="utf-8")
    page = browser_page
    page.goto(path.as_uri())
    page.wait_for_function("() => document.documentElement.dataset.geReady === '1'")
    assert page.locator("#ge-table tbody tr").count() == 100 and page.inner_text("#ge-count") == "121 rows"
    page.click("#ge-next")
    page.wait_for_function("() => document.querySelectorAll('#ge-table tbody tr').length === 21")
    assert "rows 101–121 of 121" in page.inner_text("#ge-page")
    page.fill("#ge-filter", "hostile")
    page.wait_for_function("() => document.querySelectorAll('#ge-table tbody tr').length === 1")
    page.click("#ge-table tbody tr a")
    page.wait_for_selector("#ge-viewer #row-1 .output")
    check_clean(page)


def test_single_report_page_needs_no_script(browser_page, tmp_path: Path, screenshot) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path / "one.html"
    path.write_text(hostile().to_html(context="Before. Ann won silver. <script>window.__pwned = 5</script> After."), encoding="utf-8")
    page = browser_page
    page.goto(path.as_uri())
    assert page.locator("script").count() == 0
    assert page.locator("mark.ev[id]").count() == 1 and page.locator("mark.ev .hit").count() == 1
    assert page.locator(".graph .edge").count() == 1
    screenshot(page, "report-single.png")
    check_clean(page)


def test_correction_run_page_shows_before_after_and_needs_no_script(  # type: ignore[no-untyped-def]
    browser_page, tmp_path: Path, screenshot
) -> None:
    from grapheval_plugins.correct.types import CorrectionReport, TripleChange
    from grapheval_plugins.report import correction_run_html

    detection = hostile()
    old = detection.claims[0].triple
    assert old is not None
    new = Triple(subject="Ann", relation=old.relation, object="silver")
    fixed = CorrectionReport(
        original=INJECTED, corrected=INJECTED.replace("gold", "silver"), method="evidence", status="corrected",
        flagged=True, passed=True, detection=detection, recheck=hostile().model_copy(update={"hallucinated": False}),
        changes=[TripleChange(kind="evidence", old=old, new=new, p_unsupported=0.9, applied=True, llm_calls=1)],
        llm_calls=1, id="fixed <i>1</i>",
    )
    kept = CorrectionReport(original="Bob is in Rome.", corrected="Bob is in Rome.", method="evidence",
                            status="unflagged", flagged=False, passed=True, id="kept")
    path = tmp_path / "corrections.html"
    path.write_text(correction_run_html([fixed, kept], contexts=["Ann won silver.", None]), encoding="utf-8")
    page = browser_page
    page.goto(path.as_uri())
    assert page.locator("script").count() == 0
    assert page.locator("#ge-table tbody tr").count() == 2
    assert page.inner_text("#ge-table tbody tr:first-child del").strip() == "gold."
    assert page.inner_text("#ge-table tbody tr:first-child ins").strip() == "silver."
    assert "<script>window.__pwned = 1</script>" in page.inner_text("#row-1 .grid2")
    assert "Ann | won" in page.inner_text("#row-1 table")  # the triple that changed
    screenshot(page, "report-corrections.png")
    check_clean(page)
