"""Run tests marked ``isolated`` in a fresh child interpreter, so a native crash is a failed test, not a dead run.

Tests that execute native model code (llama.cpp, torch) are marked ``isolated`` (see ``tests/conftest.py``). The
parent pytest never runs them itself: for each test module it starts ``python -m pytest <node ids>`` in a new
process (spawned, not forked: a fork of a parent that already started llama.cpp's or OpenMP's threads can
deadlock), which writes every test report to a file as it goes. The parent replays those reports, so passes,
failures, skips and xfails read as if the tests had run in-process, and module fixtures (a loaded model) are
still set up once per module.

When the child dies — a segmentation fault, an abort, a timeout — the test it was running is reported as failed
with the signal's name and the last lines of the child's output, and a new child runs the module's remaining
tests. pytest's summary line is printed whatever happens.

Settings: ``GRAPHEVAL_TEST_CHILD_TIMEOUT`` (seconds per child, default 1800).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

MARKER = "isolated"
REPORTS_ENV = "GRAPHEVAL_TEST_CHILD_REPORTS"
TIMEOUT_ENV = "GRAPHEVAL_TEST_CHILD_TIMEOUT"
TAIL_LINES = 30


def signal_name(returncode: int) -> str:
    """``-11`` → ``'SIGSEGV'``; a non-negative code → ``'exit code N'``."""
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit code {returncode}"


def output_tail(text: str, lines: int = TAIL_LINES) -> str:
    """The last ``lines`` lines of a child's output; when Python's faulthandler dumped a native crash, the output
    just before it and the innermost frames of the dump (not the dozens of pytest frames below them)."""
    all_lines = text.splitlines()
    fatal = next((i for i, line in enumerate(all_lines) if line.startswith("Fatal Python error:")), None)
    if fatal is None:
        return "\n".join(all_lines[-lines:])
    before = all_lines[max(0, fatal - lines // 2) : fatal]
    return "\n".join([*before, *all_lines[fatal : fatal + lines - len(before)]])


@dataclass
class ChildRun:
    """What one child process did: its reports per node id, how it ended, and the tail of its output."""

    returncode: int
    reports: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    finished: set[str] = field(default_factory=set)
    tail: str = ""
    timed_out: bool = False

    @property
    def crashed(self) -> bool:
        """Killed by a signal or a timeout (exit codes 0-5 are pytest's own outcomes)."""
        return self.timed_out or self.returncode < 0 or self.returncode > 5

    def cause(self, timeout: float) -> str:
        if self.timed_out:
            return f"timed out after {timeout:.0f} s and was killed (a hang: deadlock?)"
        return f"was killed by {signal_name(self.returncode)}" if self.returncode < 0 else (
            f"ended with {signal_name(self.returncode)}"
        )


def run_child(
    nodeids: Sequence[str],
    *,
    rootdir: Path,
    args: Sequence[str] = (),
    timeout: float | None = None,
    env: dict[str, str] | None = None,
) -> ChildRun:
    """Run ``nodeids`` in ``python -m pytest`` in a new process; collect its serialised reports and output tail."""
    timeout = timeout if timeout is not None else float(os.environ.get(TIMEOUT_ENV, "1800"))
    with tempfile.TemporaryDirectory(prefix="grapheval-child-") as tmp:
        reports_path, log_path = Path(tmp) / "reports.jsonl", Path(tmp) / "output.log"
        child_env = {**(env if env is not None else os.environ), REPORTS_ENV: str(reports_path)}
        here = str(Path(__file__).resolve().parent)  # so a conftest anywhere can import this module
        child_env["PYTHONPATH"] = os.pathsep.join(p for p in (here, child_env.get("PYTHONPATH", "")) if p)
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--capture=no", "-q", *args, *nodeids]
        timed_out = False
        with log_path.open("wb") as log:
            process = subprocess.Popen(command, cwd=rootdir, env=child_env, stdout=log, stderr=subprocess.STDOUT,
                                       stdin=subprocess.DEVNULL)
            try:
                returncode = process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                returncode = process.wait()
                timed_out = True
        run = ChildRun(returncode=returncode, timed_out=timed_out)
        if reports_path.exists():
            for line in reports_path.read_text(encoding="utf-8").splitlines():
                try:
                    data = json.loads(line)
                except json.JSONDecodeError:  # the line the crash cut short
                    continue
                nodeid = data.get("nodeid", "")
                run.reports.setdefault(nodeid, []).append(data)
                if data.get("when") == "teardown":
                    run.finished.add(nodeid)
        run.tail = output_tail(log_path.read_text(encoding="utf-8", errors="replace"))
    return run


class ReportWriter:
    """Child side: append each test report, serialised, to ``$GRAPHEVAL_TEST_CHILD_REPORTS`` (flushed at once)."""

    def __init__(self, config: pytest.Config, path: str) -> None:
        self.config = config
        self.fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed at unconfigure

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        data = self.config.hook.pytest_report_to_serializable(config=self.config, report=report)
        self.fh.write(json.dumps(data) + "\n")
        self.fh.flush()
        os.fsync(self.fh.fileno())

    def pytest_unconfigure(self) -> None:
        self.fh.close()


class IsolationPlugin:
    """Parent side: run the ``isolated`` tests of each module in a child process and replay their reports."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.results: dict[str, list[pytest.TestReport]] = {}

    def _child_args(self) -> list[str]:
        args = [f"--rootdir={self.config.rootpath}"]
        if self.config.inipath is not None:
            args.append(f"--config-file={self.config.inipath}")
        if self.config.option.runxfail:
            args.append("--runxfail")
        return args

    def _failure(self, item: pytest.Item, text: str) -> pytest.TestReport:
        return pytest.TestReport(
            nodeid=item.nodeid, location=item.location, keywords={k: 1 for k in item.keywords},
            outcome="failed", longrepr=text, when="call", sections=[], duration=0.0,
        )

    def _report(self, data: dict[str, Any]) -> pytest.TestReport:
        report = self.config.hook.pytest_report_from_serializable(config=self.config, data=data)
        if isinstance(report.longrepr, list):  # a skip's (path, line, reason): JSON made the tuple a list
            report.longrepr = tuple(report.longrepr)
        return report

    def _run_module(self, first: pytest.Item) -> None:
        items = [i for i in first.session.items if i.path == first.path and i.get_closest_marker(MARKER)]
        pending = [i for i in items[items.index(first):] if i.nodeid not in self.results]
        timeout = float(os.environ.get(TIMEOUT_ENV, "1800"))
        while pending:
            run = run_child([i.nodeid for i in pending], rootdir=self.config.rootpath, args=self._child_args(),
                            timeout=timeout)
            rest: list[pytest.Item] = []
            for index, item in enumerate(pending):
                reports = [self._report(d) for d in run.reports.get(item.nodeid, [])]
                if item.nodeid in run.finished:
                    for report in reports:
                        if report.failed:
                            report.sections.append(("child process output (last lines)", run.tail))
                    self.results[item.nodeid] = reports
                    continue
                if run.crashed:
                    message = (
                        f"the child process running this test {run.cause(timeout)}.\n"
                        f"Last lines of its output:\n{run.tail}"
                    )
                    self.results[item.nodeid] = [r for r in reports if r.passed] + [self._failure(item, message)]
                    if run.reports:  # the crash came after some test ran: give the rest a new child
                        rest = pending[index + 1 :]
                    else:  # nothing ran at all (a crash while importing or collecting): do not retry per test
                        for other in pending[index + 1 :]:
                            self.results[other.nodeid] = [self._failure(other, message)]
                    break
                self.results[item.nodeid] = [*reports, self._failure(
                    item, f"the child process ({signal_name(run.returncode)}) did not run this test.\n"
                          f"Last lines of its output:\n{run.tail}",
                )]
            pending = rest

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> bool | None:
        if item.get_closest_marker(MARKER) is None:
            return None
        if item.nodeid not in self.results:
            self._run_module(item)
        item.ihook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
        for report in self.results.pop(item.nodeid, []):
            item.ihook.pytest_runtest_logreport(report=report)
        item.ihook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
        return True


def configure(config: pytest.Config) -> None:
    """Register the marker, and the child or the parent side of the plugin."""
    config.addinivalue_line(
        "markers", f"{MARKER}: runs in a child process (native model code: a crash fails only that test)"
    )
    reports = os.environ.pop(REPORTS_ENV, None)  # not inherited by processes the tests start
    if reports:
        config.pluginmanager.register(ReportWriter(config, reports), "grapheval-child-reports")
    elif not config.option.collectonly:
        config.pluginmanager.register(IsolationPlugin(config), "grapheval-isolation")
