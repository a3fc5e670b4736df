"""What users of redis-py and python-redis-lock reach for: closing a client (``close()``,
``aclose()``, ``with``, ``async with``), ``threading.Lock``'s protocol, options checked by the
package, and a lost lock's warning in ``logging``."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import threading
import time

import pytest

import fencelock
import fencelock.aio


def key_exists(server, name: str) -> bool:
    """Whether Redis has lock ``name``'s key (read with redis-py, not with fencelock)."""
    return bool(server.raw().exists(f"fencelock:{{{name}}}"))


def test_close_releases_holds_ends_waits_and_refuses_later_calls(server, name):
    client = fencelock.Client(server.url)
    other = fencelock.Client(server.url)
    guard = client.lock(name).acquire()
    leadership = client.election(name + "/e").campaign("me")
    assert key_exists(server, name)
    contested = other.lock(name + "/w").acquire()
    ended = []

    def waiter() -> None:
        try:
            client.lock(name + "/w").acquire()
        except BaseException as e:  # noqa: BLE001 (what the wait ended with)
            ended.append(e)

    thread = threading.Thread(target=waiter)
    thread.start()
    deadline = time.monotonic() + 10
    while other.inspect(name + "/w").waiting == 0:
        assert time.monotonic() < deadline, "the wait never got in line"
        time.sleep(0.02)
    started = time.monotonic()
    client.close()
    thread.join(5)
    assert not thread.is_alive(), "the wait did not end at close()"
    assert time.monotonic() - started < 2.5
    assert len(ended) == 1 and isinstance(ended[0], fencelock.ClientClosed), ended
    assert isinstance(ended[0], fencelock.InvalidArgument) and ended[0].code == "closed"
    assert "closed" in str(ended[0]) and ended[0].reason == "closed"
    assert not key_exists(server, name), "the lock is still in Redis after close()"
    assert not guard.is_held() and guard.lost_reason == "released"
    assert not leadership.is_held()
    assert other.inspect(name + "/w").waiting == 0
    contested.release()
    assert client.closed
    with pytest.raises(fencelock.ClientClosed, match="closed"):
        client.lock(name).acquire()
    with pytest.raises(fencelock.ClientClosed):
        client.inspect(name)
    assert guard.release() is False  # a guard's own call still answers
    client.close()  # twice: harmless


def test_close_with_the_server_stopped_ends_within_the_command_timeout(make_server, name):
    # The server SIGSTOPped: it answers nothing. close() ends the wait in progress at once,
    # waits for the release at most the package's flush bound (2 s), and closes the client's
    # connections: a release not confirmed by then is left to the lease, which is no longer
    # renewed.
    paused = make_server()
    client = fencelock.Client(paused.url, command_timeout=1.0)
    guard = client.lock(name, ttl=3.0).acquire()
    ended = []

    def waiter() -> None:
        try:
            client.lock(name, wait=60.0).acquire()
        except BaseException as e:  # noqa: BLE001 (what the wait ended with)
            ended.append(e)

    thread = threading.Thread(target=waiter)
    thread.start()
    deadline = time.monotonic() + 10
    while paused.raw().zcard(f"fencelock:{{{name}}}:waiters") == 0:
        assert time.monotonic() < deadline, "the wait never got in line"
        time.sleep(0.02)
    os.kill(paused.process.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        client.close()
        took = time.monotonic() - started
        thread.join(10)
        assert not thread.is_alive(), "the wait did not end at close()"
    finally:
        os.kill(paused.process.pid, signal.SIGCONT)
    # A bound, not a speed: a close that waited for the server would wait forever.
    assert took < 8.0, f"close() took {took:.1f} s with the server stopped"
    assert len(ended) == 1 and isinstance(ended[0], fencelock.ClientClosed), ended
    assert not guard.is_held()
    assert client.closed
    deadline = time.monotonic() + 10
    while key_exists(paused, name):
        assert time.monotonic() < deadline, "the lock outlived its lease on the resumed server"
        time.sleep(0.05)


def test_with_client_closes_it(server, name):
    with fencelock.Client(server.url) as client:
        guard = client.lock(name).acquire()
        assert key_exists(server, name)
    assert not key_exists(server, name)
    assert not guard.is_held()
    with pytest.raises(fencelock.ClientClosed):
        client.lock(name).try_acquire()


def test_aclose_and_async_with(server, name):
    async def main() -> None:
        other = fencelock.aio.Client(server.url)
        held = await other.lock(name + "/w").acquire()
        async with fencelock.aio.Client(server.url) as client:
            guard = await client.lock(name).acquire()
            assert key_exists(server, name)
            waiting = asyncio.ensure_future(client.lock(name + "/w").acquire())
            while (await other.inspect(name + "/w")).waiting == 0:
                await asyncio.sleep(0.02)
            await client.aclose()
            with pytest.raises(fencelock.ClientClosed):
                await asyncio.wait_for(waiting, 5)
            assert not key_exists(server, name)
            assert not guard.is_held()
        with pytest.raises(fencelock.ClientClosed):
            await client.inspect(name)
        assert (await other.inspect(name + "/w")).waiting == 0
        await held.release()

    asyncio.run(main())


def test_threading_lock_protocol(server, name):
    client = fencelock.Client(server.url)
    first = client.threading_lock(name, ttl=10.0)
    second = client.threading_lock(name, ttl=10.0)
    assert first.acquire() is True
    assert first.owned() and first.locked() and second.locked()
    fence = first.fence
    assert isinstance(fence, int)
    assert second.acquire(blocking=False) is False
    started = time.monotonic()
    assert second.acquire(timeout=0.3) is False
    assert 0.25 <= time.monotonic() - started < 5
    assert not second.owned() and second.fence is None
    first.release()
    assert not first.locked()
    with pytest.raises(RuntimeError, match="unlocked"):
        first.release()
    with second as held:
        assert held is second and second.fence > fence
        later = second.fence
    with pytest.raises(ValueError):
        first.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError):
        first.acquire(timeout=-5)
    assert first.acquire(timeout=1) is True and first.fence > later
    first.extend(60.0)
    assert first._guard.remaining() > 50
    # Lost meanwhile: the release says so.
    server.raw().delete(f"fencelock:{{{name}}}")
    with pytest.raises(fencelock.NotHeld):
        first.extend(10.0)
    with pytest.raises(fencelock.NotHeld):
        first.release()


def test_threading_lock_serves_threads_as_a_lock_object(server, name):
    lock = fencelock.Client(server.url).threading_lock(name)
    inside = []
    overlaps = []

    def worker() -> None:
        for _ in range(5):
            with lock:
                inside.append(1)
                if len(inside) > 1:
                    overlaps.append(1)
                time.sleep(0.001)
                inside.pop()

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert overlaps == []


BAD_OPTIONS = [
    (lambda c, n: c.lock(n, ttl="10s"), "ttl"),
    (lambda c, n: c.lock(n, wait=[1]), "wait"),
    (lambda c, n: c.lock(n, auto_renew="no"), "auto_renew"),
    (lambda c, n: c.lock(n, max_hold=True), "max_hold"),
    (lambda c, n: c.fair_lock(n, queue_timeout="1"), "queue_timeout"),
    (lambda c, n: c.fair_lock(n, timeout=1), "timeout"),
    (lambda c, n: c.semaphore(n, "3"), "permits"),
    (lambda c, n: c.semaphore(n, 3, take=1.5), "take"),
    (lambda c, n: c.multi_lock([n], wait="1"), "wait"),
    (lambda c, n: c.once(n, ttl="1"), "ttl"),
    (lambda c, n: c.reentrant_lock(n, max_reentry="2"), "max_reentry"),
    (lambda c, n: c.election(n).campaign("v", wait="1"), "wait"),
    (lambda c, n: c.threading_lock(n, ttl="1"), "ttl"),
]


@pytest.mark.parametrize("call,option", BAD_OPTIONS)
def test_options_of_the_wrong_type_are_invalid_argument(server, name, call, option):
    client = fencelock.Client(server.url)
    with pytest.raises(fencelock.InvalidArgument) as raised:
        call(client, name)
    error = raised.value
    assert not isinstance(error, TypeError)
    assert error.option == option and error.lock == name
    assert option in str(error) and name in str(error)
    assert "Spec" not in str(error)


def test_client_options_of_the_wrong_type_are_config_errors(server):
    with pytest.raises(fencelock.ConfigError, match="command_timeout") as raised:
        fencelock.Client(server.url, command_timeout="1s")
    assert raised.value.option == "command_timeout"
    with pytest.raises(fencelock.ConfigError, match="replica_shortfall"):
        fencelock.aio.Client(server.url, replica_shortfall="ignore")
    with pytest.raises(fencelock.InvalidArgument, match="name"):
        fencelock.Client(server.url).lock(42)


def test_a_lost_lock_is_a_warning_in_logging_naming_it(server, name, caplog):
    client = fencelock.Client(server.url)
    with caplog.at_level(logging.WARNING, logger="fencelock"):
        guard = client.lock(name, ttl=0.3, auto_renew=False).acquire()
        assert guard.lost.wait(5)
        deadline = time.monotonic() + 5
        while not any(name in r.getMessage() and r.levelno == logging.WARNING for r in caplog.records):
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            client.inspect(name)  # a call: the queued records are logged
            time.sleep(0.05)


def test_a_with_block_whose_lock_the_close_released_says_so(server, name):
    client = fencelock.Client(server.url)
    with pytest.raises(fencelock.NotHeld) as raised:
        with client.lock(name):
            client.close()
    assert raised.value.reason == "released"
    assert not key_exists(server, name)


UNKNOWN_OPTIONS = [
    (lambda c, n: c.lock(n, timeout=1), "timeout"),
    (lambda c, n: c.lock(n, queue_timeout=1), "queue_timeout"),
    (lambda c, n: c.lock(n).acquire(wait=1), "wait"),
    (lambda c, n: c.lock(n).try_acquire(blocking=False), "blocking"),
    (lambda c, n: c.fair_lock(n, blocking=False), "blocking"),
    (lambda c, n: c.semaphore(n, 3, count=2), "count"),
    (lambda c, n: c.read_write_lock(n).write(timeout=1), "timeout"),
    (lambda c, n: c.reentrant_lock(n, ttl=1), "ttl"),
    (lambda c, n: c.reentrant_lock(n).acquire(timeout=1), "timeout"),
    (lambda c, n: c.multi_lock([n], timeout=1), "timeout"),
    (lambda c, n: c.multi_lock([n]).acquire(wait=1), "wait"),
    (lambda c, n: c.once(n, retries=3), "retries"),
    (lambda c, n: c.election(n).campaign("v", timeout=1), "timeout"),
    (lambda c, n: c.threading_lock(n, wait=1), "wait"),
    (lambda c, n: c.threading_lock(n, sleep=0.1), "sleep"),
    (lambda c, n: c.threading_lock(n).acquire(token="t"), "token"),
]


@pytest.mark.parametrize("call,option", UNKNOWN_OPTIONS)
@pytest.mark.parametrize("flavour", ["blocking", "aio"])
def test_unknown_options_are_invalid_argument_naming_them(server, name, call, option, flavour):
    if flavour == "aio":
        if "threading_lock" in call.__code__.co_names:
            return  # (fencelock.aio has no threading lock)
        client = fencelock.aio.Client(server.url)
    else:
        client = fencelock.Client(server.url)
    with pytest.raises(fencelock.InvalidArgument) as raised:
        made = call(client, name)
        if asyncio.iscoroutine(made):
            made.close()
    error = raised.value
    assert not isinstance(error, TypeError)
    assert error.option == option and error.lock == name, (error.option, error.lock)
    assert option in str(error) and name in str(error), str(error)


def test_close_releases_and_closes_the_connections_while_its_objects_live(make_server, name):
    """What close() closes, as docs/python.md says: it releases, ends the waits, refuses, and
    closes the client's connections (commands, release messages) at once, though the client,
    its requests and its guards are all still referenced."""
    import gc

    server = make_server()  # of its own: no other test's connections
    raw = server.raw()

    gc.collect()  # (the startup check's connection, if it lingers)
    before = len(raw.client_list())

    def connections() -> int:
        return len(raw.client_list()) - before

    def settle(expected: int) -> int:
        deadline = time.monotonic() + 5
        while connections() != expected and time.monotonic() < deadline:
            time.sleep(0.02)
        return connections()

    assert connections() == 0
    client = fencelock.Client(server.url)
    request = client.lock(name, ttl=30.0)
    guard = request.acquire()
    ended = []

    def waiter() -> None:
        try:
            client.lock(name, wait=60.0).acquire()
        except fencelock.Error as error:
            ended.append(error)

    thread = threading.Thread(target=waiter)
    thread.start()
    channel = f"fencelock:{{{name}}}:released"
    deadline = time.monotonic() + 5
    while dict(raw.pubsub_numsub(channel)).get(channel.encode(), 0) == 0:
        assert time.monotonic() < deadline, "the waiter never subscribed"
        time.sleep(0.01)
    open_now = connections()
    assert open_now >= 2, "the commands' connection and the release messages' one"
    client.close()
    thread.join(5)
    assert len(ended) == 1 and isinstance(ended[0], fencelock.ClientClosed), ended
    assert not key_exists(server, name) and guard.release() is False
    with pytest.raises(fencelock.ClientClosed) as raised:
        request.acquire()
    error = raised.value
    assert isinstance(error, fencelock.InvalidArgument)
    assert (error.code, error.reason) == ("closed", "closed")
    assert settle(0) == 0, "close() left connections open"
    assert dict(raw.pubsub_numsub(channel)).get(channel.encode(), 0) == 0
    # Every object of the client is still referenced, and nothing connects again.
    with pytest.raises(fencelock.ClientClosed):
        client.lock(name).acquire()
    time.sleep(0.2)
    assert connections() == 0, "a call after the close connected again"
    del client, request, guard
