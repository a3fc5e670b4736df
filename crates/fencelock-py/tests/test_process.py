"""Processes: a holder paused past its lease is refused and told; Ctrl-C gives a wait up;
a forked child works with its own connections and leaves the parent's locks alone."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import fencelock

HOLDER = textwrap.dedent(
    """
    import sys, fencelock
    url, name = sys.argv[1], sys.argv[2]
    client = fencelock.Client(url)
    guard = client.lock(name, ttl=1.0).acquire()
    lost = guard.lost
    print("fence", guard.fence, flush=True)
    sys.stdin.readline()               # paused and resumed meanwhile
    set_in_time = lost.wait(5.0)
    try:
        client.fenced_store(name).apply(guard.fence, fencelock.Writes().set(name + ":owner", "stale"))
        print("written", flush=True)
    except fencelock.Fenced as e:
        print("refused", e.fence, e.accepted, set_in_time, guard.lost_reason, flush=True)
    """
)


def test_a_holder_paused_past_its_lease_is_refused_and_told(server, name):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, server.url, name],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        line = holder.stdout.readline().split()
        assert line[0] == "fence", line
        old_fence = int(line[1])
        os.kill(holder.pid, signal.SIGSTOP)
        client = fencelock.Client(server.url)
        # The paused holder cannot renew: the lock is granted again once its lease runs out.
        guard = client.lock(name, ttl=10.0, wait=10.0).acquire()
        assert guard.fence > old_fence
        client.fenced_store(name).apply(guard.fence, fencelock.Writes().set(f"{name}:owner", "new"))
        os.kill(holder.pid, signal.SIGCONT)
        holder.stdin.write("go\n")
        holder.stdin.flush()
        answer = holder.stdout.readline().split()
        assert answer[:3] == ["refused", str(old_fence), str(guard.fence)], answer
        assert answer[3] == "True", "guard.lost was not set"
        assert answer[4] in ("expired", "not_owner")
        assert server.raw().get(f"{name}:owner") == b"new"
        guard.release()
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        holder.kill()
        holder.wait()


WAITER = textwrap.dedent(
    """
    import sys, fencelock
    client = fencelock.Client(sys.argv[1])
    print("waiting", flush=True)
    try:
        client.lock(sys.argv[2]).acquire()
        print("acquired", flush=True)
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    """
)


def test_ctrl_c_gives_a_wait_up_with_nothing_held(server, name):
    client = fencelock.Client(server.url)
    holder = client.lock(name, ttl=30.0).acquire()
    waiter = subprocess.Popen(
        [sys.executable, "-c", WAITER, server.url, name], stdout=subprocess.PIPE, text=True
    )
    try:
        assert waiter.stdout.readline().strip() == "waiting"
        time.sleep(0.5)
        os.kill(waiter.pid, signal.SIGINT)
        assert waiter.stdout.readline().strip() == "interrupted"
        assert waiter.wait(10) == 0
    finally:
        waiter.kill()
        waiter.wait()
    assert holder.release() is True
    # The interrupted waiter took nothing: the lock is free at once.
    again = client.lock(name, wait=0).acquire()
    assert again.release() is True


def _child(client, guard, name, answers):
    try:
        answers.put(("parent lock", client.lock(name, wait=0).try_acquire() is None))
        own = client.lock(f"{name}/child", ttl=5.0).acquire()
        answers.put(("own lock", own.fence > 0))
        own.release()
        try:
            guard.release()
            answers.put(("parent guard", "released"))
        except RuntimeError as e:
            answers.put(("parent guard", str(e)))
    except Exception as e:  # reported, so that the test fails with it
        answers.put(("error", repr(e)))


def test_a_forked_child_connects_afresh_and_leaves_the_parents_lock(server, name):
    client = fencelock.Client(server.url)
    guard = client.lock(name, ttl=30.0).acquire()
    context = multiprocessing.get_context("fork")
    answers = context.Queue()
    child = context.Process(target=_child, args=(client, guard, name, answers))
    child.start()
    child.join(30)
    assert child.exitcode == 0, "the child hung or crashed"
    got = dict(answers.get(timeout=5) for _ in range(3))
    assert "error" not in got, got
    assert got["parent lock"] is True
    assert got["own lock"] is True
    assert "before it forked" in got["parent guard"]
    # The child's exit released nothing of the parent's.
    assert guard.is_held()
    assert guard.release() is True


def _fork_and_lock(url: str, name: str, answers) -> None:
    try:
        client = fencelock.Client(url)
        guard = client.lock(name, ttl=5.0, wait=10.0).acquire()
        answers.put(("ok", guard.release()))
    except Exception as e:  # reported, so that the test fails with it
        answers.put(("error", repr(e)))


def test_children_forked_while_a_thread_takes_locks_never_hang(server, name):
    """A thread of the parent takes and gives back locks all the time (the runtime's threads
    and locks busy) while the parent forks: every child connects afresh and takes a lock."""
    client = fencelock.Client(server.url)
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            client.lock(f"{name}/parent", ttl=5.0).acquire().release()

    churner = threading.Thread(target=churn)
    churner.start()
    context = multiprocessing.get_context("fork")
    hung = []
    try:
        for i in range(20):
            answers = context.Queue()
            child = context.Process(target=_fork_and_lock, args=(server.url, f"{name}/child/{i}", answers))
            child.start()
            child.join(30)
            if child.exitcode is None:
                hung.append(i)
                child.kill()
                child.join()
                continue
            assert answers.get(timeout=5) == ("ok", True), f"child {i}"
    finally:
        stop.set()
        churner.join(30)
    assert hung == []


PID_REUSE = """
import os, sys, time, fencelock

url, name = sys.argv[1], sys.argv[2]
# This process is pid 1 of a PID namespace of its own.
x = os.fork()
if x == 0:
    # X: a client, a lock held, then a child, Y; X ends.
    client = fencelock.Client(url)
    guard = client.lock(name, ttl=30.0).acquire()
    xpid = os.getpid()
    if os.fork() == 0:
        while os.getppid() == xpid:
            time.sleep(0.01)
        # Y: once X is gone, a child of Y with X's pid (the pids of a namespace are its own).
        for attempt in range(200):
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(xpid - 1))
            z = os.fork()
            if z == 0:
                if os.getpid() != xpid:
                    os._exit(3)
                # Z, with X's pid and X's objects: they are X's, not Z's.
                try:
                    guard.release()
                    print("released X's lock", flush=True)
                except RuntimeError as e:
                    print("refused", flush=True)
                own = client.lock(name + "/z", ttl=5.0, wait=0).acquire()
                print("own lock", own.release(), flush=True)
                os._exit(0)
            _, status = os.waitpid(z, 0)
            if os.waitstatus_to_exitcode(status) != 3:
                os._exit(0)
            time.sleep(0.01)
        print("X's pid was never given again", flush=True)
        os._exit(1)
    os._exit(0)
os.waitpid(x, 0)
# Y is ours now (the namespace's init): wait for it.
while True:
    try:
        os.wait()
    except ChildProcessError:
        break
"""


def test_a_child_with_a_reused_pid_does_not_take_the_objects_for_its_own(server, name):
    """The objects of a process that ended are refused in a later process that happens to
    get the same pid: the check is by fork, not by pid."""
    import shutil

    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is missing", pytrace=False)
    done = subprocess.run(
        [unshare, "--pid", "--fork", "--kill-child", "--mount-proc", sys.executable, "-c", PID_REUSE, server.url, name],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.stdout.splitlines() == ["refused", "own lock True"], (done.stdout, done.stderr)
