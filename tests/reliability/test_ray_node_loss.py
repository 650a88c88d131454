"""At scale: ``grapheval evaluate --engine ray`` on a two-node Ray cluster on this machine (a head node and a second
node process, each with one CPU, bound to 127.0.0.1, in temporary folders). The second node is killed (SIGKILL of
its raylet and every process it started) in the middle of the run; the run then completes, or a re-run of the same
command resumes it, and the output holds every row exactly once, each report equal to a one-process run's.

Every process of the cluster is found as a descendant of the two ``ray start --block`` processes this test starts,
and is stopped by its id at the end (``ray stop`` would stop every Ray process of the machine)."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [
    pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                       reason="the 'ray' extra is not installed (pip install 'grapheval-plugins[ray]')"),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc"),
]

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).with_name("ray")
N_ROWS = 600
TOKEN = secrets.token_hex(32)
FAKES = ["--llm", "py:grapheval_plugins.testing:naive_triples_chat_model",
         "--scorer", "py:grapheval_plugins.testing:KeywordScorer"]


def _env() -> dict[str, str]:
    """The cluster's and its drivers' environment: this test's own auth token, whatever ``~/.ray`` holds."""
    return {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1",
            "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": TOKEN}


_HANDED_OUT: set[int] = set()


def _free_ports(n: int) -> list[int]:
    """``n`` free ports of 127.0.0.1, none handed out before in this process (the OS may give a closed port again:
    two components on one port stop a node)."""
    from pytest_socket import disable_socket, enable_socket

    enable_socket()  # the reliability suite disables sockets in this process; the cluster binds 127.0.0.1 only
    try:
        with contextlib.ExitStack() as stack:
            ports: list[int] = []
            while len(ports) < n:
                s = stack.enter_context(socket.socket())
                s.bind(("127.0.0.1", 0))
                if s.getsockname()[1] not in _HANDED_OUT:
                    ports.append(s.getsockname()[1])
            _HANDED_OUT.update(ports)
            return ports
    finally:
        disable_socket(allow_unix_socket=True)


def _descendants(root: int) -> set[int]:
    """``root`` and every process below it, from /proc (a process that left its session is still a child)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        if pid not in found:
            found.add(pid)
            todo.extend(children.get(pid, []))
    return found


def _kill(pids: set[int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


class _Node:
    """One ``ray start --block`` node process; ``seen`` gathers every process it started, for the teardown."""

    def __init__(self, args: list[str], temp: Path, log: Path) -> None:
        temp.mkdir(parents=True)
        agent, grpc, metrics, runtime_env = _free_ports(4)
        self.proc = subprocess.Popen(
            [str(RAY), "start", "--block", "--node-ip-address=127.0.0.1", "--num-cpus=1",
             "--object-store-memory=100000000", "--disable-usage-stats", f"--temp-dir={temp}",
             f"--dashboard-agent-listen-port={agent}", f"--dashboard-agent-grpc-port={grpc}",
             f"--metrics-export-port={metrics}", f"--runtime-env-agent-port={runtime_env}", *args],
            env=_env(), stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.seen: set[int] = {self.proc.pid}

    def tree(self) -> set[int]:
        self.seen |= _descendants(self.proc.pid)
        return self.seen

    def kill(self) -> None:
        _kill(self.tree())


@contextlib.contextmanager
def _cluster(logs: Path) -> Iterator[tuple[str, _Node, _Node]]:
    port, client, dashboard = _free_ports(3)
    address = f"127.0.0.1:{port}"
    nodes: list[_Node] = []
    tmp = Path(tempfile.mkdtemp(prefix="gq", dir="/tmp"))  # short: Ray's socket paths must fit in 107 bytes
    try:
        head = _Node(["--head", f"--port={port}", f"--ray-client-server-port={client}", "--include-dashboard=false",
                      f"--dashboard-port={dashboard}"], tmp / "h", logs / "head.log")
        nodes.append(head)
        deadline = time.monotonic() + 60  # the second node joins once the head is up
        while b"Ray runtime started" not in (logs / "head.log").read_bytes() and time.monotonic() < deadline:
            if head.proc.poll() is not None:
                pytest.fail(f"the head node did not start: {(logs / 'head.log').read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        worker = _Node([f"--address={address}"], tmp / "w", logs / "worker.log")
        nodes.append(worker)
        wait = ("import ray, sys, time\nray.init(address=sys.argv[1], logging_level='ERROR', log_to_driver=False)\n"
                "deadline = time.monotonic() + 60\n"
                "while sum(n['Alive'] for n in ray.nodes()) < 2 and time.monotonic() < deadline:\n"
                "    time.sleep(0.2)\n"
                "sys.exit(0 if sum(n['Alive'] for n in ray.nodes()) == 2 else 1)\n")
        waiting = subprocess.Popen([sys.executable, "-c", wait, address], env=_env(), stdout=subprocess.DEVNULL,
                                   stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        while waiting.poll() is None and time.monotonic() < deadline:
            for node, log in ((head, "head.log"), (worker, "worker.log")):
                if node.proc.poll() is not None:
                    waiting.kill()
                    pytest.fail(f"a Ray node did not start: {(logs / log).read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        if waiting.poll() is None:
            waiting.kill()
        assert waiting.wait() == 0, "the two-node cluster did not come up within 90 s"
        yield address, head, worker
    finally:
        for node in nodes:  # every process each node started, by id; then the node processes themselves
            node.kill()
        for node in nodes:
            node.proc.wait(timeout=30)
        shutil.rmtree(tmp, ignore_errors=True)


def _evaluate(rows: Path, out: Path, address: str | None) -> list[str]:
    engine = ["--engine", "ray", "--address", address] if address else []
    return [sys.executable, "-m", "grapheval_plugins.cli", "evaluate", str(rows), "-o", str(out), *FAKES, *engine]


def _without_timings(row: dict) -> dict:
    return {k: v for k, v in row.items() if k != "timings"}


def test_a_run_on_two_nodes_survives_the_loss_of_one(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"id": f"r{i}", "context": f"Item {i} is kept in box {i % 7}.",
                                        "output": f"Item {i} is kept in box {(i * 3) % 7}."}) + "\n"
                            for i in range(N_ROWS)), encoding="utf-8")
    reference = tmp_path / "reference.jsonl"
    subprocess.run(_evaluate(rows, reference, None), env=_env(), check=True, capture_output=True, timeout=120)
    want = {r["id"]: _without_timings(r) for r in map(json.loads, reference.read_text(encoding="utf-8").splitlines())}

    out = tmp_path / "out.jsonl"
    started = time.monotonic()
    with _cluster(tmp_path) as (address, _head, worker):
        up = time.monotonic() - started
        log = (tmp_path / "run1.log").open("wb")
        run = subprocess.Popen(_evaluate(rows, out, address), env=_env(), stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while run.poll() is None and time.monotonic() < deadline:  # kill the node once the first reports are in
            if out.exists() and out.stat().st_size > 0:
                break
            time.sleep(0.05)
        assert run.poll() is None, "the run ended before the node could be killed"
        written_at_kill = out.read_bytes().count(b"\n")
        on_worker = [p for p in worker.tree() if "MapWorker" in _cmdline(p)]
        worker.kill()
        try:
            first = run.wait(timeout=150)
        except subprocess.TimeoutExpired:
            run.kill()
            first = run.wait()
        resumed = None
        if first != 0 or out.read_bytes().count(b"\n") < N_ROWS:  # the run could not finish: the same command resumes
            resumed = subprocess.run(_evaluate(rows, out, address), env=_env(), capture_output=True, timeout=150)
            assert resumed.returncode == 0, resumed.stdout[-3000:]
    took = time.monotonic() - started
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    ids = [r["id"] for r in got]
    assert len(ids) == len(set(ids)) == N_ROWS, f"{len(ids)} lines, {len(set(ids))} ids"  # every row, once
    assert {r["id"]: _without_timings(r) for r in got} == want
    print(f"cluster up in {up:.1f} s; node killed after {written_at_kill} of {N_ROWS} rows with "
          f"{len(on_worker)} pipeline actor(s) on it; first run exit {first}, "
          f"{'resumed' if resumed else 'completed without a re-run'}; {took:.1f} s with the cluster")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""
