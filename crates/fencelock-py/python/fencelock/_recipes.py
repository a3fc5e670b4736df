"""The recipes' concepts over :mod:`fencelock._api`'s, each written once: an election and its
leadership, several locks at once, work done once. As there, the classes take their runner from
the client that made them, and the two public modules add what differs in shape."""

from __future__ import annotations

import inspect

from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from . import _checks
from ._api import _Held
from ._values import Done, Gap, GaveUp, Leader, Tick, TooLate, Vacant

if TYPE_CHECKING:
    from ._api import ClientBase


# ---------------------------------------------------------------------------------------------
# Election


def observation(seen: Any) -> Union[Leader, Vacant, Gap]:
    code, leader = seen
    if code == Leader.code:
        return Leader(*leader)
    return Vacant() if code == Vacant.code else Gap()


class Leadership(_Held):
    """This process leads an election until it resigns or the leadership is lost (see
    :class:`fencelock.Leadership`)."""

    __slots__ = ()

    @property
    def election(self) -> str:
        return self._native.election

    @property
    def term(self) -> int:
        """The term: a fence, strictly larger than every earlier leader's."""
        return self._native.term

    @property
    def since(self) -> float:
        """When the term began, in seconds since the epoch (the server's clock)."""
        return self._native.since

    @property
    def value(self) -> str:
        """The value announced last in this term."""
        return self._native.value()

    def proclaim(self, value: str) -> Any:
        """Announces a new value in this term. Raises :class:`fencelock.NotLeader` if this
        process no longer leads."""
        return self._run(self._native.proclaim, value)

    def resign(self) -> Any:
        """Steps down: ``True`` if this process still led. A cancelled resignation still
        resigns."""
        return self._run(self._native.resign)

    def __repr__(self) -> str:
        return f"<fencelock leadership {self.election!r} term={self.term}>"


class Election:
    """One election (see :meth:`Client.election`)."""

    __slots__ = ("_client", "name")

    def __init__(self, client: "ClientBase", name: str) -> None:
        self._client = client
        self.name = name

    def campaign(self, value: str, *, ttl: Optional[float] = None, wait: Optional[float] = None,
                 label: Optional[str] = None, **unknown: Any) -> Any:
        """Waits to lead (``wait``: ``None`` as long as it takes, 0 not at all, else seconds)
        and gives the leadership (``label`` labels its hold, as a lock's). Raises
        :class:`fencelock.Busy` or :class:`fencelock.TimedOut` when someone else leads and the
        wait is over."""
        _checks.check(self.name, dict(unknown, ttl=ttl, wait=wait, label=label), _checks.MULTI)
        client = self._client
        return client._run(
            client._native.campaign,
            self.name,
            value,
            ttl,
            wait,
            label,
            then=lambda native: client._leadership_class(native, client._run),
        )

    def leader(self) -> Any:
        """The current leader (:class:`fencelock.Leader`), or ``None``."""
        return self._client._run(
            self._client._native.leader, self.name, then=lambda found: None if found is None else Leader(*found)
        )


# ---------------------------------------------------------------------------------------------
# Several locks at once, and run-once


class MultiLockRequest:
    """A request for several locks at once (see :meth:`Client.multi_lock`)."""

    __slots__ = ("_client", "names", "_ttl", "_wait", "_label", "_held")

    #: Set by each flavour: the class of its guards.
    _guard_class: Any

    def __init__(self, client: "ClientBase", names: List[str], ttl: Optional[float], wait: Optional[float],
                 label: Optional[str] = None) -> None:
        self._client = client
        self.names = names
        self._ttl = ttl
        self._wait = wait
        self._label = label
        self._held: Dict[Any, List[Any]] = {}

    def acquire(self, **unknown: Any) -> Any:
        """Takes every name, or none (raises as :meth:`LockRequest.acquire`)."""
        if unknown:
            _checks.unknown(self.names[0] if self.names else None, unknown, {})
        run = self._client._run
        return run(self._client._native.multi_acquire, self.names, self._ttl, self._wait, self._label,
                   then=lambda native: self._guard_class(native, run))


class MultiGuard(_Held):
    """Several locks held together: ``fences`` maps each name to its fence (in the order
    given); ``release()`` releases every one."""

    __slots__ = ()

    @property
    def fences(self) -> Dict[str, int]:
        return dict(self._native.fences)

    def release(self) -> Any:
        """Releases every name: ``True`` if every one was still held."""
        return self._run(self._native.release)

    def _end_block(self) -> Any:
        """Releases every name at the end of a ``with`` block whose work succeeded: raises
        :class:`fencelock.NotHeld` (the name, and why) if one was lost meanwhile."""
        return self._run(self._native.end_block)

    def __repr__(self) -> str:
        return f"<fencelock multi-guard {self.fences!r}>"


class OnceRun(_Held):
    """A run-once's run while its work runs (the second argument of a ``work`` that takes
    two): its ``fence``, its ``tick`` (seconds since the epoch; ``None`` without a tick), and
    its lock's loss (``lost``, :attr:`lost_reason`, :meth:`is_held`): work that must not go on
    without the lock stops when it is lost."""

    __slots__ = ()

    @property
    def tick(self) -> Optional[float]:
        return self._native.tick

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def fence(self) -> int:
        return self._native.fence


def _takes_run(work: Any) -> bool:
    """Whether ``work`` takes a second argument, the run (``work(fence, run)``)."""
    try:
        parameters = list(inspect.signature(work).parameters.values())
    except (TypeError, ValueError):
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 2 or any(p.kind is p.VAR_POSITIONAL for p in parameters)


class Once:
    """Work to do once (see :meth:`Client.once`)."""

    __slots__ = ("_client", "key", "_lock", "_ttl", "_wait", "_label", "_keep", "_tick", "_attempts")

    def __init__(self, client: "ClientBase", key: str, lock: Optional[str], ttl: Optional[float],
                 wait: Optional[float], label: Optional[str] = None, keep: Optional[float] = None,
                 tick: Optional[Tick] = None, attempts: Optional[int] = None) -> None:
        self._client = client
        self.key = key
        self._lock = lock
        self._ttl = ttl
        self._wait = wait
        self._label = label
        self._keep = keep
        self._tick = tick
        self._attempts = attempts

    def current_tick(self) -> Any:
        """The tick a start now would belong to (seconds since the epoch; by the Redis
        server's clock for :meth:`Tick.every`), or ``None`` without a tick. Takes and writes
        nothing: what a scheduler that sends the runs stamps on them (the receiving side then
        runs ``Tick.planned`` of it, whenever the run leaves the queue)."""
        tick = self._tick or Tick()
        return self._client._run(self._client._native.once_tick, self.key, self._lock, tick.period, tick.early,
                                 tick.late, tick.at)

    def _begin(self) -> Any:
        """Takes the lock unless the work was done or the start is too late for its tick: a
        :class:`fencelock.Done`, a :class:`fencelock.TooLate`, or the native run holding the
        lock."""

        def made(begun: Any) -> Any:
            if isinstance(begun, tuple):
                made = {"done": Done, "late": TooLate, "gave_up": GaveUp}[begun[0]]
                return made(*begun[1:])
            return begun

        tick = self._tick or Tick()
        return self._client._run(self._client._native.once_begin, self.key, self._lock, self._ttl,
                                 self._wait, self._label, self._keep, tick.period, tick.early,
                                 tick.late, tick.at, self._attempts, then=made)
