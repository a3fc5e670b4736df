"""The asyncio API: the same locks as :mod:`fencelock`, awaited.

Waits run on fencelock's own threads and never block the event loop. Cancelling a task that
waits for a lock gives the wait up with nothing held::

    import fencelock.aio

    client = fencelock.aio.Client("redis://127.0.0.1:6379")
    async with client.lock("reports/nightly", ttl=10.0) as guard:
        await write_report(guard.fence)
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import Any, AsyncIterator, Callable, Dict, List, Optional, Type

from . import _common, _election
from ._writes import Writes
from .errors import (  # noqa: F401  (the exceptions, for `from fencelock.aio import ...`)
    Busy,
    Error,
    Fenced,
    NotHeld,
    TimedOut,
)

__all__ = [
    "Client",
    "Guard",
    "LockRequest",
    "ReentrantLock",
    "ReadWriteLock",
    "FencedStore",
    "Writes",
    "Election",
    "Leadership",
]


def _settle(future: "asyncio.Future[Any]", ok: bool, value: Any) -> None:
    if future.cancelled():
        # Nobody waits for it: a guard in `value` is dropped here and releases its lock.
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


async def _call(start: Callable[[Callable[[bool, Any], None]], Any]) -> Any:
    """Runs a native call that answers a callback, as an awaitable; cancelling the awaiting
    task cancels the call."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def done(ok: bool, value: Any) -> None:
        loop.call_soon_threadsafe(_settle, future, ok, value)

    pending = start(done)
    try:
        return await future
    except asyncio.CancelledError:
        pending.cancel()
        raise


async def _lost(native: Any) -> str:
    """Waits until the native guard or leadership is lost (or released); the reason's code."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def done(reason: str, message: str) -> None:
        loop.call_soon_threadsafe(_settle, future, True, reason)

    native.on_lost(done)
    return await future


class Guard:
    """A held lock (see :class:`fencelock.Guard`); ``extend``, ``release`` and ``lost`` are
    awaited."""

    __slots__ = ("_native", "__weakref__")

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def fence(self) -> int:
        """The fencing token: strictly larger than every earlier fence of the name."""
        return self._native.fence

    def is_held(self) -> bool:
        """Whether the lock is still held, as far as this process can tell now."""
        return self._native.is_held()

    def remaining(self) -> float:
        """Seconds until the lease's deadline (0 once passed or released)."""
        return self._native.remaining()

    @property
    def lost_reason(self) -> Optional[str]:
        """``None`` while held; then ``not_owner``, ``expired``, ``max_hold_reached`` or
        ``released``."""
        now = self._native.lost_now()
        return None if now is None else now[0]

    async def lost(self) -> str:
        """Waits until the lock is lost (or released) and returns the reason's code."""
        return await _lost(self._native)

    async def release_requested(self) -> None:
        """Returns when someone asks for this lock (:meth:`Client.request_release`); the guard
        still holds it."""
        loop = asyncio.get_running_loop()
        future = loop.create_future()

        def done() -> None:
            loop.call_soon_threadsafe(_settle, future, True, None)

        self._native.on_release_requested(done)
        await future

    async def extend(self, ttl: float) -> None:
        """Re-arms the lease to ``ttl`` seconds from now."""
        await _call(lambda done: self._native.extend_async(ttl, done))

    async def release(self) -> bool:
        """Releases the lock: ``True`` if it was still held."""
        return await _call(self._native.release_async)

    async def __aenter__(self) -> "Guard":
        return self

    async def __aexit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await _exit(self, kind)

    def __repr__(self) -> str:
        return repr(self._native)


async def _exit(guard: Guard, kind: Optional[Type[BaseException]]) -> None:
    lost = guard._native.lost_now()
    held = await guard.release()
    if kind is None and not held:
        raise _common.not_held(guard.name, lost)


class LockRequest:
    """A request for a lock: ``await request.acquire()``, or ``async with request as
    guard``."""

    __slots__ = ("_acquirer", "_spec", "_held")

    def __init__(self, acquirer: Any, spec: Any) -> None:
        self._acquirer = acquirer
        self._spec = spec
        self._held: Dict[Any, List[Guard]] = {}

    @property
    def name(self) -> str:
        return self._spec.name

    async def acquire(self) -> Guard:
        """Waits for the lock and returns its guard (see :meth:`fencelock.LockRequest.acquire`)."""
        native = await _call(lambda done: self._acquirer.acquire_async(self._spec, done))
        return Guard(native)

    async def try_acquire(self) -> Optional[Guard]:
        """One try: the guard, or ``None`` if another owner holds the lock."""
        native = await _call(lambda done: self._acquirer.acquire_async(self._spec, done, True))
        return None if native is None else Guard(native)

    async def __aenter__(self) -> Guard:
        guard = await self.acquire()
        self._held.setdefault(asyncio.current_task(), []).append(guard)
        return guard

    async def __aexit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        task = asyncio.current_task()
        stack = self._held[task]
        guard = stack.pop()
        if not stack:
            del self._held[task]
        await _exit(guard, kind)

    def __repr__(self) -> str:
        return f"<fencelock.aio.LockRequest {self.name!r}>"


class ReentrantLock:
    """A reentrant lock's handle (see :class:`fencelock.ReentrantLock`)."""

    __slots__ = ("_native",)

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    def request(self, **options: Any) -> LockRequest:
        return LockRequest(self._native, _common.spec("reentrant", self.name, **options))

    async def acquire(self, **options: Any) -> Guard:
        return await self.request(**options).acquire()

    async def try_acquire(self, **options: Any) -> Optional[Guard]:
        return await self.request(**options).try_acquire()


#: A read-write lock whose ``read()`` and ``write()`` make this module's requests.
ReadWriteLock = _common.ReadWriteLock


class FencedStore:
    """Fenced writes (see :class:`fencelock.FencedStore`), awaited."""

    __slots__ = ("_client", "resource")

    def __init__(self, client: Any, resource: str) -> None:
        self._client = client
        self.resource = resource

    async def apply(self, fence: int, writes: Writes) -> int:
        return await _call(lambda done: self._client.fenced_apply_async(self.resource, fence, writes._ops, done))

    async def accepted(self) -> int:
        # One round trip that never waits for a lock: the blocking call releases the GIL but
        # would still hold the event loop; run it on the default executor.
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(None, self._client.fenced_accepted, self.resource)


class Client(_common.ClientBase["LockRequest"]):
    """An asyncio fencelock client; made and configured as :class:`fencelock.Client`."""

    __slots__ = ()

    def _request(self, request_spec: Any) -> LockRequest:
        return LockRequest(self._native, request_spec)

    def reentrant_lock(self, name: str, *, max_reentry: Optional[int] = None) -> ReentrantLock:
        return ReentrantLock(self._native.reentrant(name, max_reentry))

    def fenced_store(self, resource: str) -> FencedStore:
        return FencedStore(self._native, resource)

    def election(self, name: str) -> "Election":
        """The election ``name``, awaited."""
        return Election(self._native, name)

    async def request_release(self, name: str) -> bool:
        """Asks the holders of lock ``name`` to release it; ``True`` if it was held."""
        return await _call(lambda done: self._native.request_release_async(name, done))



class Leadership(_election.LeadershipView):
    """A leadership (see :class:`fencelock.Leadership`); ``proclaim``, ``resign`` and
    ``lost`` are awaited, and ``async with`` resigns on leaving."""

    __slots__ = ()

    async def lost(self) -> str:
        return await _lost(self._native)

    async def proclaim(self, value: str) -> None:
        await _call(lambda done: self._native.proclaim_async(value, done))

    async def resign(self) -> bool:
        return await _call(self._native.resign_async)

    async def __aenter__(self) -> "Leadership":
        return self

    async def __aexit__(self, kind: Any, value: Any, traceback: Any) -> None:
        await self.resign()


class Election:
    """One election, awaited (see :class:`fencelock.Election`)."""

    __slots__ = ("_client", "name")

    def __init__(self, client: Any, name: str) -> None:
        self._client = client
        self.name = name

    async def campaign(self, value: str, *, ttl: Optional[float] = None, wait: Optional[float] = None) -> Leadership:
        native = await _call(lambda done: self._client.campaign_async(self.name, value, done, ttl, wait))
        return Leadership(native)

    async def leader(self) -> Optional[_election.Leader]:
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(None, self._client.leader, self.name)
        return None if found is None else _election.Leader(*found)

    async def observe(self) -> AsyncIterator[_election.Observation]:
        loop = asyncio.get_running_loop()
        observer = await loop.run_in_executor(None, self._client.observe, self.name)
        while True:
            seen = await _call(observer.next_async)
            if seen is None:
                return
            yield _election.observation(seen)

