"""``threading.Lock``'s protocol over a fencelock lock, for libraries that take a lock object
(as they take ``threading.Lock`` or redis-py's ``Lock``): ``client.threading_lock(name)``.

- ``acquire(blocking=True, timeout=-1) -> bool``: ``True`` once held; ``False`` when
  ``blocking=False`` and another owner holds it, or when ``timeout`` (seconds) runs out.
  ``timeout=-1`` waits as long as it takes. As with ``threading.Lock``, acquiring it again
  through the same object before releasing it waits for itself.
- ``release()``: releases it. Raises ``RuntimeError`` if it is not acquired (as
  ``threading.Lock`` does), and :class:`fencelock.NotHeld` if it was acquired but lost
  meanwhile (the work it protected ran without it for a while).
- ``locked()``: whether anyone holds the lock now (a read of Redis, as redis-py's);
  ``owned()``: whether this object holds it.
- ``fence``: the fencing token of the current hold (``None`` when not held).
- ``extend(ttl)``: re-arms the lease to ``ttl`` seconds from now. It *replaces* the lease;
  redis-py's ``extend(additional_time)`` *adds* to what is left of it.
- ``with lock:`` acquires (blocking) and releases.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, Optional, Type

from .errors import Busy, TimedOut


class ThreadingLock:
    """A fencelock lock with ``threading.Lock``'s protocol (see the module docs)."""

    __slots__ = ("_client", "name", "_options", "_guard", "_mutex")

    def __init__(self, client: Any, name: str, options: Any) -> None:
        # (``client``: a ``fencelock.Client``, which makes this object; its guard below.)
        if "wait" in options:
            raise TypeError("threading_lock() takes no wait: acquire's blocking and timeout say how long to wait")
        # Checked now, as client.lock() checks them.
        client.lock(name, **options)
        self._client = client
        self.name = name
        self._options = options
        self._guard: Optional[Any] = None
        self._mutex = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Takes the lock: ``True`` once held, ``False`` if it could not be had in time."""
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")
        if timeout < 0 and timeout != -1:
            raise ValueError("timeout value must be a non-negative number")
        wait = 0 if not blocking else (None if timeout == -1 else timeout)
        try:
            guard = self._client.lock(self.name, wait=wait, **self._options).acquire()
        except (Busy, TimedOut):
            return False
        with self._mutex:
            self._guard = guard
        return True

    def release(self) -> None:
        """Releases the lock (see the module docs for what it raises)."""
        with self._mutex:
            guard, self._guard = self._guard, None
        if guard is None:
            raise RuntimeError(f"release unlocked lock {self.name!r}")
        # Released; NotHeld (with the reason the release found) if it had been lost, as the
        # native side decides it for every package.
        guard._end_block()

    def locked(self) -> bool:
        """Whether anyone holds the lock now, as Redis says."""
        info = self._client.inspect(self.name)
        return info.holder is not None or bool(info.shared)

    def owned(self) -> bool:
        """Whether this object holds the lock, as far as this process can tell now."""
        guard = self._guard
        return guard is not None and guard.is_held()

    @property
    def fence(self) -> Optional[int]:
        """The fencing token of the current hold; ``None`` when not held."""
        guard = self._guard
        return None if guard is None else guard.fence

    def extend(self, ttl: float) -> None:
        """Re-arms the lease to ``ttl`` seconds from now (it replaces the lease; redis-py's
        ``extend`` adds to it). Raises ``RuntimeError`` if not acquired, and
        :class:`fencelock.NotHeld` if the lock was lost."""
        guard = self._guard
        if guard is None:
            raise RuntimeError(f"extend of unlocked lock {self.name!r}")
        guard.extend(ttl)

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
