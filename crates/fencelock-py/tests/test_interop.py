"""One lock for Python, Rust and the command line: they exclude each other, fences grow across
them, a release on one side wakes a waiter on the other (no polling: the leases are long), a
Python fenced write refuses a paused `fencelock run` job's fence, and `fencelock run --once` and
`client.once` keep one record."""

from __future__ import annotations

import os
import signal
import subprocess
import time

import pytest

import fencelock


def cli(fencelock_cli, server, *args, **popen):
    env = dict(os.environ, FENCELOCK_URL=server.url)
    return subprocess.Popen([fencelock_cli, *args], env=env, **popen)


def fence_of_run(fencelock_cli, server, name):
    done = cli(
        fencelock_cli, server, "run", "--ttl", "30s", name, "--",
        "sh", "-c", "echo $FENCELOCK_FENCE", stdout=subprocess.PIPE, text=True,
    )
    out, _ = done.communicate(timeout=30)
    assert done.returncode == 0
    return int(out.strip())


def test_python_rust_and_the_cli_exclude_each_other(server, name, fencelock_cli, rust_holder):
    client = fencelock.Client(server.url)
    guard = client.lock(name, ttl=30.0).acquire()
    refused = cli(fencelock_cli, server, "run", "--no-wait", name, "--", "true")
    assert refused.wait(30) not in (0, None), "fencelock run got a lock Python holds"
    guard.release()

    job = cli(fencelock_cli, server, "run", "--ttl", "30s", name, "--", "sleep", "3")
    try:
        deadline = time.monotonic() + 10
        while server.raw().exists(f"fencelock:{{{name}}}") == 0:
            assert time.monotonic() < deadline, "fencelock run never took the lock"
            time.sleep(0.02)
        assert client.lock(name).try_acquire() is None, "Python got a lock fencelock run holds"
        assert job.wait(30) == 0
    finally:
        job.kill()
        job.wait()
    client.lock(name, wait=0).acquire().release()

    rust = subprocess.Popen([rust_holder, server.url, name, "3"], stdout=subprocess.PIPE, text=True)
    try:
        assert rust.stdout.readline().startswith("fence ")
        assert client.lock(name).try_acquire() is None, "Python got a lock a Rust program holds"
        assert rust.wait(30) == 0
    finally:
        rust.kill()
        rust.wait()


def test_fences_grow_across_python_rust_and_the_cli(server, name, fencelock_cli, rust_holder):
    client = fencelock.Client(server.url)
    fences = []
    for round_ in range(3):
        guard = client.lock(name).acquire()
        fences.append(guard.fence)
        guard.release()
        fences.append(fence_of_run(fencelock_cli, server, name))
        rust = subprocess.run([rust_holder, server.url, name, "0"], capture_output=True, text=True, timeout=30)
        assert rust.returncode == 0, rust.stderr
        fences.append(int(rust.stdout.split()[1]))
    assert all(a < b for a, b in zip(fences, fences[1:])), fences


def test_a_python_waiter_is_woken_by_a_rust_release(server, name, rust_holder):
    client = fencelock.Client(server.url)
    rust = subprocess.Popen([rust_holder, server.url, name, "1"], stdout=subprocess.PIPE, text=True)
    try:
        assert rust.stdout.readline().startswith("fence ")
        # The Rust holder's lease is 30 s; the waiter gets the lock when it is released.
        guard = client.lock(name, ttl=30.0, wait=20.0).acquire()
        woken = time.monotonic()
        assert rust.stdout.readline().startswith("released")
        released = time.monotonic()
        assert rust.wait(10) == 0
    finally:
        rust.kill()
        rust.wait()
    guard.release()
    # Granted within a second of the release (the release line is read after the grant).
    assert woken - released < 1.0


def test_a_cli_waiter_is_woken_by_a_python_release(server, name, fencelock_cli):
    client = fencelock.Client(server.url)
    guard = client.lock(name, ttl=30.0).acquire()
    waiter = cli(fencelock_cli, server, "run", "--wait", "20s", name, "--", "true")
    try:
        time.sleep(1.0)
        assert waiter.poll() is None, "the CLI did not wait"
        released = time.monotonic()
        assert guard.release() is True
        assert waiter.wait(20) == 0
        ended = time.monotonic()
    finally:
        waiter.kill()
        waiter.wait()
    # The lease was 30 s: only the release message could wake it this soon.
    assert ended - released < 2.0, f"the CLI waiter took {ended - released:.2f} s"


def test_python_fenced_store_refuses_a_paused_run_jobs_fence(server, name, fencelock_cli):
    job = cli(
        fencelock_cli, server, "run", "--ttl", "1s", name, "--",
        "sh", "-c", "echo $FENCELOCK_FENCE; exec sleep 60",
        stdout=subprocess.PIPE, text=True,
    )
    try:
        job_fence = int(job.stdout.readline())
        os.kill(job.pid, signal.SIGSTOP)   # fencelock run itself: it can no longer renew
        client = fencelock.Client(server.url)
        guard = client.lock(name, ttl=30.0, wait=10.0).acquire()
        assert guard.fence > job_fence
        store = client.fenced_store(name)
        store.apply(guard.fence, fencelock.Writes().set(f"{name}:report", "new"))
        try:
            store.apply(job_fence, fencelock.Writes().set(f"{name}:report", "stale"))
            raise AssertionError("the stale fence was accepted")
        except fencelock.Fenced as refused:
            assert (refused.fence, refused.accepted) == (job_fence, guard.fence)
        assert server.raw().get(f"{name}:report") == b"new"
        guard.release()
    finally:
        os.kill(job.pid, signal.SIGCONT)
        job.kill()
        job.wait()


def once_by_cli(fencelock_cli, server, key, lock, script):
    """`fencelock run --once KEY [LOCK] -- sh -c SCRIPT`: its status, stdout and stderr."""
    names = [lock] if lock else []
    done = cli(
        fencelock_cli, server, "run", "--once", key, *names, "--", "sh", "-c", script,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    out, err = done.communicate(timeout=30)
    return done.returncode, out, err


@pytest.mark.parametrize("named", [False, True], ids=["lock-is-the-key", "lock-named"])
def test_once_from_the_cli_and_from_python_is_one_record(server, name, fencelock_cli, named):
    client = fencelock.Client(server.url)

    # The command first: Python finds the work done and does not call it.
    key = f"{name}/cli-first"
    lock = f"{key}/lock" if named else None
    code, out, err = once_by_cli(fencelock_cli, server, key, lock, 'echo "$FENCELOCK_NAME"')
    assert code == 0, err
    assert out.strip() == (lock or key)
    called = []
    found = client.once(key, lock=lock).run(called.append)
    assert isinstance(found, fencelock.Done), f"Python did {key} again after the command: {found!r}"
    assert called == []

    # Python first: the command finds the record and runs nothing.
    key = f"{name}/python-first"
    lock = f"{key}/lock" if named else None
    assert isinstance(client.once(key, lock=lock).run(lambda fence: fence), fencelock.Ran)
    code, out, err = once_by_cli(fencelock_cli, server, key, lock, "echo ran")
    assert (code, out) == (0, ""), err
    assert "was done before" in err, err
