"""The Ray engine on a small local Ray: the same reports as ``evaluate_many``, no row lost or duplicated when a
worker dies, a re-run served by the shared SQLite cache, JSONL / Parquet in and out, the CLI's ``--engine ray``."""

from __future__ import annotations

import functools
import json
import logging
import os
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_socket import enable_socket, socket_allow_hosts

ray = pytest.importorskip("ray", reason="the 'ray' extra is not installed (pip install 'grapheval-plugins[ray]')")

from grapheval_plugins import GraphEval, Report  # noqa: E402
from grapheval_plugins.integrations import ray as graph_ray  # noqa: E402
from grapheval_plugins.testing import KeywordScorer, ScriptedChatModel, naive_triples_chat_model  # noqa: E402

SCORER = "py:grapheval_plugins.testing:KeywordScorer"
N_ROWS = 50


# ------------------------------------------------------------------------ fakes the actors build for themselves
def _input_text(messages: list[Any]) -> str:
    text = ""
    for message in messages:
        content = str(message.content)
        if "<input>" in content:
            text = content.rsplit("<input>", 1)[1].split("</input>", 1)[0]
    return text


def _respond(messages: list[Any], log: str | None = None, crash_on: str | None = None, marker: str | None = None) -> str:
    text = _input_text(messages)
    if log is not None:
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{os.getpid()}\t{text[:40]}\n")
    if crash_on is not None and marker is not None and crash_on in text and not os.path.exists(marker):
        Path(marker).write_text(str(os.getpid()), encoding="utf-8")
        os._exit(1)  # the worker process dies mid-batch, the first time only
    if "provider-down" in text:
        raise RuntimeError("provider unavailable")
    if "garbled" in text:
        return "I would rather not."
    respond = naive_triples_chat_model().respond
    assert respond is not None
    return respond(messages)


def fake_llm(log: str | None = None, crash_on: str | None = None, marker: str | None = None) -> ScriptedChatModel:
    """The chat model of these tests: crude triples per sentence; an error or a garbled answer on marked rows."""
    return ScriptedChatModel(
        respond=functools.partial(_respond, log=log, crash_on=crash_on, marker=marker), model_label="fake-triples"
    )


def make_rows(n: int = N_ROWS) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        context = f"Row {i}: Alice Smith{i} lives in Paris. She works at Acme Corp since {2000 + i}."
        if i == 7:
            output = f"Row {i} is garbled text here."
        elif i == 11:
            output = f"Row {i} says provider-down now."
        elif i % 5 == 1:
            output = f"Alice Smith{i} lives in Rome. She works at Acme Corp since {2000 + i}."
        else:
            output = f"Alice Smith{i} lives in Paris. She works at Acme Corp since {2000 + i}."
        rows.append({"id": f"r{i:03d}", "context": context, "output": output})
    if n > 13:
        rows[13]["output"] = "   "  # an input error
    return rows


def strip(report: Report, where: bool = True) -> dict[str, Any]:
    """A report without its wall times (the only field two runs of the same rows may differ in).

    ``where=False`` also drops the row position from input errors' messages (``rows[13].output`` → ``output``):
    rows that Ray reads from files are numbered within their block, as the CLI numbers them within its batch.
    """
    data = report.model_dump(mode="json", exclude={"timings"})
    if not where:
        for error in data["errors"]:
            if error["stage"] == "input":
                error["message"] = error["message"].split("].", 1)[-1]
    return data


# ------------------------------------------------------------------------ one local Ray for the module
@pytest.fixture(autouse=True)
def _no_network() -> Iterator[None]:
    """Overrides the unit tests' socket ban: Ray's driver talks to its local processes over loopback TCP."""
    socket_allow_hosts(["127.0.0.1", "localhost"], allow_unix_socket=True)
    yield
    enable_socket()


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])  # workers cannot import this test module
    ray.init(
        num_cpus=2, include_dashboard=False, logging_level=logging.ERROR, log_to_driver=False,
        _node_ip_address="127.0.0.1",
    )
    ray.data.DataContext.get_current().enable_progress_bars = False
    yield
    ray.shutdown()
    ray.cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(scope="module")
def expected() -> list[Report]:
    ge = GraphEval(llm=fake_llm(), scorer=KeywordScorer(), show_progress=False)
    return ge.evaluate_many(make_rows())


def _options(**extra: Any) -> dict[str, Any]:
    return {
        "llm": fake_llm, "scorer": SCORER, "extract_actors": 2, "extract_num_cpus": 0.25, "check_actors": 1,
        "check_num_cpus": 0.25, "extract_batch_rows": 8, "check_batch_rows": 16, **extra,
    }


# ------------------------------------------------------------------------ tests
def test_ray_path_matches_evaluate_many(local_ray: None, expected: list[Report]) -> None:
    reports = graph_ray.evaluate_dataset(make_rows(), **_options())
    assert [r.id for r in reports] == [f"r{i:03d}" for i in range(N_ROWS)]
    assert [strip(r) for r in reports] == [strip(r) for r in expected]
    kinds = Counter("input" if r.errors and r.errors[0].stage == "input" else
                    "extract" if r.errors else "fallback" if r.extraction and r.extraction.fallback else
                    "flagged" if r.hallucinated else "faithful" for r in reports)
    assert kinds == {"faithful": 38, "flagged": 9, "input": 1, "extract": 1, "fallback": 1}
    assert all(set(r.timings) == {"extract", "check", "total"} for r in reports if r.ok)


def test_killed_worker_loses_and_duplicates_no_row(local_ray: None, expected: list[Report], tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    llm = functools.partial(fake_llm, crash_on="Smith23 ", marker=str(marker))
    reports = graph_ray.evaluate_dataset(make_rows(), preserve_order=False, **_options(llm=llm))
    assert marker.exists(), "the worker was meant to die on row 23"
    assert int(marker.read_text()) != os.getpid()
    assert Counter(r.id for r in reports) == Counter(f"r{i:03d}" for i in range(N_ROWS))
    by_id = {r.id: strip(r) for r in reports}
    assert [by_id[r.id] for r in expected] == [strip(r) for r in expected]


def test_rerun_with_the_shared_sqlite_cache_makes_no_llm_call(local_ray: None, tmp_path: Path) -> None:
    log, cache = tmp_path / "calls.log", tmp_path / "kg.sqlite"
    rows = make_rows(20)
    options = _options(llm=functools.partial(fake_llm, log=str(log)), cache=cache)
    first = graph_ray.evaluate_dataset(rows, **options)
    calls = log.read_text(encoding="utf-8").splitlines()
    # 17 rows answered at once; the garbled row 3 times (two retries); the provider-down row 3 times; the empty
    # row never. Spread over the (at most two) extraction actors.
    assert len(calls) == 17 + 3 + 3
    assert len({line.split("\t")[0] for line in calls}) <= 2
    second = graph_ray.evaluate_dataset(rows, **options)
    again = log.read_text(encoding="utf-8").splitlines()[len(calls):]
    # The re-run calls the chat model only for the row whose calls all raised (a failure is never cached).
    assert len(again) == 3 and all("provider-down" in line for line in again)
    assert [strip(r)["claims"] for r in second] == [strip(r)["claims"] for r in first]
    assert sum(bool(r.extraction and r.extraction.cached) for r in second) == 18


def test_files_in_and_out(local_ray: None, expected: list[Report], tmp_path: Path) -> None:
    rows = make_rows()
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "reports.jsonl"
    summary = graph_ray.evaluate_to_file(src, out, **_options())
    assert (summary.rows, summary.errors, summary.flagged) == (N_ROWS, 2, 10)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == [r["id"] for r in rows]
    by_id = {r.id: strip(r, where=False) for r in graph_ray.read_reports(out)}
    assert [by_id[r.id] for r in expected] == [strip(r, where=False) for r in expected]
    assert by_id["r013"]["errors"][0]["message"] == "output: is empty"

    pq = pytest.importorskip("pyarrow.parquet")
    pa = pytest.importorskip("pyarrow")
    src_pq = tmp_path / "rows.parquet"
    pq.write_table(pa.Table.from_pylist(rows), src_pq)
    out_pq = tmp_path / "reports.parquet"
    graph_ray.evaluate_to_file(src_pq, out_pq, preserve_order=True, **_options())
    assert pq.read_schema(out_pq).equals(graph_ray.report_schema())
    assert [strip(r, False) for r in graph_ray.read_reports(out_pq)] == [strip(r, False) for r in expected]


def test_cli_engine_ray_resumes(local_ray: None, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from grapheval_plugins.cli import app

    rows = make_rows(12)
    src = tmp_path / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n", encoding="utf-8")
    out = tmp_path / "out.jsonl"
    base = ["evaluate", str(src), "-o", str(out), "--llm", "py:grapheval_plugins.testing:naive_triples_chat_model",
            "--scorer", SCORER, "--engine", "ray", "--extract-actors", "1"]
    result = CliRunner().invoke(app, [*base, "--limit", "5"])
    assert result.exit_code == 0, result.output
    assert len(out.read_text(encoding="utf-8").splitlines()) == 5
    result = CliRunner().invoke(app, base)
    assert result.exit_code == 0, result.output
    ids = [json.loads(line)["id"] for line in out.read_text(encoding="utf-8").splitlines()]
    assert sorted(ids) == sorted(r["id"] for r in rows)
    assert "line 13: invalid JSON" in result.output

    single = tmp_path / "single.jsonl"
    result = CliRunner().invoke(app, [*base[:3], str(single), *base[4:8]])
    assert result.exit_code == 0, result.output
    by_id = {r.id: strip(r) for r in graph_ray.read_reports(out)}
    assert [by_id[r.id] for r in graph_ray.read_reports(single)] == [strip(r) for r in graph_ray.read_reports(single)]


def test_an_output_of_other_content_is_refused_before_ray_starts(tmp_path: Path) -> None:
    from grapheval_plugins.jsonl import NotAStoreError

    out = tmp_path / "notes.jsonl"
    out.write_text('{"context": "mine", "output": "no id"}\n', encoding="utf-8")
    for append in (False, True):
        with pytest.raises(NotAStoreError):
            graph_ray.evaluate_to_file(make_rows(2), out, append=append, address="127.0.0.1:1", **_options())
    assert out.read_text(encoding="utf-8") == '{"context": "mine", "output": "no id"}\n'


def test_a_run_that_fails_leaves_the_old_output_as_it_was(local_ray: None, tmp_path: Path) -> None:
    out = tmp_path / "reports.jsonl"
    old = json.dumps({"id": "old", "hallucinated": False}) + "\n"  # a report of an earlier run
    out.write_text(old, encoding="utf-8")
    seen: list[str] = []

    def stop_midway(report: Report) -> None:
        seen.append(str(report.id))
        if len(seen) == 5:
            raise RuntimeError("killed mid-run")

    with pytest.raises(RuntimeError, match="killed mid-run"):
        graph_ray.evaluate_to_file(make_rows(20), out, on_report=stop_midway, **_options())
    assert out.read_text(encoding="utf-8") == old and sorted(p.name for p in tmp_path.iterdir()) == ["reports.jsonl"]
    summary = graph_ray.evaluate_to_file(make_rows(20), out, **_options())
    assert summary.rows == 20 and len(out.read_text(encoding="utf-8").splitlines()) == 20


def test_rate_limits_are_split_between_actors(local_ray: None) -> None:
    ds = graph_ray.build_dataset(make_rows(4), **_options(requests_per_minute=600, tokens_per_minute=1e6))
    reports = [Report.model_validate_json(line) for line in graph_ray.iter_report_json(ds)]
    assert len(reports) == 4


def test_the_parquet_schema_names_every_report_field() -> None:
    """A field added to Report, ClaimCheck, Extraction or StageError must reach the Parquet schema, or Parquet
    output silently drops it (it once dropped ``ClaimCheck.evidence_passage``)."""
    from grapheval_plugins.types import ClaimCheck, Extraction, StageError

    schema = graph_ray.report_schema()
    assert set(Report.model_fields) | {"ok"} == set(schema.names)
    for name, model in (("claims", ClaimCheck), ("extraction", Extraction), ("errors", StageError)):
        arrow_type = schema.field(name).type
        struct = arrow_type.value_type if hasattr(arrow_type, "value_type") else arrow_type
        assert {struct.field(i).name for i in range(struct.num_fields)} == set(model.model_fields), name


def test_parquet_output_replaces_an_old_file_only_when_complete(tmp_path: Path) -> None:
    """A Parquet write that fails part way leaves the old output as it was, and no partial file behind."""
    engine = GraphEval(llm=naive_triples_chat_model(), scorer=KeywordScorer())
    old, new = engine.evaluate_many([{"id": "a", "context": "Ada wrote code.", "output": "Ada wrote code."},
                                     {"id": "b", "context": "Ada wrote code.", "output": "Ada wrote a novel."}],
                                    id_key="id", show_progress=False)
    path = tmp_path / "reports.parquet"
    graph_ray._write_parquet(path, [old])
    before = path.read_bytes()

    def reports() -> Iterator[Report]:
        yield new
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        graph_ray._write_parquet(path, reports(), rows_per_group=1)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["reports.parquet"]

    graph_ray._write_parquet(path, [new])
    assert [r.id for r in graph_ray.read_reports(path)] == ["b"]
