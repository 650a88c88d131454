"""HTML reports: escaping of hostile text, bad rows, large contexts, the run page, the CLI, real committed runs."""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

pytest.importorskip("jinja2")
pytest.importorskip("networkx")

from typer.testing import CliRunner  # noqa: E402

from grapheval_plugins.cli import app  # noqa: E402
from grapheval_plugins.correct.types import CorrectionReport, TripleChange  # noqa: E402
from grapheval_plugins.report import (  # noqa: E402
    JSON_MARKER,
    CorrectionRunView,
    RunView,
    correction_run_html,
    load_rows,
    render_json,
    report_from_json,
    report_html,
    run_html,
    write_run_report,
)
from grapheval_plugins.types import ClaimCheck, Extraction, Report, StageError, Triple  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"
REPORTS = RESULTS / "reports-qags_c-local-qwen2.5-coder-1.5b-judge-local-qwen2.5-coder-1.5b.jsonl"

SCRIPT = "<script>window.__pwned = 1</script>"
HOSTILE = f'Ann won {SCRIPT} gold</textarea><img src=x onerror="window.__pwned=2"> and "quoted" \'it\' & more.'
CONTEXT = f"Ann won silver in 2012. {SCRIPT} She lives in \"Paris\". </textarea><!-- comment -->"


class Page(HTMLParser):
    """Everything the tests look at in a page: elements, event-handler attributes, visible text."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.handlers: list[tuple[str, str]] = []
        self.text: list[str] = []
        self.scripts: list[dict[str, str | None]] = []
        self._in_script = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        self.handlers += [(tag, name) for name, _ in attrs if name.startswith("on")]
        if tag == "script":
            self.scripts.append(attributes)
            self._in_script = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "script":
            self._in_script = False

    def handle_data(self, data: str) -> None:
        if not self._in_script:
            self.text.append(data)

    def count(self, tag: str, **attrs: str) -> int:
        return sum(1 for t, a in self.tags if t == tag and all(attrs[k] in (a.get(k) or "").split() for k in attrs))

    @property
    def visible(self) -> str:
        return "".join(self.text)


def hostile_report(**kwargs: object) -> Report:
    bad = Triple(subject="Ann", relation=f'won "{SCRIPT}"', object="gold</textarea>")
    good = Triple(subject="Ann", relation="won", object="a medal")
    claims = [
        ClaimCheck(claim=bad.sentence(), triple=bad, p_unsupported=0.93, unsupported=True,
                   evidence=CONTEXT, evidence_index=0, span=(0, 30)),
        ClaimCheck(claim=good.sentence(), triple=good, p_unsupported=0.1, unsupported=False,
                   evidence=CONTEXT, evidence_index=0, span=None),
    ]
    data: dict[str, object] = dict(
        output=HOSTILE, mode="graph", threshold=0.5, hallucinated=True, score=0.07, claims=claims,
        extraction=Extraction(triples=[bad, good], issues=[f"repaired {SCRIPT}"]), llm="fake", scorer="kw",
        id=f'row "1" {SCRIPT}',
    )
    data.update(kwargs)
    return Report.model_validate(data)


def assert_inert(page: Page, allowed_scripts: int = 0) -> None:
    executable = [s for s in page.scripts if s.get("type") in (None, "", "text/javascript", "module")]
    assert len(executable) == allowed_scripts
    assert page.handlers == []
    assert page.count("textarea") == 0 and page.count("img") == 0


def test_hostile_text_is_escaped_everywhere_and_shown_as_text() -> None:
    html = report_html(hostile_report(), context=CONTEXT)
    page = Page(html)
    assert_inert(page)
    visible = page.visible
    assert SCRIPT in visible and "</textarea>" in visible and '"quoted"' in visible and "onerror=" in visible
    assert "<script>" not in html and "</textarea>" not in html
    # The highlighted stretches and the graph are there: one unsupported, one supported claim.
    assert page.count("span", **{"class": "unsupported"}) >= 1
    assert page.count("g", **{"class": "edge"}) == 2
    assert page.count("mark", **{"class": "ev"}) >= 1
    # The attribute carrying the row id is quoted and escaped, so the quotes in the id cannot end it.
    assert '<section class="row" id="row"' in html


def test_a_claim_without_a_recorded_span_is_located_and_says_so() -> None:
    html = report_html(hostile_report())
    assert "span located when the report was drawn" in html
    assert "The context itself is not part of this report" in html  # no context given: the passages stand alone


def test_notebook_fragment_has_scoped_style_and_no_document() -> None:
    fragment = hostile_report()._repr_html_()
    assert fragment.startswith('<div class="ge-report"><style>') and "<html" not in fragment
    assert_inert(Page(fragment))
    assert hostile_report().to_html().startswith("<!DOCTYPE html>")


def test_a_100_kb_context_renders_with_its_deciding_passage_and_an_elision() -> None:
    passage = "The deciding passage: Ann won silver."
    context = "filler words " * 4000 + passage + " more filler" * 4000
    assert len(context) > 100_000
    t = Triple(subject="Ann", relation="won", object="gold")
    report = Report(output="Ann won gold.", mode="graph", threshold=0.5, hallucinated=True, score=0.2,
                    claims=[ClaimCheck(claim=t.sentence(), triple=t, p_unsupported=0.8, unsupported=True,
                                       evidence=passage, evidence_index=7, span=(0, 12))])
    html = report_html(report, context=context)
    assert len(html) < 60_000
    page = Page(html)
    assert passage in page.visible
    assert re.search(r"\[… \d+ characters without a deciding passage not shown …\]", page.visible)
    assert f"{len(context)} characters" in page.visible


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        (Report(output="Nothing to see.", mode="graph", threshold=0.5, hallucinated=False, score=1.0,
                extraction=Extraction()), "No claim was checked"),
        (Report(output="It failed.", mode="graph", threshold=0.5,
                errors=[StageError(stage="extract", type="ExtractionError", message="<b>the model is down</b>")]),
         "extract stage failed: ExtractionError: <b>the model is down</b>"),
        (Report(output="One claim.", mode="graph", threshold=0.5, hallucinated=False, score=0.9,
                claims=[ClaimCheck(claim="One claim.", p_unsupported=0.1, unsupported=False)],
                extraction=Extraction(fallback=True)), "the whole output was checked as one claim"),
    ],
    ids=["no-triples", "error", "fallback"],
)
def test_rows_with_a_problem_say_so(report: Report, expected: str) -> None:
    page = Page(report_html(report))
    assert expected in page.visible
    assert_inert(page)


def test_correction_report_shows_original_corrected_diff_and_changed_claims() -> None:
    detection = hostile_report()
    bad = detection.claims[0].triple
    assert bad is not None
    new = Triple(subject="Ann", relation="won", object="silver")
    result = CorrectionReport(
        original=HOSTILE, corrected=HOSTILE.replace("gold", "silver"), method="graph", status="corrected",
        flagged=True, passed=True, detection=detection, recheck=hostile_report(hallucinated=False, score=0.9),
        changes=[TripleChange(old=bad, new=new, p_unsupported=0.93, applied=True, llm_calls=2)], id="c1",
    )
    page = Page(result.to_html(context=CONTEXT))
    assert_inert(page)
    assert page.count("del") >= 1 and page.count("ins") >= 1
    assert "✎ corrected to Ann | won | silver" in page.visible
    assert "Re-check of the corrected output" in page.visible
    assert result._repr_html_().startswith('<div class="ge-report">')


def hostile_correction(**kwargs: object) -> CorrectionReport:
    detection = hostile_report()
    bad = detection.claims[0].triple
    assert bad is not None
    data: dict[str, object] = dict(
        original=HOSTILE, corrected=HOSTILE.replace("gold", "silver"), method="evidence", status="corrected",
        flagged=True, passed=True, detection=detection, recheck=hostile_report(hallucinated=False, score=0.9),
        changes=[TripleChange(kind="evidence", old=bad, new=Triple(subject="Ann", relation="won", object="silver"),
                              p_unsupported=0.93, applied=True, llm_calls=1),
                 TripleChange(kind="evidence", old=detection.claims[1].triple, reason="step 1: no triple",
                              llm_calls=2)],
        llm_calls=3, id="c1",
    )
    data.update(kwargs)
    return CorrectionReport.model_validate(data)


def test_correction_run_page_lists_rows_with_their_diff_and_shows_each_correction() -> None:
    unflagged = CorrectionReport(original="Bob is in Rome.", corrected="Bob is in Rome.", method="evidence",
                                 status="unflagged", flagged=False, passed=True, id="c2")
    html = correction_run_html([hostile_correction(), unflagged], contexts={"c1": CONTEXT}, title="Fixes")
    page = Page(html)
    assert_inert(page)
    assert page.count("section", **{"class": "row"}) == 2
    table = html[html.index('id="ge-table"'):html.index("</table>", html.index('id="ge-table"'))]
    assert table.count("<tr data-n=") == 2
    assert "<del>gold" in table and "<ins>silver" in table and "no change" in table
    assert "GraphCorrect (evidence)" in page.visible
    assert "✎ corrected to Ann | won | silver" in page.visible  # the changed triple, marked on the detection
    assert "1 / 2" in page.visible  # changes applied / attempted
    assert "Ann won silver in 2012." in page.visible  # the context, by id


def test_a_file_of_correction_reports_gives_the_correction_run_page(tmp_path: Path) -> None:
    results = write_lines(tmp_path / "fixes.jsonl", [hostile_correction().model_dump_json(), "{broken",
                                                      hostile_correction(id="c2", status="unchanged",
                                                                         corrected=HOSTILE, passed=False)
                                                      .model_dump_json()])
    out = tmp_path / "fixes.html"
    run = write_run_report(results, out)
    assert isinstance(run, CorrectionRunView)
    assert (run.total, run.flagged, run.changed, run.passed, run.unreadable) == (3, 2, 1, 1, 1)
    assert run.statuses == [("corrected", 1), ("unchanged", 1)]
    page = Page(out.read_text(encoding="utf-8"))
    assert_inert(page)
    assert "line 2" in page.visible and page.count("section", **{"class": "row"}) == 2
    result = CliRunner().invoke(app, ["report", str(results), "-o", str(tmp_path / "again.html")])
    assert result.exit_code == 0, result.output
    assert "HTML report of 3 correction(s) (2 flagged, 1 changed, 1 pass the re-check" in result.output


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_run_page_from_bad_jsonl_renders_every_line_with_its_problem(tmp_path: Path) -> None:
    good = hostile_report(id="r1").model_dump_json()
    no_output = json.dumps({"id": "r2", "mode": "graph", "threshold": 0.5})
    no_mode = json.dumps({"id": "r3", "output": "Output <i>kept</i>.", "threshold": 0.5})
    study_row = json.dumps({"id": "r4", "p_graph": 0.2, "triples": [], "render": "concat"})  # not a report
    results = write_lines(tmp_path / "out.jsonl", [good, "{not json", "[1, 2]", no_output, no_mode, study_row])
    out = tmp_path / "run.html"
    run = write_run_report(results, out)
    assert run.total == 6 and run.unreadable == 5 and run.flagged == 1
    html = out.read_text(encoding="utf-8")
    page = Page(html)
    assert_inert(page, allowed_scripts=1)
    visible = page.visible
    assert "not valid JSON: line 2" in visible and "not a JSON object: line 3" in visible
    assert "missing field: output" in visible and "missing field: mode" in visible
    assert "Output <i>kept</i>." in visible  # what could be read is shown, escaped
    assert page.count("tr", **{"class": "unsupported"}) >= 1
    kinds = {k.label: k.count for k in run.error_kinds}
    assert kinds["unreadable: missing field"] == 3 and kinds["unreadable: not valid JSON"] == 1


def test_run_page_script_is_the_only_one_and_its_hash_is_in_the_policy(tmp_path: Path) -> None:
    html = run_html([hostile_report(id=f"r{i}") for i in range(3)])
    body = re.search(r"<script>(.*?)</script>\s*</body>", html, re.S)
    assert body is not None
    digest = base64.b64encode(hashlib.sha256(body.group(1).encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in html
    assert "default-src 'none'" in html


def test_large_runs_keep_row_views_compressed_in_inert_blocks(tmp_path: Path) -> None:
    reports = [hostile_report(id=f"r{i}") for i in range(5)]
    html = run_html(reports, inline_rows=2)
    page = Page(html)
    assert_inert(page, allowed_scripts=1)
    assert page.count("section", **{"class": "row"}) == 0
    blocks = re.findall(r'<script type="application/x-grapheval-rows\+gzip"[^>]*>(.*?)</script>', html, re.S)
    assert len(blocks) == 1 and re.fullmatch(r"[A-Za-z0-9+/=]+", blocks[0])
    views = json.loads(gzip.decompress(base64.b64decode(blocks[0])))
    assert len(views) == 5
    for view in views:
        assert "<script" not in view.lower() and "&lt;script&gt;" in view
        assert_inert(Page(view))
        assert Page(view).count("section", **{"class": "row"}) == 1
    assert "needs JavaScript" in html  # the noscript note


def test_inputs_add_contexts_by_id(tmp_path: Path) -> None:
    inputs = write_lines(tmp_path / "in.jsonl", [
        json.dumps({"id": "d1", "context": "Ann won silver.", "output": "Ann won gold."}),
    ])
    row = hostile_report(id="d1").model_dump_json()
    results = write_lines(tmp_path / "out.jsonl", [row, row])
    run = write_run_report(results, tmp_path / "run.html", inputs=inputs)
    assert run.total == 1 and run.flagged == 1  # the repeated id is skipped, and said so
    assert run.rows[0].context is not None and run.rows[0].context_chars == len("Ann won silver.")
    assert "1 row(s) skipped" in (tmp_path / "run.html").read_text(encoding="utf-8")


@pytest.mark.parametrize("name, header, record", [
    ("in.csv", "context;output", '"Ann won silver.\nIn 2012.";Ann won gold.'),  # sniffed; id: the record's line 2
    ("in.tsv", "context\toutput", "Ann won silver.\tAnn won gold."),
])
def test_csv_inputs_are_read_as_evaluate_reads_them(tmp_path: Path, name: str, header: str, record: str) -> None:
    inputs = write_lines(tmp_path / name, [header, record])
    row = hostile_report(id="2").model_dump_json()
    run = write_run_report(write_lines(tmp_path / "out.jsonl", [row]), tmp_path / "run.html", inputs=inputs)
    assert isinstance(run, RunView) and run.rows[0].status == "hallucinated"
    assert run.rows[0].context_chars > 0


def test_render_json_takes_what_the_adapters_carry() -> None:
    report = hostile_report()
    dumped = report.model_dump(mode="json")
    logs = f"Score: 0.07\nReason: something\n{JSON_MARKER} {report.model_dump_json()}\n"
    for data in (report.model_dump_json(), dumped, {"score": 0.07, "report": dumped}, logs, logs.encode()):
        assert report_from_json(data) == report
    assert render_json(logs) == report_html(report)
    with pytest.raises(ValueError, match="no JSON object"):
        report_from_json("no report here")


def test_committed_qags_c_reports_render_with_spans_graphs_and_passages() -> None:
    rows, notes = load_rows(REPORTS)
    assert len(rows) == 20 and notes == [] and all(r.report is not None for r in rows)
    html = run_html(rows)
    page = Page(html)
    assert_inert(page, allowed_scripts=1)
    assert page.count("section", **{"class": "row"}) == 20
    # 16 rows have a graph; 4 were checked as one claim (3 fallbacks, 1 cached empty graph), and say so.
    assert page.count("figure", **{"class": "graph"}) == 16 and page.count("svg") == 17  # + the histogram
    assert page.visible.count("the whole output was checked as one claim") >= 4
    assert page.count("span", **{"class": "seg"}) > 40


def test_cli_report_of_the_committed_qags_c_reports(tmp_path: Path) -> None:
    from shared_files import bench_data

    out = tmp_path / "qags_c-20.html"
    result = CliRunner().invoke(app, ["report", str(REPORTS), "--inputs", str(bench_data("qags_c.jsonl")), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "HTML report of 20 row(s)" in result.output
    page = Page(out.read_text(encoding="utf-8"))
    assert page.count("section", **{"class": "row"}) == 20
    assert page.count("mark", **{"class": "ev"}) >= 20  # the 20 full reports have their passage marked


def test_cli_evaluate_writes_the_html_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from grapheval_plugins import pipeline
    from grapheval_plugins.testing import KeywordScorer, naive_triples_chat_model

    original = pipeline.GraphEval.__init__

    def offline_init(self, *args, **kwargs):  # the CLI's engine, with offline fakes instead of local models
        kwargs.update(llm=naive_triples_chat_model(), scorer=KeywordScorer())
        original(self, *args, **kwargs)

    monkeypatch.setattr(pipeline.GraphEval, "__init__", offline_init)
    rows = write_lines(tmp_path / "in.jsonl", [
        json.dumps({"id": "a", "context": "Ann won silver.", "output": f"Ann won gold. {SCRIPT}"}),
        json.dumps({"id": "b", "context": "Bob lives in Rome.", "output": "Bob lives in Rome."}),
    ])
    out, html = tmp_path / "out.jsonl", tmp_path / "run.html"
    result = CliRunner().invoke(app, ["evaluate", str(rows), "-o", str(out), "--report", str(html),
                                      "--cache", str(tmp_path / "kg.sqlite")])
    assert result.exit_code == 0, result.output
    page = Page(html.read_text(encoding="utf-8"))
    assert_inert(page, allowed_scripts=1)
    assert page.count("section", **{"class": "row"}) == 2
    assert "Ann won silver." in page.visible  # the context came from the input rows


def test_importing_types_and_cli_does_not_load_the_report_stack() -> None:
    code = ("import sys, grapheval_plugins, grapheval_plugins.cli, grapheval_plugins.correct.types;"
            "print([m for m in ('jinja2', 'networkx', 'numpy', 'grapheval_plugins.report') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
