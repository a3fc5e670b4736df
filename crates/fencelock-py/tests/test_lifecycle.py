"""The edges of a process's life: exit, Ctrl-C, cancellation, garbage collection, a killed
waiter. Each leaves nothing held, queued or running in the background."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import fencelock
import fencelock.aio


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))


def place_count(server, name: str) -> int:
    return server.raw().zcard(f"fencelock:{{{name}}}:waiters")


def in_line(child: subprocess.Popen, server, name: str) -> None:
    """Waits until `child` says it is waiting and its place is in lock `name`'s line."""
    assert child.stdout.readline().strip() == "waiting"
    deadline = time.monotonic() + 20
    while place_count(server, name) == 0:
        assert time.monotonic() < deadline, "the waiter never took its place"
        time.sleep(0.01)


def ended_in_line(script: str, server, name: str, end) -> None:
    """Runs `script` until it waits in lock `name`'s line, has `end(child)` end it, and checks
    that it exits with 0."""
    waiter = python(script, server.url, name, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        in_line(waiter, server, name)
        end(waiter)
        assert waiter.wait(10) == 0
    finally:
        waiter.kill()
        waiter.wait()


def python(script: str, *args: str, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args], text=True, **popen)


def assert_free(client: fencelock.Client, name: str, why: str) -> None:
    """The lock is free now: a try that does not wait takes it."""
    guard = client.lock(name).try_acquire()
    assert guard is not None, f"{why}: the lock is still held ({client.inspect(name)})"
    assert guard.release() is True


EXIT_HOLDING = """
    import sys, fencelock
    client = fencelock.Client(sys.argv[1])
    guard = client.lock(sys.argv[2], ttl=30.0).acquire()   # held at module level
    dropped = client.lock(sys.argv[2] + "/dropped", ttl=30.0).acquire()
    del dropped                                              # released in the background
    print("held", flush=True)
    sys.exit(0)
"""


def test_an_exit_while_holding_releases_what_is_held_and_dropped(server, name):
    client = fencelock.Client(server.url)
    holder = python(EXIT_HOLDING, server.url, name, stdout=subprocess.PIPE)
    assert holder.stdout.readline().strip() == "held"
    assert holder.wait(30) == 0
    assert_free(client, name, "a module-level guard at exit")
    assert_free(client, f"{name}/dropped", "a dropped guard's release at exit")


INTERRUPTED = """
    import os, sys, fencelock
    client = fencelock.Client(sys.argv[1])
    print("waiting", flush=True)
    try:
        client.lock(sys.argv[2]).acquire()
        print("acquired", flush=True)
    except KeyboardInterrupt:
        # Nothing left to the background: the process ends here, at once, without exit's wait.
        print("interrupted", flush=True)
        os._exit(0)
"""


def test_ctrl_c_leaves_the_line_before_it_raises(server, name):
    client = fencelock.Client(server.url)
    holder = client.lock(name, ttl=30.0).acquire()

    def interrupt(waiter: subprocess.Popen) -> None:
        os.kill(waiter.pid, signal.SIGINT)
        assert waiter.stdout.readline().strip() == "interrupted"

    ended_in_line(INTERRUPTED, server, name, interrupt)
    # The place was left before KeyboardInterrupt reached the script, which then ended without
    # anything in the background: the release does not pass the lock to a ghost.
    assert place_count(server, name) == 0
    assert holder.release() is True
    assert_free(client, name, "a Ctrl-C'd waiter")


EXIT_WAITING = """
    import sys, threading, fencelock
    client = fencelock.Client(sys.argv[1])
    threading.Thread(target=lambda: client.lock(sys.argv[2]).acquire(), daemon=True).start()
    print("waiting", flush=True)
    sys.stdin.readline()
    sys.exit(0)
"""


def test_an_exit_ends_the_waits_still_running(server, name):
    client = fencelock.Client(server.url)
    holder = client.lock(name, ttl=30.0).acquire()

    def leave(waiter: subprocess.Popen) -> None:
        waiter.stdin.write("exit\n")
        waiter.stdin.flush()

    ended_in_line(EXIT_WAITING, server, name, leave)
    # The exit stopped the wait of a thread it does not join: its place was left.
    assert place_count(server, name) == 0
    assert holder.release() is True


EXIT_EXTENDING = """
    import sys, threading, time, redis, fencelock
    client = fencelock.Client(sys.argv[1])
    guard = client.lock(sys.argv[2], ttl=30.0).acquire()
    redis.Redis(port=int(sys.argv[3])).execute_command("CLIENT", "PAUSE", "500", "ALL")
    threading.Thread(target=lambda: guard.extend(30.0), daemon=True).start()
    time.sleep(0.1)                                          # the extend is on its way
    sys.exit(0)
"""


def test_an_exit_releases_a_lock_whose_extend_is_in_flight(server, name):
    client = fencelock.Client(server.url)
    holder = python(EXIT_EXTENDING, server.url, name, str(server.port))
    assert holder.wait(30) == 0
    # Given back at exit once the extend let go of it, not left to its 30 s lease.
    assert_free(client, name, "a guard borrowed by an extend at exit")


EXIT_BUSY = """
    import random, sys, threading, time, fencelock
    client = fencelock.Client(sys.argv[1])

    def loop(i):
        while True:
            with client.lock(f"{sys.argv[2]}/{i % 3}", ttl=5.0):
                pass

    for i in range(8):
        threading.Thread(target=loop, args=(i,), daemon=True).start()
    time.sleep(random.uniform(0.3, 1.0))
    sys.exit(0)
"""


def test_an_exit_with_daemon_threads_in_calls_ends_with_status_0(server, name):
    """Daemon threads in the package's calls when the interpreter exits: a thread whose call
    ends while the interpreter finalizes must not take the GIL back through a native frame
    (CPython ends it by a forced unwind, which aborts the process from a Rust frame: SIGABRT,
    `FATAL: exception not rethrown`). 50 runs, four at a time: each exits with 0."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int):
        child = python(EXIT_BUSY, server.url, f"{name}/{i}", stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            out, _ = child.communicate(timeout=60)
        finally:
            child.kill()
        return child.returncode, out

    with ThreadPoolExecutor(4) as pool:
        ends = list(pool.map(one, range(50)))
    failed = [(status, out) for status, out in ends if status != 0]
    assert not failed, f"{len(failed)} of 50 exits failed; the first: {failed[0]}"


EXIT_ACQUIRING = """
    import random, sys, threading, time, fencelock
    client = fencelock.Client(sys.argv[1])

    def loop(i):
        while True:
            guard = client.lock(f"{sys.argv[2]}/{i % 4}", ttl=30.0).acquire()
            time.sleep(random.uniform(0, 0.002))
            guard.release()

    for i in range(8):
        threading.Thread(target=loop, args=(i,), daemon=True).start()
    time.sleep(random.uniform(0.2, 0.6))
    sys.exit(0)
"""


def held_keys(server, prefix: str) -> list:
    """The lock keys under `prefix` that are held now (not the fence keys, which never expire)."""
    keys = server.raw().keys(f"fencelock:{{{prefix}/*")
    return sorted(k.decode() for k in keys if k.decode().endswith("}"))


def test_an_exit_with_daemon_threads_acquiring_leaves_no_lock_held(server, name):
    """Daemon threads in the middle of acquires when the interpreter exits: a grant that lands
    while the exit gives back (or after it: a thread's result that nobody takes once the
    interpreter ends, a call started by a thread it does not join) is given back too, not left
    to its 30 s lease. 40 runs, four at a time: after each, no lock of its is held in Redis."""
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int):
        prefix = f"{name}/{i}"
        child = python(EXIT_ACQUIRING, server.url, prefix, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            out, _ = child.communicate(timeout=60)
        finally:
            child.kill()
        return child.returncode, out, held_keys(server, prefix)

    with ThreadPoolExecutor(4) as pool:
        ends = list(pool.map(one, range(40)))
    failed = [(status, out) for status, out, _ in ends if status != 0]
    assert not failed, f"{len(failed)} of 40 exits failed; the first: {failed[0]}"
    left = [keys for _, _, keys in ends if keys]
    assert not left, f"{len(left)} of 40 exits left locks held: {left[:3]}"


def test_a_cancelled_wait_has_left_its_place_when_cancelled_error_arrives(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        holder = await client.lock(name, ttl=30.0).acquire()
        waiter = asyncio.create_task(client.lock(name).acquire())
        while place_count(server, name) == 0:
            await asyncio.sleep(0.01)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert place_count(server, name) == 0
        assert await holder.release() is True

    run(main())
    assert_free(fencelock.Client(server.url), name, "a cancelled asyncio waiter")


async def cancel_once_answered(task: "asyncio.Task", server, name: str) -> None:
    """Cancels `task`, which waits for a call that takes lock `name`, after the call's answer
    has reached the event loop and before the task has resumed with it."""
    await asyncio.sleep(0)  # the task starts the call and waits for it
    # The event loop is held up while the grant lands and its answer is queued.
    deadline = time.monotonic() + 10
    while server.raw().get(f"fencelock:{{{name}}}") is None:
        assert time.monotonic() < deadline, "never granted"
        time.sleep(0.01)
    time.sleep(0.2)
    # One turn of the loop: the answer is handed to the task's future, and the task's resumption
    # is queued after this coroutine's; it is cancelled before it resumes.
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    # Undone before the cancellation reached the task's awaiter, not later by the collector.
    assert server.raw().get(f"fencelock:{{{name}}}") is None, "the grant outlived its cancellation"


def test_a_grant_that_lands_as_its_task_is_cancelled_is_undone(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        task = asyncio.create_task(client.lock(name, ttl=30.0).acquire())
        await cancel_once_answered(task, server, name)

    run(main())
    assert_free(fencelock.Client(server.url), name, "a grant raced by a cancellation")


def test_a_campaign_won_as_its_task_is_cancelled_is_resigned(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        task = asyncio.create_task(client.election(name).campaign("node-a", ttl=30.0))
        await cancel_once_answered(task, server, name)
        assert await client.election(name).leader() is None

    run(main())
    assert_free(fencelock.Client(server.url), name, "a leadership raced by a cancellation")


def test_a_cancellation_during_async_with_still_releases(server, name):
    """Tasks that take and give back the lock, cancelled again and again at random moments:
    after each, the lock is free (a cancelled release still releases)."""

    async def main():
        client = fencelock.aio.Client(server.url)
        leaked = []

        async def cycle():
            while True:
                async with client.lock(name, ttl=30.0):
                    await asyncio.sleep(0)

        for i in range(150):
            task = asyncio.create_task(cycle())
            await asyncio.sleep((i % 7) * 0.0005)
            task.cancel()
            try:
                await task
            except asyncio.CancelledError:
                pass
            guard = await client.lock(name).try_acquire()
            if guard is None:
                leaked.append(i)
                # Taken again once whatever holds it gives it back (or its lease runs out).
                guard = await client.lock(name, wait=40.0).acquire()
            await guard.release()
        return leaked

    assert run(main()) == []


def test_watches_end_with_their_hold(server, name):
    """`release_requested` and `lost` on many guards: each watch and its subscription ends
    when its guard is released."""
    client = fencelock.Client(server.url)
    for i in range(40):
        guard = client.lock(f"{name}/{i}", ttl=10.0).acquire()
        assert not guard.release_requested.is_set()
        assert not guard.lost.is_set()
        assert guard.release() is True
        assert guard.lost.wait(5.0), "lost was not set by the release"
    # The revocation channels are let go a second after their last listener.
    deadline = time.monotonic() + 10
    while True:
        channels = server.raw().pubsub_channels(f"fencelock:{{{name}/*}}:revoke")
        if not channels:
            break
        assert time.monotonic() < deadline, f"still subscribed: {channels}"
        time.sleep(0.1)


def test_awaiting_release_requested_on_a_released_guard_raises(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        guard = await client.lock(name, ttl=10.0).acquire()
        asked = asyncio.create_task(guard.release_requested())
        await asyncio.sleep(0.1)
        assert await guard.release() is True
        with pytest.raises(fencelock.NotHeld) as caught:
            await asyncio.wait_for(asked, 5.0)
        assert caught.value.reason == "released"
        with pytest.raises(fencelock.NotHeld):
            await asyncio.wait_for(guard.release_requested(), 5.0)

    run(main())


def test_asyncio_calls_run_no_executor_and_are_cancellable(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        guard = await client.lock(name, ttl=10.0).acquire()
        election = client.election(f"{name}/election")
        assert await election.leader() is None
        assert await client.fenced_store(name).accepted() == 0
        observing = election.observe()
        assert isinstance(await observing.__anext__(), fencelock.Vacant)
        # Waits that never end on their own are cancelled at once.
        for waiting in (guard.lost(), observing.__anext__()):
            task = asyncio.ensure_future(waiting)
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await asyncio.wait_for(task, 5.0)
        await observing.aclose()
        assert await guard.release() is True
        # Nothing ran on the loop's default executor.
        return asyncio.get_running_loop()._default_executor

    assert run(main()) is None


def test_a_burst_of_answers_parks_no_threads(server, name):
    """Many calls finish while Python is busy: they queue for one answering thread instead of
    each waiting for the GIL on a thread of its own."""

    def threads() -> int:
        with open(f"/proc/{os.getpid()}/status") as status:
            for line in status:
                if line.startswith("Threads:"):
                    return int(line.split()[1])
        raise AssertionError("no thread count")

    async def main():
        client = fencelock.aio.Client(server.url)
        await (await client.lock(f"{name}/warm").acquire()).release()
        before = threads()
        tasks = [asyncio.ensure_future(client.lock(f"{name}/{i}", ttl=10.0).acquire()) for i in range(200)]
        await asyncio.sleep(0)
        # Hold the GIL while the answers come in.
        end = time.monotonic() + 1.0
        while time.monotonic() < end:
            pass
        during = threads()
        guards = await asyncio.gather(*tasks)
        for guard in guards:
            await guard.release()
        return before, during

    before, during = run(main())
    assert during - before < 8, f"{before} threads before the burst, {during} during it"


def test_a_killed_waiter_passed_the_lock_costs_the_claim_only(server, name):
    """A waiter SIGKILLed in line cannot leave it. The release passes it the lock for the
    claim (1 s), not for its whole place (5 s): another waiter has the lock soon after."""
    client = fencelock.Client(server.url)
    holder = client.lock(name, ttl=30.0).acquire()
    dead = python(
        """
        import sys, fencelock
        print("waiting", flush=True)
        fencelock.Client(sys.argv[1]).lock(sys.argv[2]).acquire()
        """,
        server.url,
        name,
        stdout=subprocess.PIPE,
    )
    try:
        in_line(dead, server, name)
        os.kill(dead.pid, signal.SIGKILL)
        dead.wait()
    finally:
        dead.kill()
        dead.wait()
    released = time.monotonic()
    assert holder.release() is True
    pttl = server.raw().pttl(f"fencelock:{{{name}}}")
    assert 0 < pttl <= 1000, f"the dead waiter was passed {pttl} ms"
    guard = client.lock(name, wait=20.0).acquire()
    idle = time.monotonic() - released
    assert idle < 3.5, f"the lock was idle {idle:.2f} s after the pass"
    assert guard.release() is True


def test_a_collected_guard_and_leadership_are_given_back(server, name):
    client = fencelock.Client(server.url)
    guard = client.lock(name, ttl=30.0).acquire()
    leadership = client.election(f"{name}/e").campaign("node", ttl=30.0)
    del guard, leadership
    gc.collect()
    deadline = time.monotonic() + 10
    while client.inspect(name).is_held() or client.election(f"{name}/e").leader() is not None:
        assert time.monotonic() < deadline, "not given back"
        time.sleep(0.02)


@pytest.fixture
def busy_cores():
    """Two busy loops on the cores for the test's length (CI machines are loaded)."""
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        yield
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def test_exits_and_interrupts_under_load_leave_nothing_behind(server, name, busy_cores):
    """The exit and Ctrl-C cases again and again with the cores busy, where the background work
    they leave is slowest to run: each time, the lock is free at once afterwards."""
    client = fencelock.Client(server.url)
    for i in range(8):
        holder = python(EXIT_HOLDING, server.url, f"{name}/exit/{i}", stdout=subprocess.PIPE)
        assert holder.stdout.readline().strip() == "held"
        assert holder.wait(60) == 0
        assert_free(client, f"{name}/exit/{i}", f"exit {i}")
        assert_free(client, f"{name}/exit/{i}/dropped", f"exit {i}, the dropped guard")

        lock = f"{name}/interrupt/{i}"
        guard = client.lock(lock, ttl=30.0).acquire()
        waiter = python(INTERRUPTED, server.url, lock, stdout=subprocess.PIPE)
        try:
            assert waiter.stdout.readline().strip() == "waiting"
            deadline = time.monotonic() + 30
            while place_count(server, lock) == 0:
                assert time.monotonic() < deadline, "the waiter never took its place"
                time.sleep(0.01)
            os.kill(waiter.pid, signal.SIGINT)
            assert waiter.stdout.readline().strip() == "interrupted"
            assert waiter.wait(30) == 0
        finally:
            waiter.kill()
            waiter.wait()
        assert place_count(server, lock) == 0, f"interrupt {i}: a ghost in line"
        assert guard.release() is True
        assert_free(client, lock, f"interrupt {i}")


def test_a_wait_off_the_main_thread_sleeps_until_its_answer(server, name):
    """Only the main thread runs signal handlers: a wait on another thread is not woken to
    check them (each wake-up would take the GIL from the threads doing work)."""
    import threading

    client = fencelock.Client(server.url)
    holder = client.lock(name, ttl=30.0).acquire()
    switches = {}

    def count(tid: int) -> int:
        with open(f"/proc/{os.getpid()}/task/{tid}/status") as status:
            for line in status:
                if line.startswith("voluntary_ctxt_switches:"):
                    return int(line.split()[1])
        raise AssertionError("no context switch count")

    def wait() -> None:
        tid = threading.get_native_id()
        before = count(tid)
        with pytest.raises(fencelock.TimedOut):
            client.lock(name, wait=2.0).acquire()
        switches["during"] = count(tid) - before

    waiter = threading.Thread(target=wait)
    waiter.start()
    waiter.join(30)
    holder.release()
    # A handful for the call itself; a wait woken every 50 ms would show 40 or more.
    assert switches["during"] < 15, switches
