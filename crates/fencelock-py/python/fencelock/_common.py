"""What the blocking and the asyncio APIs share: how a client is made and a request
described."""

from __future__ import annotations

import atexit
import threading
from typing import Any, Dict, Optional, Sequence, Tuple, Union

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
