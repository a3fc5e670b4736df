"""The concepts of fencelock's Python API, each written once: the client, a request, a guard,
a reentrant lock, a read-write lock, a fenced store, the operator's calls (the recipes' are in
``_recipes.py``).

Every native call is one operation (``_native.Operation``) that a *runner* turns into a
result: the blocking runner waits for it (``fencelock``), the asyncio runner awaits it
(``fencelock.aio``). The classes here take their runner from the client that made them; the
two public modules only add what differs in shape (``with`` or ``async with``, a
``threading.Event`` or an awaitable), and their type declarations.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import os
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from . import _checks, _native
from ._values import Holder, LockInfo, Listing, Waiter
from ._close import Holding, Scope
from ._over import over as _over
from ._writes import Writes
from .errors import ConfigError, Error

atexit.register(_native._shutdown)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_native._forked)

Urls = Union[str, Sequence[str]]

# ---------------------------------------------------------------------------------------------
# Runners


def wait(call: Callable[..., Any], *args: Any, then: Optional[Callable[[Any], Any]] = None) -> Any:
    """The blocking runner: starts the native ``call(*args)`` and waits for its operation
    (Ctrl-C gives it up, after its clean-up)."""
    value = call(*args).wait()
    return value if then is None else then(value)


async def awaited(call: Callable[..., Any], *args: Any, then: Optional[Callable[[Any], Any]] = None) -> Any:
    """The asyncio runner: starts the native ``call(*args)`` when awaited (not before) and
    gives its result; cancelling the awaiting task gives the call up."""
    op = call(*args)
    try:
        await _over(op)
    except asyncio.CancelledError:
        # Given up: a wait is stopped, a release goes on; a result that raced the
        # cancellation is undone. The clean-up is waited for (at most 2 s); a second
        # cancellation stops the wait, not the clean-up.
        clean_up = op.cancel()
        try:
            await _over(clean_up)
        except asyncio.CancelledError:
            pass
        raise
    value = op.take()
    return value if then is None else then(value)


Runner = Callable[..., Any]

#: Set by :func:`fencelock.otel.instrument` given a tracer: ``traced(request, try_only)`` makes
#: an acquisition in its spans, and gives what ``acquire`` (``try_acquire``) gives. ``None``
#: (the default): nothing traced, and nothing spent but this module's look at it.
traced: Optional[Callable[[Any, bool], Any]] = None


def _watch(op: Any, on_value: Callable[[Any], None]) -> None:
    """Calls ``on_value(result)`` when ``op`` succeeds (from fencelock's answering thread);
    nothing when it fails (the watched hold ended)."""

    def done() -> None:
        try:
            value = op.take()
        except (Error, RuntimeError):
            return
        on_value(value)

    op.on_done(done)


# ---------------------------------------------------------------------------------------------
# Requests


def spec(kind: str, name: str, **options: Any) -> Any:
    """A checked request (``_checks.LOCK``: ``ttl``, ``wait``, ``max_hold``, ``auto_renew``,
    ``queue_timeout``, ``permits``, ``lock_delay``, ``take``)."""
    return _native.Spec(kind, _checks.name(name), **_checks.lock_options(name, options))


class _Held(Holding):
    """What a guard, a leadership and a multi-lock guard share: the native object, the runner,
    and the events (``threading.Event``) fed by operations that end with the hold."""

    __slots__ = ("_native", "_run", "_watches", "__weakref__")

    def __init__(self, native: Any, run: Runner) -> None:
        self._native = native
        self._run = run
        #: The operations that feed the events (made with the first); they end with the hold.
        self._watches: Optional[Dict[str, Any]] = None

    def is_held(self) -> bool:
        """Whether it is still held, as far as this process can tell now."""
        return self._native.is_held()

    @property
    def lost_reason(self) -> Optional[str]:
        """``None`` while held; then ``not_owner``, ``expired``, ``max_hold_reached`` or
        ``released``."""
        now = self._native.lost_now()
        return None if now is None else now[-2]

    def _event(self, kind: str, start: Callable[[], Any], record: Callable[[Any], None]) -> threading.Event:
        if self._watches is None:
            self._watches = {}
        watch = self._watches.get(kind)
        if watch is None:
            event = threading.Event()
            op = start()

            def on_value(value: Any) -> None:
                record(value)
                event.set()

            _watch(op, on_value)
            watch = self._watches[kind] = (event, op)
        return watch[0]


class Guard(_Held):
    """A held lock (see :class:`fencelock.Guard`)."""

    __slots__ = ()

    @property
    def name(self) -> str:
        return self._native.name

    @property
    def fence(self) -> int:
        """The fencing token: strictly larger than every earlier fence of the name."""
        return self._native.fence

    def remaining(self) -> float:
        """Seconds until the lease's deadline (0 once passed or released)."""
        return self._native.remaining()

    def extend(self, ttl: float) -> Any:
        """Re-arms the lease to ``ttl`` seconds from now. Raises :class:`fencelock.NotHeld`
        if the lock was lost."""
        return self._run(self._native.extend, ttl)

    def release(self) -> Any:
        """Releases the lock: ``True`` if it was still held (``False``: it had been lost, or
        was released already). A cancelled release still releases."""
        return self._run(self._native.release)

    def _end_block(self) -> Any:
        """Releases at the end of a ``with`` block whose work succeeded: raises
        :class:`fencelock.NotHeld` (with the reason the release found) if the lock was lost
        meanwhile, as the native side decides for every package."""
        return self._run(self._native.end_block)

    def __repr__(self) -> str:
        return repr(self._native)


class LockRequest:
    """A request for a lock (see :class:`fencelock.LockRequest`)."""

    __slots__ = ("_acquirer", "_spec", "_run", "_held", "_kind")

    #: Set by each flavour: the class of its guards.
    _guard_class: Any

    def __init__(self, acquirer: Any, spec: Any, run: Runner, kind: str = "lock") -> None:
        self._acquirer = acquirer
        self._spec = spec
        self._run = run
        #: The kind the request was made for (``spec``'s), for the traces.
        self._kind = kind
        #: The guards of `with` blocks, per thread (or task).
        self._held: Dict[Any, List[Guard]] = {}

    @property
    def name(self) -> str:
        return self._spec.name

    def _make(self, native: Any) -> Optional[Guard]:
        return None if native is None else self._guard_class(native, self._run)

    def acquire(self, **unknown: Any) -> Any:
        """Waits for the lock (as the request's ``wait`` says) and gives its guard.

        Raises :class:`fencelock.TimedOut` when the wait runs out, :class:`fencelock.Busy`
        with ``wait=0``, or another :class:`fencelock.Error`. A cancelled or interrupted wait
        holds nothing and has left its place in line when it raises. It takes no options (the
        request's are given where it is made): one raises :class:`fencelock.InvalidArgument`."""
        if unknown:
            _checks.unknown(self.name, unknown, {})
        if traced is not None:
            return traced(self, False)
        return self._run(self._acquirer.acquire, self._spec, then=self._make)

    def try_acquire(self, **unknown: Any) -> Any:
        """One try: the guard, or ``None`` if another owner holds the lock."""
        if unknown:
            _checks.unknown(self.name, unknown, {})
        if traced is not None:
            return traced(self, True)
        return self._run(self._acquirer.acquire, self._spec, True, then=self._make)

    def _push(self, key: Any, guard: Guard) -> Guard:
        self._held.setdefault(key, []).append(guard)
        return guard

    def _pop(self, key: Any) -> Guard:
        stack = self._held[key]
        guard = stack.pop()
        if not stack:
            del self._held[key]
        return guard

    def __repr__(self) -> str:
        return f"<fencelock request {self.name!r}>"


class ReentrantLock:
    """A reentrant lock: the acquisitions made through one handle share one owner, so the
    holder can take it again (each acquisition is released on its own)."""

    __slots__ = ("_native", "_client")

    def __init__(self, native: Any, client: "ClientBase") -> None:
        self._native = native
        self._client = client

    @property
    def name(self) -> str:
        return self._native.name

    def request(self, **options: Any) -> Any:
        """A request with the options of :meth:`Client.lock`."""
        return self._client._request_class(self._native, spec("reentrant", self.name, **options), self._client._run,
                                           "reentrant")

    def acquire(self, **options: Any) -> Any:
        """Acquires the lock (again); see :meth:`LockRequest.acquire`."""
        return self.request(**options).acquire()

    def try_acquire(self, **options: Any) -> Any:
        """One try; ``None`` if another owner holds it."""
        return self.request(**options).try_acquire()


class ReadWriteLock:
    """A read-write lock: many readers, or one writer."""

    __slots__ = ("_client", "name")

    def __init__(self, client: "ClientBase", name: str) -> None:
        self._client = client
        self.name = name

    def read(self, **options: Any) -> Any:
        """A request for the read side (the options of ``Client.lock``)."""
        return self._client._request(spec("read", self.name, **options), "read")

    def write(self, **options: Any) -> Any:
        """A request for the write side (the options of ``Client.lock``)."""
        return self._client._request(spec("write", self.name, **options), "write")


class FencedStore:
    """Writes to Redis keys that only go through with a fence at least as new as the last one
    the resource accepted."""

    __slots__ = ("_native", "_run", "resource")

    def __init__(self, native: Any, run: Runner, resource: str) -> None:
        self._native = native
        self._run = run
        self.resource = resource

    def apply(self, fence: int, writes: Writes) -> Any:
        """Applies ``writes`` atomically if ``fence`` is not older than the resource's; gives
        the fence now accepted. Raises :class:`fencelock.Fenced` (nothing written) when a newer
        fence was accepted."""
        return self._run(self._native.fenced_apply, self.resource, fence, writes._ops)

    def accepted(self) -> Any:
        """The fence the resource accepted last (0: none yet)."""
        return self._run(self._native.fenced_accepted, self.resource)


# ---------------------------------------------------------------------------------------------
# The client


def _info(value: Dict[str, Any]) -> LockInfo:
    holder = value["holder"]
    return LockInfo(
        name=value["name"],
        kind=value["kind"],
        permits=value["permits"],
        holder=None if holder is None else Holder(**holder),
        shared=[Holder(**h) for h in value["shared"]],
        waiting=value["waiting"],
        waiters=[Waiter(**w) for w in value["waiters"]],
        last_fence=value["last_fence"],
    )


def _listing(value: Tuple[List[Dict[str, Any]], List[Error], List[str]]) -> Listing:
    locks, skipped, unanswered = value
    return Listing(locks=[_info(lock) for lock in locks], skipped=list(skipped), unanswered=list(unanswered))


class ClientBase:
    """What both clients share: how they are made, and every call, run by the client's
    runner."""

    __slots__ = ("_native", "_scope", "_run")

    #: Set by each client class: its runners (plain, and through the client's scope) and the
    #: classes it makes.
    _runner: Runner
    _scoped: Callable[..., Any]
    _request_class: Any
    _guard_class: Any
    _leadership_class: Any
    _multi_class: Any
    _once_class: Any

    def __init__(self, url: str, **options: Any) -> None:
        self._native = _native_client("server", url, None, options)
        self._scoped_runner()

    @classmethod
    def _make(cls, topology: str, urls: Urls, master: Optional[str], options: Dict[str, Any]) -> Any:
        client = cls.__new__(cls)
        client._native = _native_client(topology, urls, master, options)
        client._scoped_runner()
        return client

    def _scoped_runner(self) -> None:
        """The scope of the client's calls, and ``_run(call, *args, then=None)``, which runs
        them through it (see ``_close.py``): a ``partial``, no Python frame of its own."""
        self._scope = Scope()
        self._run: Runner = functools.partial(self._scoped, self._scope, self._runner)

    @property
    def closed(self) -> bool:
        """Whether the client was closed."""
        return self._scope.closed

    @classmethod
    def redlock(cls, urls: Urls, **options: Any) -> Any:
        """A client for Redlock over independent servers (a majority must agree)."""
        return cls._make("redlock", urls, None, options)

    @classmethod
    def cluster(cls, urls: Urls, **options: Any) -> Any:
        """A client for a Redis Cluster, from one or more seed URLs."""
        return cls._make("cluster", urls, None, options)

    @classmethod
    def sentinel(cls, sentinels: Urls, master: str, **options: Any) -> Any:
        """A client for the master that Sentinel names ``master``."""
        return cls._make("sentinel", sentinels, master, options)

    @property
    def server(self) -> str:
        """The server(s) this client talks to, without any password."""
        return self._native.server()

    def _request(self, request_spec: Any, kind: str = "lock") -> Any:
        return self._request_class(self._native, request_spec, self._run, kind)

    def lock(
        self,
        name: str,
        *,
        ttl: Optional[float] = None,
        wait: Optional[float] = None,
        max_hold: Optional[float] = None,
        auto_renew: bool = True,
        lock_delay: Optional[float] = None,
        label: Optional[str] = None,
        **unknown: Any,
    ) -> Any:
        """A request for the exclusive lock ``name``.

        ``ttl``: the lease in seconds (default 30), renewed in the background while held
        unless ``auto_renew=False``. ``wait``: seconds to wait (``None``, the default: as long
        as it takes; ``0``: not at all). ``max_hold``: stop renewing after this long.
        ``lock_delay``: if this holder's lease runs out without a release, the lock is not
        granted again for this many seconds after (a release ends it at once). ``label``: who
        holds it, in your words (a host and a PID, say; at most 128 bytes, no control
        characters), which :meth:`inspect` shows; one command more per grant, renewal and
        release. Every kind's request takes these options; another raises
        :class:`fencelock.InvalidArgument` naming it.
        """
        if unknown:
            _checks.unknown(name, unknown, _checks.PLAIN)
        return self._request(
            spec("lock", name, ttl=ttl, wait=wait, max_hold=max_hold, auto_renew=auto_renew, lock_delay=lock_delay,
                 label=label)
        )

    def fair_lock(self, name: str, *, queue_timeout: Optional[float] = None, **options: Any) -> Any:
        """A request for the fair lock ``name``: granted in the order of asking."""
        return self._request(spec("fair", name, queue_timeout=queue_timeout, **options), "fair")

    def semaphore(self, name: str, permits: int, *, take: int = 1, **options: Any) -> Any:
        """A request for ``take`` (default 1) of the ``permits`` permits of the semaphore
        ``name``, held with one lease and one fence. Permits go first come, first served: a
        large request is not starved by a stream of small ones."""
        return self._request(spec("semaphore", name, permits=permits, take=take, **options), "semaphore")

    def multi_lock(self, names: Sequence[str], *, ttl: Optional[float] = None, wait: Optional[float] = None,
                   label: Optional[str] = None, **unknown: Any) -> Any:
        """A request for the plain locks ``names``, all or none (deadlock-free whatever the
        order); each name keeps its own fence (``label`` labels each name's hold)."""
        names = [_checks.name(n, "each name") for n in names]
        _checks.check(names[0] if names else None, dict(unknown, ttl=ttl, wait=wait, label=label), _checks.MULTI)
        return self._multi_class(self, names, ttl, wait, label)

    def once(self, key: str, *, lock: Optional[str] = None, ttl: Optional[float] = None,
             wait: Optional[float] = None, label: Optional[str] = None, keep: Optional[float] = None,
             tick: Any = None, attempts: Optional[int] = None, **unknown: Any) -> Any:
        """Work to do once across the fleet, recorded under ``key`` when it succeeds (runs take
        turns on the lock ``lock``, the key by default; ``label`` labels its hold). With
        ``tick`` (a :class:`fencelock.Tick`), once per tick of a scheduled job: the record is
        ``KEY@TICK``. ``keep``: seconds the record is kept (default for ever; with a tick 7
        days, at least twice the period). ``attempts``: how many runs may fail before a start
        gives up (:class:`fencelock.GaveUp`; default any number, with a tick 3). See
        :meth:`fencelock.Once.run`."""
        options = dict(unknown, lock=lock, ttl=ttl, wait=wait, label=label, keep=keep, tick=tick, attempts=attempts)
        _checks.check(_checks.name(key, "key"), options, _checks.ONCE)
        return self._once_class(self, key, lock, ttl, wait, label, keep, tick, attempts)

    def read_write_lock(self, name: str) -> ReadWriteLock:
        """The read-write lock ``name``: ``.read()`` / ``.write()`` make requests."""
        return ReadWriteLock(self, name)

    def reentrant_lock(self, name: str, *, max_reentry: Optional[int] = None, **unknown: Any) -> ReentrantLock:
        """A handle on the reentrant lock ``name`` (the options of its acquisitions go to
        :meth:`ReentrantLock.acquire`)."""
        _checks.check(_checks.name(name), dict(unknown, max_reentry=max_reentry), _checks.REENTRANT)
        return ReentrantLock(self._native.reentrant(name, max_reentry), self)

    def fenced_store(self, resource: str) -> FencedStore:
        """Fenced writes to ``resource``."""
        return FencedStore(self._native, self._run, resource)

    def request_release(self, name: str) -> Any:
        """Asks the holders of lock ``name`` to release it (polite revocation); takes nothing.
        ``True`` if it was held."""
        return self._run(self._native.request_release, name)

    # The operator's calls.

    def inspect(self, name: str) -> Any:
        """The state of lock ``name`` as Redis has it (:class:`fencelock.LockInfo`): its
        holders and its line of waiters. Reads only."""
        return self._run(self._native.inspect, name, then=_info)

    def list(self, pattern: str = "*") -> Any:
        """The held locks whose name matches ``pattern`` (a Redis glob), found with ``SCAN``
        (:class:`fencelock.Listing`). Reads only."""
        return self._run(self._native.list, pattern, then=_listing)

    def force_release(self, name: str) -> Any:
        """Deletes lock ``name``, whoever holds it, and wakes its waiters: an operator's tool
        for a holder that is gone. ``True`` if it was held. Its holder learns it has lost the
        lock at its next renewal."""
        return self._run(self._native.force_release, name)

    def __repr__(self) -> str:
        return repr(self._native)


def _native_client(topology: str, urls: Urls, master: Optional[str], options: Dict[str, Any]) -> Any:
    if isinstance(urls, str):
        urls = [urls]
    if "tls_ca_file" in options:  # the name before TLS material could be given as bytes
        options["tls_ca"] = options.pop("tls_ca_file")
    _checks.check(None, options, _checks.CLIENT, ConfigError)
    return _native.Client(topology, list(urls), master, **options)
