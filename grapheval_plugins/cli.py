"""The ``grapheval`` command line (docs/cli.md)."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional

import typer
from rich.console import Console
from rich.table import Column, Table
from typer.core import TyperGroup

from .exceptions import GraphEvalError
from .jsonl import JsonlStore, read_rows, refuse_same_files

if TYPE_CHECKING:
    from .types import StageUsage

console = Console(stderr=True)


class _Commands(TyperGroup):
    """Every command: an error of the package is printed and exits with code 2."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except GraphEvalError as exc:
            console.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(code=2) from exc


app = typer.Typer(
    cls=_Commands,
    name="grapheval",
    help="GraphEval: knowledge-graph based hallucination detection and correction for LLM outputs.",
    no_args_is_help=True,
    add_completion=False,
)


def _failed(row: Any) -> bool:
    """A written report without a verdict for a reason other than its input: a resumed run does its row again."""
    errors = row.get("errors") or []
    return row.get("ok") is False and not any(isinstance(e, dict) and e.get("stage") == "input" for e in errors)


class _Pending:
    """The rows of INPUT still to process, streamed; unreadable records go to ``problems`` (docs/cli.md)."""

    def __init__(self, input: Path, output: Path, id_field: str, limit: int | None, resume: bool, *,
                 delimiter: str | None = None, stop_on_error: bool = False, report_field: str = "hallucinated") -> None:
        if delimiter is not None:
            delimiter = "\t" if delimiter.lower() in ("tab", "\\t") else delimiter
            if len(delimiter) != 1:
                raise typer.BadParameter(f"the CSV delimiter must be one character or 'tab', got {delimiter!r}")

        def key(row: Any) -> str | None:  # a line of OUTPUT is this command's report (with ``report_field``)
            return None if row.get("id") is None or report_field not in row else str(row["id"])

        with input.open("rb") as fh:  # readable before the output is looked at; its lines for a progress bar
            lines = None if input.suffix.lower() in (".csv", ".tsv") else sum(
                chunk.count(b"\n") for chunk in iter(lambda: fh.read(1 << 20), b""))
        self.store = JsonlStore(output, key=key, keep_rows=False, replace=not resume, redo=_failed)
        self.input, self.id_field, self.limit, self.delimiter = input, id_field, limit, delimiter
        self.stop_on_error, self.resume = stop_on_error, resume
        self.done = self.store.ids()
        self.skipped = len(self.done)
        left = None if lines is None else max(lines - self.skipped, 0)  # about: JSONL lines not yet done
        self.estimate = left if left is None or limit is None else min(left, max(limit - self.skipped, 0))
        self.unreadable = 0
        self.problems: list[str] = []
        self.stopped: str | None = None

    def __iter__(self) -> Iterator[dict[str, Any]]:
        seen: set[str] = set()
        taken = len(self.done)
        if self.limit is not None and taken >= self.limit:
            return
        for number, row, error in read_rows(self.input, delimiter=self.delimiter):
            rid = "" if row is None else str(row.setdefault(self.id_field, str(number)))
            if row is not None and rid in seen:
                error = f"duplicate id {rid!r} (skipped)"
            if error is not None or row is None:  # skipped and said, or (--stop-on-error) the run stops here
                self.unreadable += 1
                self.problems.append(f"line {number}: {error or 'unreadable'}")
                if self.stop_on_error:
                    self.stopped = self.problems[-1]
                    return
                continue
            row[self.id_field] = rid
            seen.add(rid)
            if rid in self.done:
                continue
            yield row
            taken += 1
            if self.limit is not None and taken >= self.limit:
                return


def _process_in_batches(
    rows: _Pending,
    *,
    desc: str,
    batch_rows: int,
    process: Callable[[list[dict[str, Any]]], Sequence[Any]],
    counts: dict[str, Any],
    failed: Callable[[Any], bool],
    tally: Callable[[Any], None],
    usage_of: Callable[[Any], list[Any]],
) -> StageUsage:
    """Process batches of rows, append each result to OUTPUT and count it; the chat-model usage of the results."""
    from ._progress import progress_bar
    from .types import StageUsage, total_usage

    usage, pending = StageUsage(), iter(rows)
    with rows.store as out, progress_bar(rows.estimate, desc, leave=True) as bar:
        while batch := list(itertools.islice(pending, max(batch_rows, 1))):
            for row, result in zip(batch, process(batch)):
                data = result.model_dump(mode="json")
                data["id"] = row[rows.id_field]
                out.append(data)
                usage = usage + total_usage(usage_of(result))
                counts["rows"] += 1
                if failed(result):
                    counts["errors"] += 1
                    rows.problems.append(f"row {data['id']}: " + "; ".join(e.message for e in result.errors))
                else:
                    tally(result)
            bar.update(len(batch))
        if rows.stopped is not None and out.replace:
            out.discard()  # --no-resume: a run stopped at a bad record is not complete; the old output stays
    return usage


def _renamed_option(value: str, old: str | None, flag: str, default: str) -> str:
    """An option's value, or that of ``--method``, its deprecated old name (warns)."""
    if old is None:
        return value
    console.print(f"[yellow]--method is deprecated: use {flag}[/yellow]")
    if value != default and value != old:
        raise typer.BadParameter(f"give {flag} (--method is its deprecated old name), not both")
    return old


_Prices = Annotated[Optional[tuple[float, float]], typer.Option(
    metavar="PROMPT COMPLETION",
    help="US dollars per million prompt and completion tokens: the summary shows the run's cost where the models "
         "report none.")]
_Threshold = Annotated[float, typer.Option(
    "--hallucination-threshold", "--threshold",
    help="The P(unsupported) above which a claim is unsupported and P(hallucination) above which a row is "
         "flagged (--threshold: the same, older name).")]


def _finish(
    title: str, counts: dict[str, Any], rows: _Pending, written: str, usage: StageUsage,
    prices: tuple[float, float] | None, report: Path | None, **fields: Any,
) -> None:
    """Print the run's summary table (docs/cli.md) and problems; then the exit of a stopped run, and the ``--report``."""
    from .types import usage_cost

    counts["skipped (already done)"] = rows.skipped
    counts["skipped (unreadable)"] = rows.unreadable
    counts["chat-model calls"] = usage.calls
    for key, value in (("prompt tokens", usage.input_tokens), ("completion tokens", usage.output_tokens)):
        counts[key] = "not reported" if value is None else value
    cost = usage_cost({"all": usage}, None if prices is None else {"input": prices[0], "output": prices[1]})
    if usage.calls and cost is not None:
        counts["cost (USD, reported)" if usage.cost is not None else "cost (USD, at --prices)"] = f"{cost:.6f}"
    table = Table("measure", Column("value", justify="right"), title=title)
    for key, value in counts.items():
        table.add_row(key, f"{value:.3f}" if isinstance(value, float) else str(value))
    console.print(table)
    for problem in rows.problems:
        console.print(f"[yellow]{problem}[/yellow]")
    console.print(f"{written} written to {rows.store.path}")
    if rows.stopped is not None:  # by --stop-on-error, after the rows before it are written
        done = ("the old output is kept (--no-resume: replaced only by a complete run)" if not rows.resume
                else "the rows before it are written, a re-run resumes after them")
        console.print(f"[red]error:[/red] {rows.input}: {rows.stopped}; stopped (--stop-on-error): {done}")
        raise typer.Exit(code=1)
    if report is not None:
        _write_html_report([rows.store.path], report, inputs=rows.input, id_field=rows.id_field, **fields)


@app.command()
def evaluate(
    input: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSONL or CSV file of rows.")],
    output: Annotated[Path, typer.Option("-o", "--output", dir_okay=False, help="Where to write one JSON report per line.")] = Path(
        "grapheval-reports.jsonl"
    ),
    llm: Annotated[Optional[str], typer.Option(help="Chat model spec, e.g. local:qwen2.5-coder-1.5b or bedrock:<id>.")] = None,
    scorer: Annotated[Optional[str], typer.Option(help="Scorer spec, e.g. hhem, trueteacher, nli:<model>, judge:local:<name> (default: an LLM judge over --llm; the offline local judge when --llm is not given either).")] = None,
    threshold: _Threshold = 0.5,
    prices: _Prices = None,
    mode: Annotated[Literal["graph", "raw"], typer.Option(help="graph (GraphEval) or raw (whole output as one claim).")] = "graph",
    rule: Annotated[str, typer.Option(help="Graph mode's decision rule: hybrid (default: whole output and triples "
                                           "combined, for scorers with fitted weights), paper (the paper's rule), or "
                                           "the name of a registered rule.")] = "hybrid",
    method: Annotated[Optional[str], typer.Option(hidden=True, help="Deprecated: --rule.")] = None,
    context_field: Annotated[str, typer.Option(help="Field holding the grounding context.")] = "context",
    output_field: Annotated[str, typer.Option(help="Field holding the LLM output to check.")] = "output",
    id_field: Annotated[str, typer.Option(help="Field holding the row id (default: the line number).")] = "id",
    limit: Annotated[Optional[int], typer.Option(help="Check only the first N rows.")] = None,
    cache: Annotated[Optional[Path], typer.Option(help="SQLite file caching extracted knowledge graphs.")] = None,
    batch_rows: Annotated[int, typer.Option(help="Rows processed (and written) per batch.")] = 16,
    resume: Annotated[bool, typer.Option(help="Skip rows whose id is already in OUTPUT with a verdict (rows that failed are done again).")] = True,
    delimiter: Annotated[Optional[str], typer.Option(help="CSV delimiter, one character or 'tab' (default: sniffed from the header among , ; tab |; a tab for .tsv).")] = None,
    stop_on_error: Annotated[bool, typer.Option("--stop-on-error", help="Stop (exit code 1) at the first unreadable input record instead of skipping and reporting it.")] = False,
    report: Annotated[Optional[Path], typer.Option("--report", help="Also write an HTML report of the run (all of OUTPUT) here.")] = None,
    engine_name: Annotated[Literal["process", "ray"], typer.Option("--engine", help="process (this process) or ray (a Ray cluster; the 'ray' extra).")] = "process",
    address: Annotated[Optional[str], typer.Option(help="Ray cluster to connect to (default: a running one, else a local Ray).")] = None,
    extract_actors: Annotated[int, typer.Option(help="Ray: extraction actors (one chat model each).")] = 2,
    check_actors: Annotated[int, typer.Option(help="Ray: scoring actors (one loaded scorer each).")] = 1,
    requests_per_minute: Annotated[Optional[float], typer.Option(help="Ray: chat-model requests a minute, whole run.")] = None,
    tokens_per_minute: Annotated[Optional[float], typer.Option(help="Ray: chat-model tokens a minute, whole run.")] = None,
) -> None:
    """Check every row of INPUT and write a report per row to OUTPUT (JSONL)."""
    from .aggregate import get_rule
    from .exceptions import InputError
    from .pipeline import GraphEval

    refuse_same_files({"INPUT": input}, {"--output": output, "--report": report, "--cache": cache})
    try:
        decision_rule = get_rule(_renamed_option(rule, method, "--rule", "hybrid"), "--rule")
    except InputError as exc:
        raise typer.BadParameter(str(exc)) from None
    engine = GraphEval(llm=llm, scorer=scorer, hallucination_threshold=threshold, mode=mode,
                       cache=cache or True, rule=decision_rule)
    pending = _Pending(input, output, id_field, limit, resume, delimiter=delimiter,
                       stop_on_error=stop_on_error)
    counts = {"rows": 0, "flagged": 0, "faithful": 0, "errors": 0}
    if engine_name == "ray":
        from .integrations.ray import RayEvalSummary, evaluate_to_file

        rows = list(pending)  # the Ray pipeline takes the rows at once
        summary = RayEvalSummary(path=output)
        if rows:
            summary = evaluate_to_file(
                rows, output, append=resume, address=address, show_progress=True, llm=llm, scorer=scorer,
                hallucination_threshold=threshold, mode=mode, rule=decision_rule, cache=cache,
                context_key=context_field, output_key=output_field, id_key=id_field, extract_actors=extract_actors,
                check_actors=check_actors, requests_per_minute=requests_per_minute,
                tokens_per_minute=tokens_per_minute,
            )
        elif not resume:  # --no-resume and nothing to do: the output is the empty run
            JsonlStore(output, replace=True, keep_rows=False).close()
        counts.update(rows=summary.rows, flagged=summary.flagged, faithful=summary.faithful, errors=summary.errors)
        pending.problems.extend(summary.problems)
        usage, title = summary.usage, f"GraphEval on Ray ({mode})"
    else:

        def tally(report: Any) -> None:
            counts["flagged" if report.hallucinated else "faithful"] += 1

        usage = _process_in_batches(
            pending, desc="grapheval", batch_rows=batch_rows, counts=counts, failed=lambda report: not report.ok,
            tally=tally, usage_of=lambda report: [report.usage],
            process=lambda batch: engine.evaluate_many(
                batch, context_key=context_field, output_key=output_field, id_key=id_field, show_progress=False
            ),
        )
        title = f"GraphEval ({engine.describe() if counts['rows'] else mode})"
    _finish(title, counts, pending, "reports", usage, prices, report, context_field=context_field,
            output_field=output_field)


@app.command()
def correct(
    input: Annotated[Path, typer.Argument(exists=True, dir_okay=False, help="JSONL or CSV file of rows.")],
    output: Annotated[Path, typer.Option("-o", "--output", dir_okay=False, help="Where to write one JSON correction report per line.")] = Path(
        "grapheval-corrections.jsonl"
    ),
    strategy: Annotated[
        str, typer.Option(help="The correction strategy: constrained (the default: evidence held to the context, "
                          "edits in place), paper (GraphCorrect as published), evidence (with reason, evidence and "
                          "follow-up) or direct (the Direct Prompt baseline).")
    ] = "constrained",
    method: Annotated[Optional[str], typer.Option(hidden=True, help="Deprecated: --strategy.")] = None,
    llm: Annotated[Optional[str], typer.Option(help="Chat model spec (extraction and correction).")] = None,
    scorer: Annotated[Optional[str], typer.Option(help="Scorer spec, e.g. hhem, nli:<model>, judge:local:<name> (default: an LLM judge over --llm, else the offline local judge).")] = None,
    threshold: _Threshold = 0.5,
    prices: _Prices = None,
    max_rounds: Annotated[int, typer.Option(help="Correct → re-check rounds (1 = the paper).")] = 1,
    guard: Annotated[Literal["off", "reject", "flag"], typer.Option(help="off, reject or flag a change that drops a supported triple.")] = "off",
    batch_step1: Annotated[bool, typer.Option(help="Correct all flagged triples of an output in one call.")] = False,
    context_field: Annotated[str, typer.Option(help="Field holding the grounding context.")] = "context",
    output_field: Annotated[str, typer.Option(help="Field holding the LLM output to correct.")] = "output",
    id_field: Annotated[str, typer.Option(help="Field holding the row id (default: the line number).")] = "id",
    limit: Annotated[Optional[int], typer.Option(help="Correct only the first N rows.")] = None,
    cache: Annotated[Optional[Path], typer.Option(help="SQLite file caching extracted knowledge graphs.")] = None,
    batch_rows: Annotated[int, typer.Option(help="Rows processed (and written) per batch.")] = 16,
    resume: Annotated[bool, typer.Option(help="Skip rows whose id is already in OUTPUT.")] = True,
    delimiter: Annotated[Optional[str], typer.Option(help="CSV delimiter, one character or 'tab' (default: sniffed from the header among , ; tab |; a tab for .tsv).")] = None,
    stop_on_error: Annotated[bool, typer.Option("--stop-on-error", help="Stop (exit code 1) at the first unreadable input record instead of skipping and reporting it.")] = False,
    report: Annotated[Optional[Path], typer.Option("--report", help="Also write an HTML report of the correction run (all of OUTPUT) here: before/after, word diff, the triples changed.")] = None,
) -> None:
    """Detect and correct hallucinations in every row of INPUT; write a correction report per row to OUTPUT."""
    from .correct import GraphCorrect
    from .correct.corrector import strategy_argument
    from .pipeline import GraphEval

    refuse_same_files({"INPUT": input}, {"--output": output, "--report": report, "--cache": cache})
    strategy = _renamed_option(strategy, method, "--strategy", "constrained")
    if strategy == "graph":
        console.print("[yellow]--strategy graph is deprecated: the paper's procedure is --strategy paper[/yellow]")
        strategy = "paper"
    try:
        engine = GraphEval(llm=llm, scorer=scorer, hallucination_threshold=threshold, cache=cache or True)
        fixer = GraphCorrect(
            engine, strategy=strategy_argument(strategy), max_rounds=max_rounds, guard=False if guard == "off" else guard,
            batch_step1=batch_step1, show_progress=False,
        )
    except GraphEvalError as exc:
        raise typer.BadParameter(str(exc)) from exc
    pending = _Pending(input, output, id_field, limit, resume, delimiter=delimiter,
                       stop_on_error=stop_on_error, report_field="status")
    counts: dict[str, Any] = {"rows": 0, "flagged": 0, "pass after correction": 0, "changed": 0, "errors": 0}
    rouge: dict[str, list[float]] = {"rouge1": [], "rouge2": [], "rougeL": []}

    def tally(result: Any) -> None:
        if result.flagged:
            counts["flagged"] += 1
            counts["pass after correction"] += bool(result.passed)
            counts["changed"] += result.changed
            if result.rouge is not None:
                for key in rouge:
                    rouge[key].append(getattr(result.rouge, key))

    usage = _process_in_batches(
        pending, desc="correct", batch_rows=batch_rows, counts=counts, failed=lambda result: result.status == "error",
        tally=tally,
        usage_of=lambda result: [result.detection.usage if result.detection else {}, result.usage],
        process=lambda batch: fixer.correct_many(
            batch, context_key=context_field, output_key=output_field, id_key=id_field, show_progress=False
        ),
    )
    if counts["flagged"]:
        counts["% flagged that pass"] = 100.0 * counts["pass after correction"] / counts["flagged"]
    for key, values in rouge.items():
        if values:
            counts[f"mean {key} (flagged rows)"] = sum(values) / len(values)
    title = f"{'Direct Prompt' if strategy == 'direct' else 'GraphCorrect'} ({fixer.describe() if counts['rows'] else strategy})"
    _finish(title, counts, pending, "correction reports", usage, prices, report, context_field=context_field,
            output_field=output_field)


def _write_html_report(results: list[Path], out: Path, **kwargs: Any) -> None:
    from .report import CorrectionRunView, write_run_report

    run = write_run_report(results, out, **kwargs)
    if isinstance(run, CorrectionRunView):
        console.print(f"HTML report of {run.total} correction(s) ({run.flagged} flagged, {run.changed} changed, "
                      f"{run.passed} pass the re-check, {run.errors + run.unreadable} with a problem) written to {out}")
        return
    rate = "-" if run.rate is None else f"{100 * run.rate:.1f} %"
    console.print(f"HTML report of {run.total} row(s) (hallucination rate {rate}, {run.errors + run.unreadable} "
                  f"with a problem) written to {out}")


@app.command("report")
def report_command(
    results: Annotated[list[Path], typer.Argument(exists=True, dir_okay=False, help="Per-row JSONL file(s) written by evaluate (or correct).")],
    output: Annotated[Path, typer.Option("-o", "--output", dir_okay=False, help="Where to write the HTML page.")] = Path("grapheval-report.html"),
    inputs: Annotated[Optional[Path], typer.Option(exists=True, dir_okay=False, help="The input rows (JSONL or CSV): shows each row's context.")] = None,
    limit: Annotated[Optional[int], typer.Option(help="Report only the first N rows.")] = None,
    title: Annotated[Optional[str], typer.Option(help="Page title.")] = None,
    inline_rows: Annotated[int, typer.Option(help="Draw every row view in the page up to this many rows; above it, views are drawn when opened.")] = 100,
    context_field: Annotated[str, typer.Option(help="Field of INPUTS holding the context.")] = "context",
    output_field: Annotated[str, typer.Option(help="Field of INPUTS holding the output.")] = "output",
    id_field: Annotated[str, typer.Option(help="Field of INPUTS holding the row id (default: the line number).")] = "id",
) -> None:
    """Write the HTML report of a finished (or interrupted) run from its per-row JSONL: no model is loaded."""
    refuse_same_files({**{f"RESULTS[{i}]": p for i, p in enumerate(results)}, "--inputs": inputs},
                       {"--output": output})
    _write_html_report(results, output, inputs=inputs, limit=limit, title=title, inline_rows=inline_rows,
                       id_field=id_field, context_field=context_field, output_field=output_field)


@app.command()
def demo(
    llm: Annotated[Optional[str], typer.Option(help="Chat model spec (default: the offline local model).")] = None,
    scorer: Annotated[Optional[str], typer.Option(help="Scorer spec (default: an LLM judge over --llm, else the offline local LLM judge).")] = None,
    fast: Annotated[bool, typer.Option("--fast", help="Use the small local 0.5B model for both (a smaller download and memory; not quicker per row, less accurate).")] = False,
    examples: Annotated[Optional[Path], typer.Option(exists=True, dir_okay=False, help="Your own JSONL rows instead of the bundled ones.")] = None,
    threshold: _Threshold = 0.5,
) -> None:
    """Check a few bundled examples (some faithful, some with planted errors) and print the verdicts."""
    import time
    from importlib.resources import files

    from .pipeline import GraphEval

    source = examples if examples is not None else files("grapheval_plugins").joinpath("data").joinpath("demo.jsonl")
    rows = [json.loads(line) for line in source.read_text(encoding="utf-8").splitlines() if line.strip()]
    if fast:
        llm = llm or "local:qwen2.5-coder-0.5b"  # and, without --scorer, its judge (models.scorer_for)
    engine = GraphEval(llm=llm, scorer=scorer, hallucination_threshold=threshold)
    for stage, get in (("extraction model", lambda: engine.llm), ("scorer", lambda: engine.scorer)):
        started = time.perf_counter()
        model = get()
        label = getattr(model, "model_label", None) or getattr(model, "name", None) or type(model).__name__
        console.print(f"[bold]Loading the {stage}[/bold] {label} …")
        load = getattr(model, "load", None)
        if callable(load):  # local models: weights assembled on first use (a progress bar shows), then loaded
            load()
        console.print(f"  ready in {time.perf_counter() - started:.1f} s")
    console.print(f"[bold]Checking {len(rows)} examples[/bold] with {engine.describe()} …", soft_wrap=True)
    started = time.perf_counter()
    reports = engine.evaluate_many(rows, show_progress=True)
    elapsed = time.perf_counter() - started
    table = Table(title=f"GraphEval demo — {engine.describe()}", show_lines=True)
    for column in ("example", "expected", "verdict", "score", "unsupported triples (P(unsupported))"):
        table.add_column(column, justify="right" if column == "score" else "left")
    agree, failed, known = 0, 0, []
    for row, report in zip(rows, reports):
        expected = str(row.get("expected", "?"))
        if not report.ok:
            failed += 1
            verdict, score = "[red]error[/red]", "-"
            detail = "; ".join(e.message for e in report.errors)
        else:
            got = "hallucinated" if report.hallucinated else "faithful"
            verdict = "[red]hallucinated[/red]" if report.hallucinated else "[green]faithful[/green]"
            score = f"{report.score:.2f}"
            detail = "\n".join(
                f"{' | '.join(c.triple.as_list()) if c.triple else c.claim}  ({c.p_unsupported:.2f})"
                for c in sorted(report.unsupported, key=lambda c: -c.p_unsupported)
            ) or "-"
            agree += got == expected
            if got != expected and row.get("known_false_positive") and got == "hallucinated":
                known.append(str(row.get("id", "")))
                verdict += " (known false positive)"
        table.add_row(str(row.get("id", "")), expected, verdict, score, detail)
    Console().print(table)
    note = f"; {len(known)} known false positive(s) of the local models: {', '.join(known)}" if known else ""
    console.print(f"{agree}/{len(rows)} verdicts match the expected ones{note} ({elapsed:.1f} s).")
    if failed:
        console.print(f"[red]error:[/red] {failed} example(s) could not be checked")
        raise typer.Exit(code=1)


@app.command()
def doctor(
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON on stdout.")] = False,
    model: Annotated[str, typer.Option(help="The local model to test-decode with.")] = "qwen2.5-coder-1.5b",
    decode: Annotated[bool, typer.Option(help="Run one tiny real decode in a child process.")] = True,
    verify: Annotated[bool, typer.Option(help="Hash the weights and compare them with the pinned sha256.")] = True,
    hub: Annotated[bool, typer.Option(help="Try to reach the model hub (one quick attempt).")] = True,
) -> None:
    """Check that the main job can run here: versions, extras, cores, weights, hub, one real decode.

    Exit code 0 only if the main job (the default local models) can run.
    """
    from .doctor import render, run_doctor
    from .local.hub import HubProbe

    report = run_doctor(
        model=model, decode=decode, verify=verify,
        hub_probe=None if hub else (lambda: HubProbe(False, "skipped (--no-hub)")),
    )
    if json_output:
        typer.echo(json.dumps(report.as_dict(), indent=2, default=str))
    else:
        Console().print(render(report))
        verdict = "[green]the main job can run here[/green]" if report.ok else "[red]the main job cannot run here[/red]"
        console.print(verdict)
    raise typer.Exit(code=0 if report.ok else 1)


def main() -> None:
    """Entry point of the ``grapheval`` script."""
    app()


if __name__ == "__main__":  # pragma: no cover
    main()
