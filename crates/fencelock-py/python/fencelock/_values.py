"""Values fencelock gives back: what an observer of an election sees, and the operator's view of
a lock. Each observation has the ``code`` the library gives it (``leader``, ``vacant``,
``gap``), as ``fencelock leader --watch --json`` shows it."""

from __future__ import annotations

from dataclasses import dataclass, field
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
    """Work done once (:meth:`Client.once`): the fence of the run that did it, and when it was
    recorded (seconds since the epoch, by that run's clock)."""

    fence: int
    at: float


class Ran(NamedTuple):
    """This run did the work done once, and recorded it: what the work returned."""

    value: object
