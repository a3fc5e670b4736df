"""What the blocking and the asyncio APIs share: how a client is made and a request
described."""

from __future__ import annotations

import atexit
import threading
from typing import Any, Dict, Generic, Optional, Sequence, Tuple, Type, TypeVar, Union

from . import _native
from .errors import NotHeld

atexit.register(_native._shutdown)

Urls = Union[str, Sequence[str]]


def native_client(topology: str, urls: Urls, master: Optional[str], options: Dict[str, Any]) -> Any:
    if isinstance(urls, str):
        urls = [urls]
    return _native.Client(topology, list(urls), master, **options)


def spec(
    kind: str,
    name: str,
    *,
    ttl: Optional[float] = None,
    wait: Optional[float] = None,
    max_hold: Optional[float] = None,
    auto_renew: bool = True,
    queue_timeout: Optional[float] = None,
    permits: int = 1,
    lock_delay: Optional[float] = None,
) -> Any:
    return _native.Spec(
        kind,
        name,
        permits=permits,
        ttl=ttl,
        wait=wait,
        queue_timeout=queue_timeout,
        max_hold=max_hold,
        auto_renew=auto_renew,
        lock_delay=lock_delay,
    )


class LostState:
    """Why a lock was lost, set once from a runtime thread.

    It refers to nothing of the guard's, so a guard that is dropped unreleased can still be
    collected (and released)."""

    __slots__ = ("event", "reason", "message", "_lock", "_armed")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.reason: Optional[str] = None
        self.message: Optional[str] = None
        self._lock = threading.Lock()
        self._armed = False

    def arm(self, native_guard: Any) -> None:
        with self._lock:
            if self._armed:
                return
            self._armed = True
        native_guard.on_lost(self.set)

    def set(self, reason: str, message: str) -> None:
        self.reason = reason
        self.message = message
        self.event.set()


def not_held(name: str, lost: Optional[Tuple[str, str]]) -> NotHeld:
    """``NotHeld`` for a block that ended after its lock was lost (``lost``: the guard's
    ``lost_now()`` just before its release)."""
    reason, text = lost if lost is not None else ("not_owner", "Redis says another owner has it, or the key was deleted")
    return NotHeld(f"lock {name!r} was lost before the block ended: {text}", lock=name, reason=reason)


C = TypeVar("C", bound="ClientBase[Any]")
#: A client's request class: `fencelock.LockRequest` or `fencelock.aio.LockRequest`.
R = TypeVar("R")


class ReadWriteLock(Generic[R]):
    """A read-write lock: many readers, or one writer."""

    __slots__ = ("_client", "name")

    def __init__(self, client: "ClientBase[R]", name: str) -> None:
        self._client = client
        self.name = name

    def read(self, **options: Any) -> R:
        """A request for the read side (the options of ``Client.lock``)."""
        return self._client._request(spec("read", self.name, **options))

    def write(self, **options: Any) -> R:
        """A request for the write side (the options of ``Client.lock``)."""
        return self._client._request(spec("write", self.name, **options))


class ClientBase(Generic[R]):
    """What both clients share: how they are made, the server they talk to, and the requests
    they make (each client's own request class, through `_request`)."""

    __slots__ = ("_native",)

    def _request(self, request_spec: Any) -> R:
        raise NotImplementedError

    def __init__(self, url: str, **options: Any) -> None:
        self._native = native_client("server", url, None, options)

    @classmethod
    def _make(cls: Type[C], topology: str, urls: Urls, master: Optional[str], options: Dict[str, Any]) -> C:
        client = cls.__new__(cls)
        client._native = native_client(topology, urls, master, options)
        return client

    @classmethod
    def redlock(cls: Type[C], urls: Urls, **options: Any) -> C:
        """A client for Redlock over independent servers (a majority must agree)."""
        return cls._make("redlock", urls, None, options)

    @classmethod
    def cluster(cls: Type[C], urls: Urls, **options: Any) -> C:
        """A client for a Redis Cluster, from one or more seed URLs."""
        return cls._make("cluster", urls, None, options)

    @classmethod
    def sentinel(cls: Type[C], sentinels: Urls, master: str, **options: Any) -> C:
        """A client for the master that Sentinel names ``master``."""
        return cls._make("sentinel", sentinels, master, options)

    @property
    def server(self) -> str:
        """The server(s) this client talks to, without any password."""
        return self._native.server()

    def lock(
        self,
        name: str,
        *,
        ttl: Optional[float] = None,
        wait: Optional[float] = None,
        max_hold: Optional[float] = None,
        auto_renew: bool = True,
        lock_delay: Optional[float] = None,
    ) -> R:
        """A request for the exclusive lock ``name``.

        ``ttl``: the lease in seconds (default 30), renewed in the background while held
        unless ``auto_renew=False``. ``wait``: seconds to wait (``None``, the default: as long
        as it takes; ``0``: not at all). ``max_hold``: stop renewing after this long.
        ``lock_delay``: if this holder's lease runs out without a release, the lock is not
        granted again for this many seconds after (a release ends it at once).
        """
        return self._request(
            spec("lock", name, ttl=ttl, wait=wait, max_hold=max_hold, auto_renew=auto_renew, lock_delay=lock_delay)
        )

    def fair_lock(self, name: str, *, queue_timeout: Optional[float] = None, **options: Any) -> R:
        """A request for the fair lock ``name``: granted in the order of asking."""
        return self._request(spec("fair", name, queue_timeout=queue_timeout, **options))

    def semaphore(self, name: str, permits: int, **options: Any) -> R:
        """A request for one of ``permits`` permits of the semaphore ``name``."""
        return self._request(spec("semaphore", name, permits=permits, **options))

    def read_write_lock(self, name: str) -> ReadWriteLock[R]:
        """The read-write lock ``name``: ``.read()`` / ``.write()`` make requests."""
        return ReadWriteLock(self, name)

    def __repr__(self) -> str:
        return repr(self._native)
