"""Fixtures: real redis-server (or valkey-server) processes on free loopback ports, started by
the tests and stopped by their PID, and the paths of the Rust programs the interop tests run.

The server binary is $FENCELOCK_TEST_SERVER, else `redis-server` on PATH; a missing one fails
the run (it is never skipped)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from datetime import datetime
from typing import Callable, Iterator, List, Optional

import pytest
import redis

ROOT = Path(__file__).resolve().parents[3]

# A suite started in the background of a shell without job control (a CI script's `&`) inherits
# SIGINT ignored, and so would every child it starts: a child's Ctrl-C would never arrive. With
# a handler here, children start with SIGINT at its default (an exec resets a handled signal, not
# an ignored one), as they would from a terminal.
signal.signal(signal.SIGINT, signal.default_int_handler)


def server_binary() -> str:
    binary = os.environ.get("FENCELOCK_TEST_SERVER") or shutil.which("redis-server")
    if not binary or not Path(binary).exists():
        pytest.fail(
            "no redis-server: install it (scripts/ensure-redis) or set FENCELOCK_TEST_SERVER",
            pytrace=False,
        )
    return binary


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One server process of the test's own."""

    def __init__(self, extra: Optional[List[str]] = None, binary: Optional[str] = None) -> None:
        self.port = free_port()
        self.dir = tempfile.mkdtemp(prefix="fencelock-py-")
        args = [
            binary or server_binary(),
            "--port", str(self.port),
            "--bind", "127.0.0.1",
            "--save", "",
            "--appendonly", "no",
            "--dir", self.dir,
        ] + (extra or [])
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.url = f"redis://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 10
        while True:
            try:
                self.raw(password=self._password(extra)).ping()
                break
            except (redis.ConnectionError, redis.BusyLoadingError):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    pytest.fail(f"{args[0]} did not start on port {self.port}", pytrace=False)
                time.sleep(0.02)
            except redis.AuthenticationError:
                break

    @staticmethod
    def _password(extra: Optional[List[str]]) -> Optional[str]:
        if extra and "--requirepass" in extra:
            return extra[extra.index("--requirepass") + 1]
        return None

    def raw(self, password: Optional[str] = None, username: Optional[str] = None) -> redis.Redis:
        return redis.Redis(port=self.port, password=password, username=username, socket_timeout=5)

    def stop(self) -> None:
        if self.process.poll() is None:
            try:
                os.kill(self.process.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.stop()


@pytest.fixture
def make_server() -> Iterator:
    """Starts servers with extra arguments for one test; stops them after it."""
    started: List[Server] = []

    def make(*extra: str, binary: Optional[str] = None) -> Server:
        s = Server(list(extra), binary)
        started.append(s)
        return s

    try:
        yield make
    finally:
        for s in started:
            s.stop()


_counter = iter(range(1_000_000))


@pytest.fixture
def name(request) -> str:
    """A lock name of the test's own."""
    return f"py/{request.node.name}/{next(_counter)}"


def redis_server() -> str:
    """Debian's redis-server, built with TLS (the Valkey binary of the second pass is not)."""
    binary = shutil.which("redis-server")
    if not binary:
        pytest.fail("no redis-server on PATH: scripts/ensure-redis installs it", pytrace=False)
    return binary


def rust_program(env: str, default: Path) -> str:
    path = Path(os.environ.get(env, default))
    if not path.exists():
        pytest.fail(
            f"{path} is missing: build it (cargo build --workspace --all-targets) or set {env}",
            pytrace=False,
        )
    return str(path)


@pytest.fixture(scope="session")
def fencelock_cli() -> str:
    return rust_program("FENCELOCK_BIN", ROOT / "target" / "debug" / "fencelock")


@pytest.fixture(scope="session")
def rust_holder() -> str:
    return rust_program("FENCELOCK_HOLD_EXAMPLE", ROOT / "target" / "debug" / "examples" / "hold")


# The schedulers' tests (Celery, APScheduler): their processes, what they wait for, their ticks.


def wait_for(what: str, check: Callable[[], object], within: float) -> None:
    """Polls ``check`` until it is true; fails after ``within`` seconds, saying ``what``."""
    deadline = time.monotonic() + within
    while not check():
        assert time.monotonic() < deadline, f"{what}: not within {within} s"
        time.sleep(0.05)


def stop_processes(processes: List[subprocess.Popen], sig: int = signal.SIGTERM, within: float = 20.0) -> None:
    """Sends ``sig`` to each process still running, and SIGKILLs those not gone ``within``
    seconds after."""
    for p in processes:
        if p.poll() is None:
            p.send_signal(sig)
    deadline = time.monotonic() + within
    for p in processes:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def tick_of(record: str) -> float:
    """The tick of a run-once record's key (``...:JOB@2026-11-29T00:00:00.000Z``), in seconds
    since the epoch."""
    return datetime.fromisoformat(record.rsplit("@", 1)[1].replace("Z", "+00:00")).timestamp()
