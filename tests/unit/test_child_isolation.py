"""The child-process runner of ``isolated`` tests: a native crash is that test's failure, with the signal's name
and the child's last lines of output, and the run goes on to pytest's summary."""

from __future__ import annotations

from pathlib import Path

import pytest
from child_isolation import ChildRun, signal_name

pytest_plugins = ["pytester"]

CONFTEST = """
import os

from child_isolation import configure

os.environ.setdefault("PARENT_PID", str(os.getpid()))  # the child inherits the parent's value


def pytest_configure(config):
    configure(config)
"""

TESTS = """
import os
import signal

import pytest

pytestmark = pytest.mark.isolated


@pytest.fixture(scope="module")
def pid():
    return os.getpid()


def test_passes_in_a_child(pid):
    assert pid != int(os.environ["PARENT_PID"])


def test_crashes(pid):
    print("about to dereference a wild pointer", flush=True)
    os.kill(os.getpid(), signal.SIGSEGV)


def test_runs_after_the_crash_in_a_new_child(pid):
    assert True


def test_fails_normally():
    assert 1 == 2, "an ordinary failure"


@pytest.mark.skip(reason="not today")
def test_skipped():
    pass


@pytest.mark.xfail(reason="known", strict=False)
def test_xpass():
    pass
"""


def test_a_segfaulting_test_fails_with_its_signal_and_the_rest_still_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    here = str(Path(__file__).resolve().parents[1])  # tests/, where child_isolation lives
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p))
    monkeypatch.delenv("PARENT_PID", raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # quick children: no third-party pytest plugins
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_native=TESTS)
    # The parent pytest itself runs in a subprocess too: a real run, started the way a user starts one.
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-rA")
    result.assert_outcomes(passed=2, failed=2, skipped=1, xpassed=1)  # an XPASS of a non-strict xfail is no failure
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["*FAILED test_native.py::test_crashes*", "*= 2 failed, 2 passed, 1 skipped, 1 xpassed*"])
    assert "was killed by SIGSEGV" in out
    assert "about to dereference a wild pointer" in out  # the child's last lines of output
    assert "Segmentation fault" in out  # faulthandler's dump in the child
    assert "an ordinary failure" in out
    assert "PASSED test_native.py::test_runs_after_the_crash_in_a_new_child" in out


def test_signal_names() -> None:
    assert signal_name(-11) == "SIGSEGV" and signal_name(-6) == "SIGABRT" and signal_name(3) == "exit code 3"
    assert ChildRun(returncode=-11).crashed and ChildRun(returncode=0, timed_out=True).crashed
    assert not ChildRun(returncode=1).crashed
    assert ChildRun(returncode=-11).cause(10) == "was killed by SIGSEGV"
