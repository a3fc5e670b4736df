"""``threading.Lock``'s protocol over a fencelock lock, for libraries that take a lock object
(as they take ``threading.Lock`` or redis-py's ``Lock``): ``client.threading_lock(name)``.

One hold at a time per object, with one owner: the thread whose ``acquire`` took it.

- ``acquire(blocking=True, timeout=-1) -> bool``: ``True`` once held; ``False`` when
  ``blocking=False`` and the lock is held (by this object or another owner), or when
  ``timeout`` (seconds) runs out. ``timeout=-1`` (or ``None``) waits as long as it takes.
  redis-py's ``blocking_timeout=`` is the same wait, in its spelling. While this object holds
  the lock, a second ``acquire`` through it, from any thread, waits for that hold's release
  (as ``threading.Lock``'s does), even if the hold was lost meanwhile: the object's holds never
  overlap.
- ``release()``: releases the calling thread's hold. Raises ``RuntimeError`` if this thread
  does not hold it (not acquired, as ``threading.Lock`` says; or acquired by another thread, as
  redis-py's ``thread_local=True`` refuses it), and :class:`fencelock.NotHeld` if the hold was
  lost meanwhile (the work it protected ran without it for a while). With
  ``thread_local=False`` any thread may release the object's hold (as ``threading.Lock``
  allows).
- ``locked()``: whether anyone holds the lock now (a read of Redis, as redis-py's);
  ``owned()``: whether the calling thread holds it through this object (as redis-py's).
- ``fence``: the fencing token of the object's current hold (``None`` when not held).
- ``extend(ttl)``: re-arms the lease to ``ttl`` seconds from now. It *replaces* the lease;
  redis-py's ``extend(additional_time)`` *adds* to what is left of it.
- ``with lock:`` acquires (blocking) and releases.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType
from typing import Any, Dict, Optional, Type

from . import _checks
from .errors import Busy, InvalidArgument, TimedOut

#: The options of ``client.threading_lock`` besides the lock's own (redis-py's ``Lock``'s
#: spellings: the defaults of ``acquire``, and who may release).
OWN = {"blocking": _checks._flag, "blocking_timeout": _checks._seconds, "thread_local": _checks._flag}
#: ``acquire``'s options, checked for their types (``blocking`` is any truth value).
_ACQUIRE = {"blocking": lambda value: None, "timeout": _checks._seconds, "blocking_timeout": _checks._seconds}


class ThreadingLock:
    """A fencelock lock with ``threading.Lock``'s protocol (see the module docs)."""

    __slots__ = ("_client", "name", "_options", "_blocking", "_blocking_timeout", "_thread_local",
                 "_guard", "_owner", "_held")

    def __init__(self, client: Any, name: str, options: Dict[str, Any]) -> None:
        # (``client``: a ``fencelock.Client``, which makes this object; its guard below.)
        if "wait" in options:
            reason = "wait is not an option here: acquire's blocking and timeout say how long to wait"
            raise InvalidArgument(f"invalid argument for lock {name!r}: {reason}", lock=name, reason=reason,
                                  option="wait")
        own = {k: options.pop(k) for k in list(options) if k in OWN}
        allowed = dict(_checks.PLAIN, **OWN)
        del allowed["wait"]
        _checks.check(_checks.name(name), dict(options, **own), allowed)
        # Checked now, as client.lock() checks them.
        client.lock(name, **options)
        self._client = client
        self.name = name
        self._options = options
        self._blocking = own.get("blocking", True) is not False
        self._blocking_timeout: Optional[float] = own.get("blocking_timeout")
        self._thread_local = own.get("thread_local", True) is not False
        #: The current hold (``None``: none) and the thread whose acquire took it.
        self._guard: Optional[Any] = None
        self._owner: Optional[int] = None
        #: Held for as long as the object holds the lock: a second acquire waits on it.
        self._held = threading.Lock()

    def acquire(self, blocking: Optional[bool] = None, timeout: Optional[float] = -1, *,
                blocking_timeout: Optional[float] = None, **unknown: Any) -> bool:
        """Takes the lock: ``True`` once held, ``False`` if it could not be had in time."""
        # (``blocking`` is any truth value, as ``threading.Lock``'s: ``acquire(0)``.)
        _checks.check(self.name, dict(unknown, timeout=timeout, blocking_timeout=blocking_timeout), _ACQUIRE)
        blocking = self._blocking if blocking is None else bool(blocking)
        if timeout is None:
            timeout = -1
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        if timeout < 0 and timeout != -1:
            raise ValueError("timeout value must be a non-negative number")
        if blocking_timeout is not None:
            if timeout != -1:
                raise ValueError("give timeout or blocking_timeout, not both")
            if blocking_timeout < 0:
                raise ValueError("blocking_timeout must be a non-negative number")
        elif timeout == -1:
            blocking_timeout = self._blocking_timeout
        wait: Optional[float]
        if not blocking:
            wait = 0
        elif timeout != -1:
            wait = timeout
        else:
            wait = blocking_timeout
        # The object's own hold first: a hold of this object's, lost or not, is released
        # before another begins.
        started = time.monotonic()
        if wait is None:
            self._held.acquire()
        elif not self._held.acquire(wait > 0, min(wait, threading.TIMEOUT_MAX) if wait > 0 else -1):
            return False
        try:
            if wait is not None and wait > 0:
                wait = max(0.0, wait - (time.monotonic() - started))
            try:
                guard = self._client.lock(self.name, wait=wait, **self._options).acquire()
            except (Busy, TimedOut):
                self._held.release()
                return False
            self._guard, self._owner = guard, threading.get_ident()
        except BaseException:
            if self._guard is None:
                self._held.release()
            raise
        return True

    def _mine(self, what: str) -> Any:
        """The current hold, if the calling thread may use it; else ``RuntimeError``."""
        guard = self._guard
        if guard is None:
            raise RuntimeError(f"{what} unlocked lock {self.name!r}")
        if self._thread_local and self._owner != threading.get_ident():
            raise RuntimeError(
                f"{what} of lock {self.name!r}, which another thread acquired (each thread releases "
                "its own hold; threading_lock(..., thread_local=False) lets any thread)"
            )
        return guard

    def release(self) -> None:
        """Releases the lock (see the module docs for what it raises)."""
        guard = self._mine("release")
        self._guard = self._owner = None
        try:
            # Released; NotHeld (with the reason the release found) if it had been lost, as
            # the native side decides it for every package. Only this hold's token is
            # released: a newer hold, anyone's, is left alone.
            guard._end_block()
        finally:
            self._held.release()

    def locked(self) -> bool:
        """Whether anyone holds the lock now, as Redis says."""
        info = self._client.inspect(self.name)
        return info.holder is not None or bool(info.shared)

    def owned(self) -> bool:
        """Whether the calling thread holds the lock through this object (with
        ``thread_local=False``: whether this object holds it), as far as this process can tell
        now."""
        guard = self._guard
        if guard is None or (self._thread_local and self._owner != threading.get_ident()):
            return False
        return guard.is_held()

    @property
    def fence(self) -> Optional[int]:
        """The fencing token of the object's current hold; ``None`` when not held."""
        guard = self._guard
        return None if guard is None else guard.fence

    def extend(self, ttl: float) -> None:
        """Re-arms the lease to ``ttl`` seconds from now (it replaces the lease; redis-py's
        ``extend`` adds to it). Raises ``RuntimeError`` if the calling thread does not hold it
        (as :meth:`release`), and :class:`fencelock.NotHeld` if the lock was lost."""
        self._mine("extend").extend(ttl)

    def __enter__(self) -> "ThreadingLock":
        self.acquire()
        return self

    def __exit__(
        self,
        kind: Optional[Type[BaseException]],
        value: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.release()

    def __repr__(self) -> str:
        state = "unlocked" if self._guard is None else f"locked, fence {self.fence}"
        return f"<fencelock threading lock {self.name!r} {state}>"
