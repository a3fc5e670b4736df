"""The asyncio API: tasks contending, cancellation, the lost signal."""

from __future__ import annotations

import asyncio
import time

import pytest

import fencelock
import fencelock.aio


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 120))


def test_tasks_contending_never_overlap_and_fences_grow(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        inside = []
        fences = []
        overlaps = []

        async def worker():
            for _ in range(20):
                async with client.lock(name, ttl=5.0) as guard:
                    inside.append(1)
                    if len(inside) > 1:
                        overlaps.append(guard.fence)
                    fences.append(guard.fence)
                    await asyncio.sleep(0.001)
                    inside.pop()

        await asyncio.gather(*(worker() for _ in range(8)))
        return fences, overlaps

    fences, overlaps = run(main())
    assert overlaps == []
    assert len(fences) == 160
    assert all(a < b for a, b in zip(fences, fences[1:]))


def test_a_cancelled_wait_holds_nothing(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        holder = await client.lock(name, ttl=10.0).acquire()
        waiter = asyncio.create_task(client.lock(name).acquire())
        await asyncio.sleep(0.3)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await holder.release() is True
        # Had the cancelled waiter taken the lock, this would be Busy.
        again = await client.lock(name, wait=0).acquire()
        assert await again.release() is True

    run(main())


def test_a_cancelled_wait_waits_for_its_own_give_back_only(server, make_server, name):
    """A timeout around an acquire, in a process whose other holds are being released in the
    background (through a paused server, so their releases take seconds), returns once that
    acquire's own place in line is left: not after the process's background work, which took
    up to 2 s before."""
    slow = make_server()

    async def main():
        client = fencelock.aio.Client(server.url)
        other = fencelock.aio.Client(slow.url, command_timeout=10.0)
        guards = [await other.lock(f"{name}/other/{i}", ttl=30.0).acquire() for i in range(8)]
        holder = await client.lock(name, ttl=30.0).acquire()
        slow.raw().execute_command("CLIENT", "PAUSE", "4000", "ALL")
        releases = [asyncio.create_task(g.release()) for g in guards]
        await asyncio.sleep(0.2)
        started = time.monotonic()
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(client.lock(name).acquire(), 0.3)
        took = time.monotonic() - started
        # 0.3 s and its own give-back; the whole background work would take 2.3 s at least.
        assert took < 1.7, f"the cancelled wait took {took:.2f} s"
        assert not any(r.done() for r in releases), "the other releases were not held up"
        assert (await client.inspect(name)).waiting == 0, "its place in line is left"
        assert await holder.release() is True
        assert all(await asyncio.gather(*releases))

    run(main())


def test_lost_is_awaited(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        guard = await client.lock(name, ttl=1.0).acquire()
        lost = asyncio.create_task(guard.lost())
        await asyncio.sleep(0.1)
        assert not lost.done()
        server.raw().delete(f"fencelock:{{{name}}}")
        assert await asyncio.wait_for(lost, 5.0) == "not_owner"
        assert guard.lost_reason == "not_owner"
        assert not guard.is_held()
        with pytest.raises(fencelock.NotHeld):
            await guard.extend(2.0)

    run(main())


def test_errors_extend_release_and_fenced_writes(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        guard = await client.lock(name, ttl=2.0).acquire()
        with pytest.raises(fencelock.Busy):
            await client.lock(name, wait=0).acquire()
        with pytest.raises(fencelock.TimedOut):
            await client.lock(name, wait=0.2).acquire()
        assert await client.lock(name).try_acquire() is None
        await guard.extend(20.0)
        assert guard.remaining() > 15.0
        store = client.fenced_store(name)
        assert await store.apply(guard.fence, fencelock.Writes().set(f"{name}:v", "x")) == guard.fence
        assert await store.accepted() == guard.fence
        with pytest.raises(fencelock.Fenced):
            await store.apply(guard.fence - 1, fencelock.Writes().set(f"{name}:v", "y"))
        assert await guard.release() is True
        assert await guard.release() is False

    run(main())


def test_the_event_loop_keeps_running_during_a_wait(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        holder = await client.lock(name, ttl=10.0).acquire()
        ticks = 0

        async def tick():
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0.01)

        ticker = asyncio.create_task(tick())
        with pytest.raises(fencelock.TimedOut):
            await client.lock(name, wait=0.5).acquire()
        ticker.cancel()
        await holder.release()
        return ticks

    assert run(main()) >= 20


def test_a_release_request_is_awaited(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        guard = await client.lock(name, ttl=10.0).acquire()
        heard = asyncio.create_task(guard.release_requested())
        await asyncio.sleep(0.2)
        assert not heard.done()
        assert await client.request_release(name) is True
        await asyncio.wait_for(heard, 5.0)
        assert guard.is_held()
        assert await guard.release() is True

    run(main())
