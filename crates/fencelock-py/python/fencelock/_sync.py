"""The blocking API: every wait lets other threads run, and Ctrl-C gives a wait up with
nothing held and its place in line left."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any, Iterator, Optional, Type

from . import _api, _close, _recipes
from ._api import FencedStore, ReadWriteLock, ReentrantLock, wait
from ._threading import ThreadingLock
from ._values import Done, GaveUp, Leader, LockInfo, Listing, Observation, Ran, TooLate

__all__ = [
    "Client",
    "Guard",
    "LockRequest",
    "ReentrantLock",
    "ReadWriteLock",
    "FencedStore",
    "Election",
    "Leadership",
    "MultiLockRequest",
    "MultiGuard",
    "Once",
    "ThreadingLock",
]


class Guard(_api.Guard):
    """A held lock.

    Leaving a ``with`` block releases it. A guard that is garbage-collected unreleased
    releases the lock in the background, and the interpreter's exit releases every lock still
    held (waiting at most 2 s).

    Attributes:
        name: the lock's name.
        fence: the fencing token, strictly larger than every earlier fence of the name.
    """

    __slots__ = ()

    @property
    def lost(self) -> threading.Event:
        """Set when the lock is lost (or released); :attr:`lost_reason` says why."""
        return self._event("lost", self._native.lost, _ignore)

    @property
    def release_requested(self) -> threading.Event:
        """Set when someone asks for this lock (:meth:`Client.request_release`, ``fencelock
        release --ask``) while it is held. The guard still holds it: release it at a point
        where the work can stop. The watch ends with the hold."""
        return self._event("requested", self._native.release_requested, _ignore)

    if TYPE_CHECKING:

        def extend(self, ttl: float) -> None: ...

        def release(self) -> bool: ...

    def __enter__(self) -> "Guard":
        return self

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        _exit(self, kind)


def _ignore(value: Any) -> None:
    pass


def _exit(guard: Guard, kind: Optional[Type[BaseException]]) -> None:
    """Releases on leaving a block. When the block itself succeeded but the lock was lost
    meanwhile, says so (``NotHeld``): the block's work ran without the lock for a while."""
    if kind is None:
        guard._end_block()
    else:
        guard.release()


class LockRequest(_api.LockRequest):
    """A request for a lock: :meth:`acquire` it, or use it in a ``with`` block.

    One request can be used many times, and from several threads at once."""

    __slots__ = ()
    _guard_class = Guard

    if TYPE_CHECKING:

        def acquire(self) -> Guard: ...

        def try_acquire(self) -> Optional[Guard]: ...

    def __enter__(self) -> Guard:
        return self._push(threading.get_ident(), self.acquire())

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        _exit(self._pop(threading.get_ident()), kind)


class Leadership(_recipes.Leadership):
    """This process leads the election until it resigns or the leadership is lost.

    Leaving a ``with`` block resigns. ``term`` is a fence: pass it to fenced writes."""

    __slots__ = ()

    @property
    def lost(self) -> threading.Event:
        """Set when the leadership is lost (or resigned)."""
        return self._event("lost", self._native.lost, _ignore)

    if TYPE_CHECKING:

        def proclaim(self, value: str) -> None: ...

        def resign(self) -> bool: ...

    def __enter__(self) -> "Leadership":
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        self.resign()


class Election(_recipes.Election):
    """One election (see :meth:`Client.election`)."""

    __slots__ = ()

    if TYPE_CHECKING:

        def campaign(self, value: str, *, ttl: Optional[float] = None, wait: Optional[float] = None,
                     label: Optional[str] = None) -> Leadership: ...

        def leader(self) -> Optional[Leader]: ...

    def observe(self, timeout: Optional[float] = None) -> Iterator[Observation]:
        """The leaders as they change: the current one first, then each change in term order,
        by pub/sub; :class:`fencelock.Vacant` when a leader resigns or its lease runs out.
        With ``timeout``, the iteration ends when nothing happens for that long."""
        observer = self._client._run(self._client._native.observe, self.name)
        while True:
            seen = self._client._run(observer.next, timeout)
            if seen is None:
                return
            yield _recipes.observation(seen)


class MultiGuard(_recipes.MultiGuard):
    """Several locks held together (see :meth:`Client.multi_lock`); a ``with`` block releases
    them all."""

    __slots__ = ()

    @property
    def lost(self) -> threading.Event:
        """Set when any of the names is lost (or released)."""
        return self._event("lost", self._native.lost, _ignore)

    if TYPE_CHECKING:

        def release(self) -> bool: ...

    def __enter__(self) -> "MultiGuard":
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        if kind is None:
            self._end_block()
        else:
            self.release()


class MultiLockRequest(_recipes.MultiLockRequest):
    """A request for several locks at once: :meth:`acquire` it, or use it in a ``with`` block."""

    __slots__ = ()
    _guard_class = MultiGuard

    if TYPE_CHECKING:

        def acquire(self) -> MultiGuard: ...

    def __enter__(self) -> MultiGuard:
        return self._push(threading.get_ident(), self.acquire())

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        self._pop(threading.get_ident()).__exit__(kind, value, traceback)

    def _push(self, key: Any, guard: MultiGuard) -> MultiGuard:
        self._held.setdefault(key, []).append(guard)
        return guard

    def _pop(self, key: Any) -> MultiGuard:
        stack = self._held[key]
        guard = stack.pop()
        if not stack:
            del self._held[key]
        return guard


class OnceRun(_recipes.OnceRun):
    """A run-once's run while its work runs: ``fence``, ``tick``, and ``lost``."""

    __slots__ = ()

    @property
    def lost(self) -> threading.Event:
        """Set when the run's lock is lost (or released); :attr:`lost_reason` says why."""
        return self._event("lost", self._native.lost, _ignore)


class Once(_recipes.Once):
    """Work to do once across the fleet (see :meth:`Client.once`)."""

    __slots__ = ()

    def _run(self, native: Any) -> OnceRun:
        return OnceRun(native, self._client._run)

    def run(self, work: Any) -> Any:
        """Calls ``work(fence)`` (``work(fence, run)`` if it takes two arguments: the
        :class:`OnceRun`, whose ``lost`` is set when the lock is lost, and its ``tick``) unless
        the work was done (also by a run this one waited for),
        and records it if ``work`` returns; records nothing if it raises (the exception goes on,
        and the next run tries again). Returns :class:`fencelock.Ran` with what ``work``
        returned, the :class:`fencelock.Done` record, :class:`fencelock.TooLate` (a start too
        late for its tick: nothing ran), or :class:`fencelock.GaveUp` (as many runs failed as
        ``attempts`` allows: nothing ran). A ``work`` that raises counts as a failed run.

        Raises :class:`fencelock.Fenced` if the work returned but this run had lost its lock to
        a newer one meanwhile (nothing recorded)."""
        begun = self._begin()
        if isinstance(begun, (Done, TooLate, GaveUp)):
            return begun
        try:
            value = work(begun.fence, self._run(begun)) if _recipes._takes_run(work) else work(begun.fence)
        except Exception:
            # A failed run: counted (see ``attempts``), nothing recorded.
            wait(begun.failed)
            raise
        except BaseException:
            # Stopped (KeyboardInterrupt, SystemExit), not failed: nothing counted.
            wait(begun.give_up)
            raise
        wait(begun.done)
        return Ran(value)


class Client(_api.ClientBase):
    """A fencelock client for one Redis server (``redis://`` or ``rediss://`` URL).

    Other deployments: :meth:`redlock`, :meth:`cluster`, :meth:`sentinel`. Options (keywords):
    ``key_prefix`` (default ``"fencelock"``; keys are ``PREFIX:{NAME}``, so a prefix ending
    with ``:`` is refused); ``command_timeout`` and ``instance_timeout`` (seconds); ``tls_ca``, and
    ``tls_client_cert`` with ``tls_client_key`` (each a path, or the PEM as ``bytes``);
    ``wait_for_replicas`` (replicas that must acknowledge each grant, with
    ``replica_timeout`` in seconds and ``replica_shortfall``, ``"fail"`` or ``"warn"``); for
    Sentinel ``master_username`` / ``master_password``.

    A client may be shared by threads. In a process forked after it was made it connects
    afresh; the parent's locks stay the parent's.
    """

    __slots__ = ()
    _runner = staticmethod(wait)
    _scoped = staticmethod(_close.run_blocking)
    _request_class = LockRequest
    _guard_class = Guard
    _leadership_class = Leadership
    _multi_class = MultiLockRequest
    _once_class = Once

    def election(self, name: str) -> Election:
        """The election ``name`` (its leadership is the plain lock ``name``)."""
        return Election(self, name)

    def releases(self, name: str, timeout: Optional[float] = None) -> Iterator[None]:
        """Follows lock ``name`` as it changes hands: one item per release (of any holder, or
        an operator's), by pub/sub, subscribed before the first item is asked for. Read the
        lock with :meth:`inspect` to see its state. With ``timeout``, the iteration ends when
        no release comes for that long."""
        watch = self._run(self._native.releases, name)
        while self._run(watch.next, timeout):
            yield None

    def threading_lock(self, name: str, **options: Any) -> ThreadingLock:
        """The lock ``name`` with ``threading.Lock``'s protocol (``acquire(blocking=True,
        timeout=-1) -> bool``, ``release()``, ``locked()``, ``with``), for libraries that take
        a lock object; ``fence`` is the current hold's. One hold at a time per object, owned
        by the thread that acquired it. ``options``: those of :meth:`lock`, except ``wait``
        (acquire's arguments say how long to wait); and redis-py's ``blocking`` and
        ``blocking_timeout`` (acquire's defaults) and ``thread_local`` (``False``: any thread
        may release the object's hold). See :class:`fencelock.ThreadingLock`."""
        return ThreadingLock(self, name, options)

    def close(self) -> None:
        """Closes the client: its calls in progress (a wait, in any thread) raise
        :class:`fencelock.ClientClosed`, what it holds is released (its leaderships resigned),
        and later calls on it, or on the requests it made, raise ``ClientClosed``. Returns once
        the releases are done; closing twice is harmless. A ``with`` block closes it at its
        end. It does not close the connections: they close when the client and everything
        made from it (requests, guards) are garbage-collected."""
        _close.close_blocking(self._scope, self._native)

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, kind: Any, value: Any, traceback: Any) -> None:
        self.close()

    if TYPE_CHECKING:

        def lock(self, name: str, **options: Any) -> LockRequest: ...

        def fair_lock(self, name: str, **options: Any) -> LockRequest: ...

        def semaphore(self, name: str, permits: int, **options: Any) -> LockRequest: ...

        def request_release(self, name: str) -> bool: ...

        def multi_lock(self, names: Any, **options: Any) -> MultiLockRequest: ...

        def once(self, key: str, **options: Any) -> Once: ...

        def inspect(self, name: str) -> LockInfo: ...

        def list(self, pattern: str = "*") -> Listing: ...

        def force_release(self, name: str) -> bool: ...
