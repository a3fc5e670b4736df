"""The blocking API: every wait lets other threads run, and Ctrl-C gives a wait up with
nothing held."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, Dict, List, Optional, Type

from . import _common, _election
from ._writes import Writes


class Guard:
    """A held lock.

    Leaving a ``with`` block releases it. A guard that is garbage-collected unreleased
    releases the lock in the background.

    Attributes:
        name: the lock's name.
        fence: the fencing token, strictly larger than every earlier fence of the name.
    """

    __slots__ = ("_native", "_lost", "_requested", "__weakref__")

    def __init__(self, native: Any) -> None:
        self._native = native
        self._lost = _common.LostState()
        self._requested: Optional[threading.Event] = None

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def fence(self) -> int:
        return self._native.fence

    def is_held(self) -> bool:
        """Whether the lock is still held, as far as this process can tell now."""
        return self._native.is_held()

    def remaining(self) -> float:
        """Seconds until the lease's deadline (0 once passed or released)."""
        return self._native.remaining()

    @property
    def lost(self) -> threading.Event:
        """Set when the lock is lost (or released); :attr:`lost_reason` says why."""
        self._lost.arm(self._native)
        return self._lost.event

    @property
    def lost_reason(self) -> Optional[str]:
        """``None`` while held; then ``not_owner``, ``expired``, ``max_hold_reached`` or
        ``released``."""
        now = self._native.lost_now()
        return None if now is None else now[0]

    @property
    def release_requested(self) -> threading.Event:
        """Set when someone asks for this lock (:meth:`Client.request_release`, ``fencelock
        release --ask``). The guard still holds it: release it at a point where the work can
        stop."""
        if self._requested is None:
            event = threading.Event()
            self._native.on_release_requested(event.set)
            self._requested = event
        return self._requested

    def extend(self, ttl: float) -> None:
        """Re-arms the lease to ``ttl`` seconds from now.

        Raises :class:`fencelock.NotHeld` if the lock was lost."""
        self._native.extend(ttl)

    def release(self) -> bool:
        """Releases the lock: ``True`` if it was still held (``False``: it had been lost, or
        was released already)."""
        return self._native.release()

    def __enter__(self) -> "Guard":
        return self

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        _exit(self, kind)

    def __repr__(self) -> str:
        return repr(self._native)


def _exit(guard: Guard, kind: Optional[Type[BaseException]]) -> None:
    """Releases on leaving a block. When the block itself succeeded but the lock was lost
    meanwhile, says so (``NotHeld``): the block's work ran without the lock for a while."""
    lost = guard._native.lost_now()
    held = guard.release()
    if kind is None and not held:
        raise _common.not_held(guard.name, lost)


class LockRequest:
    """A request for a lock: :meth:`acquire` it, or use it in a ``with`` block.

    One request can be used many times, and from several threads at once."""

    __slots__ = ("_acquirer", "_spec", "_held")

    def __init__(self, acquirer: Any, spec: Any) -> None:
        self._acquirer = acquirer
        self._spec = spec
        self._held: Dict[int, List[Guard]] = {}

    @property
    def name(self) -> str:
        return self._spec.name

    def acquire(self) -> Guard:
        """Waits for the lock (as the request's ``wait`` says) and returns its guard.

        Raises :class:`fencelock.TimedOut` when the wait runs out, :class:`fencelock.Busy`
        with ``wait=0``, or another :class:`fencelock.Error`."""
        return Guard(self._acquirer.acquire(self._spec))

    def try_acquire(self) -> Optional[Guard]:
        """One try: the guard, or ``None`` if another owner holds the lock."""
        native = self._acquirer.acquire(self._spec, True)
        return None if native is None else Guard(native)

    def __enter__(self) -> Guard:
        guard = self.acquire()
        self._held.setdefault(threading.get_ident(), []).append(guard)
        return guard

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        ident = threading.get_ident()
        stack = self._held[ident]
        guard = stack.pop()
        if not stack:
            del self._held[ident]
        _exit(guard, kind)

    def __repr__(self) -> str:
        return f"<fencelock.LockRequest {self.name!r}>"


class ReentrantLock:
    """A reentrant lock: the acquisitions made through one handle share one owner, so the
    holder can take it again (each acquisition is released on its own)."""

    __slots__ = ("_native",)

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def name(self) -> str:
        return self._native.name

    def request(self, **options: Any) -> LockRequest:
        """A request with the options of :meth:`Client.lock`."""
        return LockRequest(self._native, _common.spec("reentrant", self.name, **options))

    def acquire(self, **options: Any) -> Guard:
        """Acquires the lock (again); see :meth:`LockRequest.acquire`."""
        return self.request(**options).acquire()

    def try_acquire(self, **options: Any) -> Optional[Guard]:
        """One try; ``None`` if another owner holds it."""
        return self.request(**options).try_acquire()


#: A read-write lock whose ``read()`` and ``write()`` make this module's requests.
ReadWriteLock = _common.ReadWriteLock


class FencedStore:
    """Writes to Redis keys that only go through with a fence at least as new as the last one
    the resource accepted."""

    __slots__ = ("_client", "resource")

    def __init__(self, client: Any, resource: str) -> None:
        self._client = client
        self.resource = resource

    def apply(self, fence: int, writes: Writes) -> int:
        """Applies ``writes`` atomically if ``fence`` is not older than the resource's; returns
        the fence now accepted.

        Raises :class:`fencelock.Fenced` (nothing written) when a newer fence was accepted."""
        return self._client.fenced_apply(self.resource, fence, writes._ops)

    def accepted(self) -> int:
        """The fence the resource accepted last (0: none yet)."""
        return self._client.fenced_accepted(self.resource)


class Client(_common.ClientBase["LockRequest"]):
    """A fencelock client for one Redis server (``redis://`` or ``rediss://`` URL).

    Other deployments: :meth:`redlock`, :meth:`cluster`, :meth:`sentinel`. Options (keywords):
    ``key_prefix``, ``command_timeout`` and ``instance_timeout`` (seconds), ``tls_ca_file``,
    ``tls_client_cert`` with ``tls_client_key`` (paths), and for Sentinel
    ``master_username`` / ``master_password``.

    A client may be shared by threads. In a process forked after it was made it connects
    afresh; the parent's locks stay the parent's.
    """

    __slots__ = ()

    def _request(self, request_spec: Any) -> LockRequest:
        return LockRequest(self._native, request_spec)

    def reentrant_lock(self, name: str, *, max_reentry: Optional[int] = None) -> ReentrantLock:
        """A handle on the reentrant lock ``name``."""
        return ReentrantLock(self._native.reentrant(name, max_reentry))

    def fenced_store(self, resource: str) -> FencedStore:
        """Fenced writes to ``resource``."""
        return FencedStore(self._native, resource)

    def election(self, name: str) -> "_election.Election":
        """The election ``name`` (its leadership is the plain lock ``name``)."""
        return _election.Election(self._native, name)

    def request_release(self, name: str) -> bool:
        """Asks the holders of lock ``name`` to release it (polite revocation); takes nothing.
        ``True`` if it was held."""
        return self._native.request_release(name)
