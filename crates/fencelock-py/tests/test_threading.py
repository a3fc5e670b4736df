"""``client.threading_lock(name)`` shared by threads: one owner per hold. A thread never ends a
hold that another thread's acquire took, and a release after a loss says so (``NotHeld``) and
leaves any newer hold alone."""

from __future__ import annotations

import queue
import threading
import time

import pytest

import fencelock


def _raised(call):
    """What ``call()`` raised (``None`` if it returned)."""
    try:
        call()
    except BaseException as e:  # handed to the test
        return e
    return None


class Worker:
    """A thread that runs the calls it is given, one at a time, and hands back what each
    returned or raised (a thread's acquire and its release happen on that thread)."""

    def __init__(self) -> None:
        self._calls: "queue.Queue" = queue.Queue()
        self._answers: "queue.Queue" = queue.Queue()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            call = self._calls.get()
            if call is None:
                return
            try:
                self._answers.put(("value", call()))
            except BaseException as e:  # handed to the test
                self._answers.put(("error", e))

    def start(self, call) -> None:
        self._calls.put(call)

    def answer(self, timeout: float = 30.0):
        """What the call returned, or the exception it raised (as a value)."""
        kind, value = self._answers.get(timeout=timeout)
        return value

    def answered(self, timeout: float) -> bool:
        """Whether the call is over within ``timeout`` (its answer kept for :meth:`answer`)."""
        try:
            kept = self._answers.get(timeout=timeout)
        except queue.Empty:
            return False
        self._answers.put(kept)
        return True

    def run(self, call):
        self.start(call)
        return self.answer()

    def stop(self) -> None:
        self._calls.put(None)
        self._thread.join(30)


def test_a_release_after_a_force_release_does_not_end_another_threads_hold(server, name):
    client = fencelock.Client(server.url)
    lock = client.threading_lock(name, ttl=30.0)
    a, b = Worker(), Worker()
    try:
        # Thread A acquires; an operator force-releases the lock.
        assert a.run(lock.acquire) is True
        a_fence = lock.fence
        assert client.force_release(name) is True
        # Thread B acquires through the same object.
        b.start(lambda: lock.acquire(timeout=20))
        b.answered(0.5)
        # A's release: its hold was lost, so it says so, and it does not end B's hold.
        released = a.run(lock.release)
        assert isinstance(released, fencelock.NotHeld), released
        assert b.answer() is True
        assert b.run(lock.owned) is True and not a.run(lock.owned)
        b_fence = lock.fence
        assert b_fence > a_fence
        info = client.inspect(name)
        assert info.holder is not None and info.last_fence == b_fence, info
        # B's hold is B's to end.
        assert b.run(lock.release) is None
        assert not client.inspect(name).is_held()
    finally:
        a.stop()
        b.stop()


def test_a_thread_does_not_release_or_extend_a_hold_another_thread_took(server, name):
    client = fencelock.Client(server.url)
    lock = client.threading_lock(name, ttl=30.0)
    a = Worker()
    try:
        assert a.run(lock.acquire) is True
        fence = lock.fence
        assert lock.owned() is False and a.run(lock.owned) is True
        with pytest.raises(RuntimeError, match="another thread"):
            lock.release()
        with pytest.raises(RuntimeError, match="another thread"):
            lock.extend(10.0)
        # Still A's hold, in Redis and in the object.
        assert client.inspect(name).last_fence == fence and lock.fence == fence
        assert a.run(lock.owned) is True
        assert a.run(lock.release) is None
        assert not client.inspect(name).is_held()
    finally:
        a.stop()
    # thread_local=False: the hold is the object's, as with threading.Lock, which any thread
    # may release.
    shared = client.threading_lock(name, ttl=30.0, thread_local=False)
    a = Worker()
    try:
        assert a.run(shared.acquire) is True
        assert shared.owned() is True
        shared.release()
        assert not client.inspect(name).is_held()
    finally:
        a.stop()


def test_a_second_acquire_through_the_object_waits_for_the_first_release(server, name):
    """Even when the first hold was lost: the object's holds never overlap, in this process."""
    client = fencelock.Client(server.url)
    lock = client.threading_lock(name, ttl=30.0)
    a, b = Worker(), Worker()
    try:
        assert a.run(lock.acquire) is True
        assert client.force_release(name) is True
        assert b.run(lambda: lock.acquire(blocking=False)) is False
        started = time.monotonic()
        assert b.run(lambda: lock.acquire(timeout=0.3)) is False
        assert time.monotonic() - started >= 0.25
        assert not client.inspect(name).is_held(), "the waits took the lock"
        assert isinstance(a.run(lock.release), fencelock.NotHeld)
        assert b.run(lambda: lock.acquire(blocking=False)) is True
        assert b.run(lock.release) is None
    finally:
        a.stop()
        b.stop()


def test_redis_pys_spellings_of_the_wait(server, name):
    client = fencelock.Client(server.url)
    holder = client.lock(name, ttl=30.0).acquire()
    lock = client.threading_lock(name)
    started = time.monotonic()
    assert lock.acquire(blocking_timeout=0.3) is False
    assert 0.25 <= time.monotonic() - started < 10
    assert lock.acquire(0) is False                  # threading.Lock's acquire(0): no wait
    with pytest.raises(ValueError):
        lock.acquire(timeout=1, blocking_timeout=1)
    # The defaults of redis-py's Lock(..., blocking=, blocking_timeout=).
    waits = client.threading_lock(name, blocking_timeout=0.3)
    started = time.monotonic()
    assert waits.acquire() is False
    assert 0.25 <= time.monotonic() - started < 10
    assert client.threading_lock(name, blocking=False).acquire() is False
    holder.release()
    assert lock.acquire(timeout=None) is True        # None: as long as it takes, as redis-py's
    lock.release()
