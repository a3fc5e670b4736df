"""The blocking API against a real server: exclusion between threads, fences, renewal,
release, the kinds."""

from __future__ import annotations

import gc
import threading
import time

import pytest

import fencelock


def test_threads_contending_never_overlap_and_fences_grow(server, name):
    client = fencelock.Client(server.url)
    inside = []
    fences = []
    overlaps = []
    mutex = threading.Lock()

    def worker() -> None:
        for _ in range(25):
            with client.lock(name, ttl=5.0) as guard:
                with mutex:
                    inside.append(1)
                    if len(inside) > 1:
                        overlaps.append(guard.fence)
                    fences.append(guard.fence)
                time.sleep(0.001)
                with mutex:
                    inside.pop()

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads)
    assert overlaps == []
    assert len(fences) == 200
    assert all(a < b for a, b in zip(fences, fences[1:])), "fences must grow in grant order"


def test_other_threads_run_while_one_waits(server, name):
    """The GIL is released during a wait: another thread keeps running Python meanwhile."""
    client = fencelock.Client(server.url)
    holder = client.lock(name, ttl=5.0).acquire()
    ticks = []
    stop = threading.Event()

    def tick() -> None:
        while not stop.is_set():
            ticks.append(time.monotonic())
            time.sleep(0.001)

    ticker = threading.Thread(target=tick)
    ticker.start()
    time.sleep(0.05)
    started = time.monotonic()
    with pytest.raises(fencelock.TimedOut):
        client.lock(name, wait=1.0).acquire()
    ended = time.monotonic()
    stop.set()
    ticker.join()
    holder.release()
    during = [t for t in ticks if started + 0.1 < t < ended - 0.1]
    assert len(during) > 100, f"the other thread ran {len(during)} times during a 1 s wait"


def test_a_with_block_left_by_an_exception_releases(server, name):
    client = fencelock.Client(server.url)
    with pytest.raises(RuntimeError):
        with client.lock(name, ttl=30.0):
            raise RuntimeError("the work failed")
    again = client.lock(name, wait=0).acquire()
    assert again.release() is True


def test_a_collected_guard_releases_in_the_background(server, name):
    client = fencelock.Client(server.url)
    guard = client.lock(name, ttl=30.0).acquire()
    del guard
    gc.collect()
    # The release goes out in the background; the lease would last 30 s.
    again = client.lock(name, wait=5.0).acquire()
    assert again.release() is True


def test_release_says_whether_it_was_still_held(server, name):
    client = fencelock.Client(server.url)
    guard = client.lock(name, ttl=5.0).acquire()
    assert guard.is_held() and guard.lost_reason is None
    assert guard.release() is True
    assert guard.release() is False
    assert not guard.is_held()
    assert guard.lost_reason == "released"


def test_extend_and_renewal_keep_the_lock(server, name):
    client = fencelock.Client(server.url)
    guard = client.lock(name, ttl=1.0).acquire()
    time.sleep(2.5)  # renewed in the background every third of the lease
    assert guard.is_held()
    guard.extend(20.0)
    assert 15.0 < guard.remaining() <= 20.0
    assert 15_000 < server.raw().pttl(f"fencelock:{{{name}}}") <= 20_000
    assert guard.release() is True


def test_a_lock_deleted_under_its_holder_is_reported_lost(server, name):
    client = fencelock.Client(server.url)
    guard = client.lock(name, ttl=1.0).acquire()
    lost = guard.lost
    server.raw().delete(f"fencelock:{{{name}}}")
    assert lost.wait(5.0), "guard.lost was not set"
    assert guard.lost_reason == "not_owner"
    with pytest.raises(fencelock.NotHeld) as caught:
        guard.extend(5.0)
    assert caught.value.lock == name


def test_a_block_that_lost_its_lock_says_so(server, name):
    client = fencelock.Client(server.url)
    with pytest.raises(fencelock.NotHeld) as caught:
        with client.lock(name, ttl=1.0) as guard:
            server.raw().delete(f"fencelock:{{{name}}}")
            assert guard.lost.wait(5.0)
    assert caught.value.reason == "not_owner"


def test_try_acquire(server, name):
    client = fencelock.Client(server.url)
    guard = client.lock(name).try_acquire()
    assert guard is not None
    assert client.lock(name).try_acquire() is None
    guard.release()


def test_kinds(server, name):
    client = fencelock.Client(server.url)
    # Reentrant: one handle takes it again; another handle waits.
    handle = client.reentrant_lock(f"{name}/re")
    first = handle.acquire(ttl=5.0)
    second = handle.acquire(ttl=5.0)
    assert first.fence == second.fence
    assert client.reentrant_lock(f"{name}/re").try_acquire() is None
    second.release()
    first.release()
    # Read-write: readers share, a writer waits for them.
    rw = client.read_write_lock(f"{name}/rw")
    readers = [rw.read().acquire(), rw.read().acquire()]
    assert rw.write().try_acquire() is None
    for r in readers:
        r.release()
    writer = rw.write().acquire()
    assert rw.read().try_acquire() is None
    writer.release()
    # Semaphore: two permits.
    sem = client.semaphore(f"{name}/sem", 2)
    permits = [sem.acquire(), sem.acquire()]
    assert sem.try_acquire() is None
    permits[0].release()
    third = sem.acquire()
    assert third.fence > permits[1].fence
    third.release()
    permits[1].release()
    # Fair: granted in the order of asking.
    order = []
    holder = client.fair_lock(f"{name}/fair").acquire()

    def wait(i: int) -> None:
        with client.fair_lock(f"{name}/fair", ttl=5.0):
            order.append(i)

    waiters = []
    for i in range(4):
        t = threading.Thread(target=wait, args=(i,))
        t.start()
        waiters.append(t)
        time.sleep(0.2)  # each is queued before the next asks
    holder.release()
    for t in waiters:
        t.join(30)
    assert order == [0, 1, 2, 3]


def test_fenced_store(server, name):
    client = fencelock.Client(server.url)
    store = client.fenced_store(name)
    old = client.lock(name).acquire()
    old_fence = old.fence
    old.release()
    new = client.lock(name).acquire()
    writes = fencelock.Writes().set(f"{name}:value", b"\x00\xff new").incr_by(f"{name}:n", 2)
    assert store.apply(new.fence, writes) == new.fence
    assert store.accepted() == new.fence
    with pytest.raises(fencelock.Fenced) as caught:
        store.apply(old_fence, fencelock.Writes().set(f"{name}:value", "old"))
    assert (caught.value.resource, caught.value.fence, caught.value.accepted) == (name, old_fence, new.fence)
    assert server.raw().get(f"{name}:value") == b"\x00\xff new"
    new.release()


def test_lock_delay_after_a_lease_runs_out_but_not_after_a_release(server, name):
    client = fencelock.Client(server.url)
    started = time.monotonic()
    vanished = client.lock(name, ttl=1.0, lock_delay=1.5, auto_renew=False).acquire()
    # As a crashed holder: no renewal, no release (the guard lives to the end of the test).
    again = client.lock(name, wait=10.0).acquire()
    assert time.monotonic() - started >= 2.5
    again.release()
    delayed = client.lock(name, ttl=1.0, lock_delay=20.0).acquire()
    delayed.release()
    client.lock(name, wait=0).acquire().release()
    assert not vanished.is_held()


def test_a_release_request_reaches_the_holder_and_takes_nothing(server, name):
    holder = fencelock.Client(server.url)
    other = fencelock.Client(server.url)
    guard = holder.lock(name, ttl=10.0).acquire()
    requested = guard.release_requested
    assert not requested.wait(0.3)
    assert other.request_release(name) is True
    assert requested.wait(5.0), "the holder was not told"
    assert guard.is_held() and other.lock(name).try_acquire() is None
    assert guard.release() is True
    assert other.request_release(name) is False
