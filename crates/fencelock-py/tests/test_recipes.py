"""The recipes from Python: several locks at once, weighted permits, run-once."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import fencelock
import fencelock.aio


def test_multi_lock_takes_all_or_none(server, name):
    client = fencelock.Client(server.url)
    a, b = f"{name}/a", f"{name}/b"
    held = client.lock(b, ttl=30.0).acquire()
    with pytest.raises(fencelock.Busy) as caught:
        client.multi_lock([a, b], wait=0).acquire()
    assert caught.value.lock == b
    assert not client.inspect(a).is_held(), "a was left held"
    held.release()
    with client.multi_lock([b, a], ttl=10.0) as both:
        assert list(both.fences) == [b, a]
        assert all(fence > 0 for fence in both.fences.values())
        assert both.is_held()
        assert client.inspect(a).is_held() and client.inspect(b).is_held()
    assert not client.inspect(a).is_held()


def test_a_multi_lock_block_that_lost_a_name_says_which(server, name):
    client = fencelock.Client(server.url)
    a, b = f"{name}/a", f"{name}/b"
    with pytest.raises(fencelock.NotHeld) as caught:
        with client.multi_lock([a, b], ttl=10.0):
            server.raw().delete(f"fencelock:{{{b}}}")
    assert (caught.value.lock, caught.value.reason) == (b, "not_owner")
    assert not client.inspect(a).is_held(), "a was left held"


def test_multi_lock_reversed_orders_never_deadlock(server, name):
    client = fencelock.Client(server.url)
    names = [f"{name}/{i}" for i in range(3)]
    errors = []

    def worker(order):
        try:
            for _ in range(15):
                with client.multi_lock(order, ttl=10.0):
                    time.sleep(0.001)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(names if i % 2 else names[::-1],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    assert not any(t.is_alive() for t in threads), "a deadlock"
    assert errors == []


def test_weighted_permits(server, name):
    client = fencelock.Client(server.url)
    three = client.semaphore(name, 5, take=3).acquire()
    assert [h.permits for h in client.inspect(name).shared] == [3]
    assert client.semaphore(name, 5, take=3).try_acquire() is None
    two = client.semaphore(name, 5, take=2).acquire()
    three.release()
    two.release()
    with pytest.raises(fencelock.InvalidArgument):
        client.semaphore(name, 5, take=6).acquire()
    # Permits of a lock that has none: the library's own check, when it is acquired.
    with pytest.raises(fencelock.InvalidArgument, match="semaphore"):
        client._request(fencelock._api.spec("lock", name, take=2)).acquire()


def test_once_runs_the_work_once_and_again_after_a_failure(server, name):
    client = fencelock.Client(server.url)
    calls = []

    def work(fence):
        calls.append(fence)
        time.sleep(0.2)
        return "migrated"

    results = []
    threads = [threading.Thread(target=lambda: results.append(client.once(name).run(work))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(calls) == 1
    ran = [r for r in results if isinstance(r, fencelock.Ran)]
    done = [r for r in results if isinstance(r, fencelock.Done)]
    assert len(ran) == 1 and ran[0].value == "migrated"
    assert len(done) == 3 and all(d.fence == calls[0] for d in done)

    def failing(fence):
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        client.once(f"{name}/2").run(failing)
    assert isinstance(client.once(f"{name}/2").run(lambda fence: fence), fencelock.Ran)


def test_once_and_multi_lock_from_asyncio(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)

        async def work(fence):
            return fence

        first = await client.once(name).run(work)
        second = await client.once(name).run(work)
        assert isinstance(first, fencelock.Ran) and isinstance(second, fencelock.Done)
        assert second.fence == first.value
        async with client.multi_lock([f"{name}/x", f"{name}/y"]) as both:
            assert len(both.fences) == 2

    asyncio.run(main())
