"""The asyncio API: the same locks as :mod:`fencelock`, awaited.

Calls run on fencelock's own threads and never block the event loop. Cancelling a task that
waits for a lock gives the wait up: nothing is held, and its place in line is left before the
cancellation propagates. A grant that lands just as the task is cancelled is released; a
release that is cancelled still releases::

    import fencelock.aio

    client = fencelock.aio.Client("redis://127.0.0.1:6379")
    async with client.lock("reports/nightly", ttl=10.0) as guard:
        await write_report(guard.fence)
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import TYPE_CHECKING, Any, AsyncIterator, Optional, Type

from . import _api, _close, _recipes
from ._api import FencedStore, ReadWriteLock, ReentrantLock, awaited
from ._values import Done, GaveUp, Leader, LockInfo, Listing, Observation, Ran, TooLate
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


class Guard(_api.Guard):
    """A held lock (see :class:`fencelock.Guard`); ``extend``, ``release``, ``lost`` and
    ``release_requested`` are awaited, and ``async with`` releases on leaving."""

    __slots__ = ()

    async def lost(self) -> str:
        """Waits until the lock is lost (or released) and returns the reason's code."""
        code, _ = await awaited(self._native.lost)
        return code

    async def release_requested(self) -> None:
        """Returns when someone asks for this lock (:meth:`Client.request_release`) while it
        is held; the guard still holds it. Raises :class:`fencelock.NotHeld` if the hold ends
        first."""
        await awaited(self._native.release_requested)

    if TYPE_CHECKING:

        async def extend(self, ttl: float) -> None: ...

        async def release(self) -> bool: ...

    async def __aenter__(self) -> "Guard":
        return self

    async def __aexit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await _exit(self, kind)


async def _exit(guard: Guard, kind: Optional[Type[BaseException]]) -> None:
    if kind is None:
        await guard._end_block()
    else:
        await guard.release()


class LockRequest(_api.LockRequest):
    """A request for a lock: ``await request.acquire()``, or ``async with request as
    guard``."""

    __slots__ = ()
    _guard_class = Guard

    if TYPE_CHECKING:

        async def acquire(self) -> Guard: ...

        async def try_acquire(self) -> Optional[Guard]: ...

    async def __aenter__(self) -> Guard:
        return self._push(asyncio.current_task(), await self.acquire())

    async def __aexit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await _exit(self._pop(asyncio.current_task()), kind)


class Leadership(_recipes.Leadership):
    """A leadership (see :class:`fencelock.Leadership`); ``proclaim``, ``resign`` and
    ``lost`` are awaited, and ``async with`` resigns on leaving."""

    __slots__ = ()

    async def lost(self) -> str:
        """Waits until the leadership is lost (or resigned); the reason's code."""
        code, _ = await awaited(self._native.lost)
        return code

    if TYPE_CHECKING:

        async def proclaim(self, value: str) -> None: ...

        async def resign(self) -> bool: ...

    async def __aenter__(self) -> "Leadership":
        return self

    async def __aexit__(self, kind: Any, value: Any, traceback: Any) -> None:
        await self.resign()


class Election(_recipes.Election):
    """One election, awaited (see :class:`fencelock.Election`)."""

    __slots__ = ()

    if TYPE_CHECKING:

        async def campaign(
            self, value: str, *, ttl: Optional[float] = None, wait: Optional[float] = None,
            label: Optional[str] = None
        ) -> Leadership: ...

        async def leader(self) -> Optional[Leader]: ...

    async def observe(self) -> AsyncIterator[Observation]:
        """The leaders as they change (see :meth:`fencelock.Election.observe`)."""
        observer = await self._client._run(self._client._native.observe, self.name)
        while True:
            seen = await self._client._run(observer.next)
            if seen is None:
                return
            yield _recipes.observation(seen)


class MultiGuard(_recipes.MultiGuard):
    """Several locks held together (see :class:`fencelock.MultiGuard`), awaited."""

    __slots__ = ()

    async def lost(self) -> str:
        """Waits until any of the names is lost (or released); the reason's code."""
        _, code, _ = await awaited(self._native.lost)
        return code

    if TYPE_CHECKING:

        async def release(self) -> bool: ...

    async def __aenter__(self) -> "MultiGuard":
        return self

    async def __aexit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is None:
            await self._end_block()
        else:
            await self.release()


class MultiLockRequest(_recipes.MultiLockRequest):
    """A request for several locks at once: ``await request.acquire()``, or ``async with``."""

    __slots__ = ()
    _guard_class = MultiGuard

    if TYPE_CHECKING:

        async def acquire(self) -> MultiGuard: ...

    async def __aenter__(self) -> MultiGuard:
        guard = await self.acquire()
        self._held.setdefault(asyncio.current_task(), []).append(guard)
        return guard

    async def __aexit__(self, kind: Any, value: Any, traceback: Any) -> None:
        task = asyncio.current_task()
        stack = self._held[task]
        guard = stack.pop()
        if not stack:
            del self._held[task]
        await guard.__aexit__(kind, value, traceback)


class OnceRun(_recipes.OnceRun):
    """A run-once's run while its work runs: ``fence``, ``tick``, and ``await lost()``."""

    __slots__ = ()

    async def lost(self) -> str:
        """Waits until the run's lock is lost (or released) and returns the reason's code."""
        code, _ = await awaited(self._native.lost)
        return code


class Once(_recipes.Once):
    """Work to do once across the fleet (see :class:`fencelock.Once`), awaited."""

    __slots__ = ()

    def _run(self, native: Any) -> OnceRun:
        return OnceRun(native, self._client._run)

    async def run(self, work: Any) -> Any:
        """Awaits ``work(fence)`` unless the work was done (see :meth:`fencelock.Once.run`)."""
        begun = await self._begin()
        if isinstance(begun, (Done, TooLate, GaveUp)):
            return begun
        try:
            if _recipes._takes_run(work):
                value = await work(begun.fence, self._run(begun))
            else:
                value = await work(begun.fence)
        except Exception:
            # A failed run: counted (see ``attempts``), nothing recorded.
            await awaited(begun.failed)
            raise
        except BaseException:
            # Cancelled or stopped, not failed: nothing counted.
            await awaited(begun.give_up)
            raise
        await awaited(begun.done)
        return Ran(value)


class Client(_api.ClientBase):
    """An asyncio fencelock client; made and configured as :class:`fencelock.Client`."""

    __slots__ = ()
    _runner = staticmethod(awaited)
    _scoped = staticmethod(_close.run_async)
    _request_class = LockRequest
    _guard_class = Guard
    _leadership_class = Leadership
    _multi_class = MultiLockRequest
    _once_class = Once

    def election(self, name: str) -> Election:
        """The election ``name``, awaited."""
        return Election(self, name)

    async def releases(self, name: str, timeout: Optional[float] = None) -> AsyncIterator[None]:
        """Follows lock ``name`` as it changes hands (see :meth:`fencelock.Client.releases`)."""
        watch = await self._run(self._native.releases, name)
        while await self._run(watch.next, timeout):
            yield None

    async def aclose(self) -> None:
        """Closes the client (see :meth:`fencelock.Client.close`): its waits in progress raise
        :class:`fencelock.ClientClosed`, what it holds is released, and later calls raise
        ``ClientClosed``. An ``async with`` block closes it at its end."""
        await _close.close_async(self._scope, self._native)

    async def __aenter__(self) -> "Client":
        return self

    async def __aexit__(self, kind: Any, value: Any, traceback: Any) -> None:
        await self.aclose()

    if TYPE_CHECKING:

        def lock(self, name: str, **options: Any) -> LockRequest: ...

        def fair_lock(self, name: str, **options: Any) -> LockRequest: ...

        def semaphore(self, name: str, permits: int, **options: Any) -> LockRequest: ...

        async def request_release(self, name: str) -> bool: ...

        async def inspect(self, name: str) -> LockInfo: ...

        async def list(self, pattern: str = "*") -> Listing: ...

        async def force_release(self, name: str) -> bool: ...
