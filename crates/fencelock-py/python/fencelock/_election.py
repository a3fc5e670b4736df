"""Leader election, blocking: campaign, lead, proclaim, resign; read or follow the leader."""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any, Iterator, NamedTuple, Optional, Type, Union

from . import _common


class Leader(NamedTuple):
    """The leader of an election, as its record says."""

    value: str
    #: The leader's term: its lock's fence, strictly larger than every earlier leader's.
    term: int
    #: When the term began, in seconds since the epoch (the server's clock).
    since: float


class Vacant:
    """Nobody leads (the leader resigned, or nobody led when the observer looked)."""

    def __repr__(self) -> str:
        return "Vacant"


class Gap:
    """The observer's subscription was lost: announcements may have been missed. The
    then-current leader (or :class:`Vacant`) follows."""

    def __repr__(self) -> str:
        return "Gap"


Observation = Union[Leader, Vacant, Gap]


def observation(seen: Any) -> Observation:
    kind, leader = seen
    if kind == "leader":
        return Leader(*leader)
    return Vacant() if kind == "vacant" else Gap()


class LeadershipView:
    """What both leadership classes (blocking and asyncio) read of the native leadership."""

    __slots__ = ("_native",)

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def election(self) -> str:
        return self._native.election

    @property
    def term(self) -> int:
        return self._native.term

    @property
    def since(self) -> float:
        return self._native.since

    @property
    def value(self) -> str:
        return self._native.value()

    def is_held(self) -> bool:
        return self._native.is_held()

    def __repr__(self) -> str:
        return f"<fencelock leadership {self.election!r} term={self.term}>"


class Leadership(LeadershipView):
    """This process leads the election until it resigns or the leadership is lost.

    Leaving a ``with`` block resigns. ``term`` is a fence: pass it to fenced writes."""

    __slots__ = ("_lost",)

    def __init__(self, native: Any) -> None:
        super().__init__(native)
        self._lost = _common.LostState()

    @property
    def lost(self) -> threading.Event:
        """Set when the leadership is lost (or resigned)."""
        self._lost.arm(self._native)
        return self._lost.event

    def proclaim(self, value: str) -> None:
        """Announces a new value in this term. Raises :class:`fencelock.NotLeader` if this
        process no longer leads."""
        self._native.proclaim(value)

    def resign(self) -> bool:
        """Steps down: ``True`` if this process still led."""
        return self._native.resign()

    def __enter__(self) -> "Leadership":
        return self

    def __exit__(self, kind: Optional[Type[BaseException]], value: Optional[BaseException],
                 traceback: Optional[TracebackType]) -> None:
        self.resign()


class Election:
    """One election (see :meth:`Client.election`)."""

    __slots__ = ("_client", "name")

    def __init__(self, client: Any, name: str) -> None:
        self._client = client
        self.name = name

    def campaign(self, value: str, *, ttl: Optional[float] = None, wait: Optional[float] = None) -> Leadership:
        """Waits to lead (``wait``: None as long as it takes, 0 not at all, else seconds) and
        returns the leadership. Raises :class:`fencelock.Busy` or :class:`fencelock.TimedOut`
        when someone else leads and the wait is over."""
        return Leadership(self._client.campaign(self.name, value, ttl, wait))

    def leader(self) -> Optional[Leader]:
        """The current leader, or ``None``."""
        found = self._client.leader(self.name)
        return None if found is None else Leader(*found)

    def observe(self, timeout: Optional[float] = None) -> Iterator[Observation]:
        """The leaders as they change: the current one first, then each change in term order,
        by pub/sub. With ``timeout``, the iteration ends when nothing happens for that long."""
        observer = self._client.observe(self.name)
        while True:
            seen = observer.next(timeout)
            if seen is None:
                return
            yield observation(seen)
