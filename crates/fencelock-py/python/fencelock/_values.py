"""Values fencelock gives back: what an observer of an election sees, and the operator's view of
a lock. Each observation has the ``code`` the library gives it (``leader``, ``vacant``,
``gap``), as ``fencelock leader --watch --json`` shows it."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import List, NamedTuple, Optional, Union


class Leader(NamedTuple):
    """The leader of an election, as its record says (observation code ``leader``)."""

    value: str
    #: The leader's term: its lock's fence, strictly larger than every earlier leader's.
    term: int
    #: When the term began, in seconds since the epoch (the server's clock).
    since: float

    code = "leader"


class Vacant:
    """Nobody leads: the leader resigned or its lease ran out, or nobody led when the observer
    looked (observation code ``vacant``)."""

    code = "vacant"

    def __repr__(self) -> str:
        return "Vacant"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vacant)

    def __hash__(self) -> int:
        return hash(self.code)


class Gap:
    """The observer's subscription was lost: announcements may have been missed. The
    then-current leader (or :class:`Vacant`) follows (observation code ``gap``)."""

    code = "gap"

    def __repr__(self) -> str:
        return "Gap"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Gap)

    def __hash__(self) -> int:
        return hash(self.code)


Observation = Union[Leader, Vacant, Gap]


@dataclass(frozen=True)
class Holder:
    """Who holds a lock, as far as it is safe to show."""

    #: The first 8 hex digits of the holder's owner token.
    token_prefix: str
    #: The holder's fence (a reader's: ``None``).
    fence: Optional[int]
    #: Seconds left of its lease (``None``: the key has no expiry).
    remaining: Optional[float]
    #: How many times the owner of a reentrant lock holds it (``None`` for other kinds).
    holds: Optional[int]
    #: How many permits a semaphore's holder holds (``None`` for other kinds).
    permits: Optional[int] = None
    #: The holder's label (the request's ``label``), if it gave one.
    label: Optional[str] = None


@dataclass(frozen=True)
class Waiter:
    """A request waiting for a lock, as far as it is safe to show."""

    #: Its place in line, 1 for the first (``None``: the kind keeps no order).
    place: Optional[int]
    #: Seconds it has waited (``None`` where the kind records no arrival: a plain lock).
    waited: Optional[float]
    #: The first 8 hex digits of the waiting request's token.
    token_prefix: str
    #: What a read-write lock's waiter waits for: ``reader`` or ``writer`` (else ``None``).
    side: Optional[str]


@dataclass(frozen=True)
class LockInfo:
    """The state of a lock as Redis has it (:meth:`Client.inspect`)."""

    name: str
    #: ``lock`` (plain or fair), ``reentrant``, ``read-write``, ``semaphore``, ``other``, or
    #: ``None`` when nothing is held.
    kind: Optional[str]
    #: A semaphore's number of permits, as its holders use it.
    permits: Optional[int]
    #: The exclusive holder, if any (a writer, for a read-write lock).
    holder: Optional[Holder]
    #: The shared holders: a read-write lock's readers, a semaphore's permits.
    shared: List[Holder] = field(default_factory=list)
    #: How many wait for it.
    waiting: int = 0
    #: Who waits for it, in line order (only requests that keep a place in Redis are seen).
    waiters: List[Waiter] = field(default_factory=list)
    #: The last fence handed out for this name.
    last_fence: Optional[int] = None

    def is_held(self) -> bool:
        """Whether anyone holds the lock (exclusively or shared)."""
        return self.holder is not None or bool(self.shared)


@dataclass(frozen=True)
class Listing:
    """What :meth:`Client.list` found."""

    #: The locks held, sorted by name.
    locks: List[LockInfo]
    #: Names that matched but are not fencelock locks, each as the error that says why.
    skipped: List[Exception]
    #: Over Redlock, the instances that did not answer (``host:port: reason``).
    unanswered: List[str]


class Done(NamedTuple):
    """Work done once (:meth:`Client.once`): the fence of the run that did it, when it was
    recorded (seconds since the epoch, by the server's clock), and the tick it was done for
    (seconds since the epoch; ``None`` without a tick)."""

    fence: int
    at: float
    tick: Optional[float] = None


class TooLate(NamedTuple):
    """A start too late for its tick (:meth:`Tick.every` with ``late``): nothing ran."""

    #: When the tick began, in seconds since the epoch.
    tick: float
    #: How long after it this start came, in seconds (by the server's clock).
    late: float


class GaveUp(NamedTuple):
    """As many runs failed as ``attempts`` allows (:meth:`Client.once`): nothing ran."""

    #: How many runs failed.
    failures: int
    #: The tick, in seconds since the epoch (``None`` without a tick).
    tick: Optional[float] = None


@dataclass(frozen=True)
class Tick:
    """Which tick of a scheduled job a run belongs to (``client.once(job, tick=...)``): the
    record is ``JOB@TICK``, and every start of one tick finds the record of the one that did
    the work. See docs/schedulers.md.

    - :meth:`Tick.every`: the Redis server's clock floored to the period (periods from the Unix
      epoch, in UTC), so that hosts whose clocks disagree agree on it.
    - :meth:`Tick.planned`: the time the scheduler planned the run for (Celery's, APScheduler's
      scheduled time), the same for every worker and for the retries.
    """

    #: :meth:`every`'s period, early and late windows (seconds).
    period: Optional[float] = None
    early: Optional[float] = None
    late: Optional[float] = None
    #: :meth:`planned`'s time (seconds since the epoch).
    at: Optional[float] = None

    @classmethod
    def every(cls, period: float, *, early: Optional[float] = None, late: Optional[float] = None) -> "Tick":
        """The server's clock floored to ``period`` seconds. A start up to ``early`` seconds
        before a tick belongs to it (default 5, at most a tenth of the period); a start more
        than ``late`` seconds after its tick began runs nothing (:class:`TooLate`; default:
        any start within the period runs its tick)."""
        return cls(period=period, early=early, late=late)

    @classmethod
    def planned(cls, at: Union[float, datetime]) -> "Tick":
        """The tick the scheduler planned: a timezone-aware ``datetime``, or seconds since the
        epoch (to the millisecond)."""
        if isinstance(at, datetime):
            if at.tzinfo is None:
                raise ValueError("a planned tick needs a timezone-aware datetime (UTC)")
            at = at.timestamp()
        return cls(at=float(at))


class Ran(NamedTuple):
    """This run did the work done once, and recorded it: what the work returned."""

    value: object
