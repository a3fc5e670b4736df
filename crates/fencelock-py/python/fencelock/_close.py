"""Closing a client (``client.close()``, ``await client.aclose()``, the end of its ``with`` or
``async with`` block): what a client keeps to do it, and the runners that keep it.

Every call of a client goes through its scope: a call on a closed client raises
:class:`fencelock.ClientClosed`; a call in progress (a wait for a lock, a read) is remembered
until it is over, so that the closing can give it up (it then raises ``ClientClosed``); and
what a call gives that holds something (a guard, a leadership, a multi-lock guard) is
remembered, weakly, for the closing to release. The calls of a guard itself (``release``,
``extend``) are not the client's: they still answer after the close (``release()`` gives
``False``), and a ``with`` block whose lock the close released raises ``NotHeld`` (reason
``released``) at its end, as for any lock lost during the block.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from typing import Any, Callable, Iterator, List, Optional, Set, Tuple

from ._over import over as _over
from .errors import ClientClosed


class Holding:
    """What holds something and is given back by the closing: a guard, a leadership, a
    multi-lock guard (their shared class derives from this one)."""

    __slots__ = ()


def closed_error(lock: Optional[str] = None) -> ClientClosed:
    where = "" if lock is None else f"lock {lock!r}: "
    return ClientClosed(f"{where}the fencelock client is closed", lock=lock, reason="closed")


class Scope:
    """A client's calls in progress and its holds (see the module docs)."""

    __slots__ = ("_lock", "_closed", "_ops", "_holds")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._ops: Set[Any] = set()
        self._holds: "weakref.WeakSet[Any]" = weakref.WeakSet()

    @property
    def closed(self) -> bool:
        return self._closed

    def check(self, lock: Optional[str] = None) -> None:
        if self._closed:
            raise closed_error(lock)

    def begin(self, op: Any) -> None:
        with self._lock:
            if self._closed:
                op.cancel()
                raise closed_error()
            self._ops.add(op)

    def end(self, op: Any) -> None:
        with self._lock:
            self._ops.discard(op)

    def adopt(self, value: Any, plain: Callable[..., Any]) -> Any:
        """Remembers ``value`` if it holds something, and gives its own calls the plain runner
        (they are not the client's). A hold that raced the closing is released at once."""
        if isinstance(value, Holding):
            value._run = plain
            with self._lock:
                if not self._closed:
                    self._holds.add(value)
                    return value
            _give_back(value)  # goes on by itself
            raise closed_error()
        return value

    def close(self) -> Tuple[List[Any], List[Any]]:
        """Marks the client closed: the calls in progress and the holds, for the caller to
        end. Empty the second time."""
        with self._lock:
            self._closed = True
            ops, self._ops = list(self._ops), set()
            holds = list(self._holds)
            self._holds = weakref.WeakSet()
        return ops, holds


def _give_back(held: Any) -> Any:
    """Starts the release (or the resignation) of ``held``: its operation."""
    native = held._native
    release = getattr(native, "release", None) or native.resign
    return release()


@contextlib.contextmanager
def _during(scope: Scope, op: Any) -> Iterator[None]:
    """Remembers ``op`` while it runs; a failure of it once the client closed is the closing's
    (``ClientClosed``)."""
    scope.begin(op)
    try:
        yield
    except RuntimeError:
        if scope.closed:
            raise closed_error() from None
        raise
    finally:
        scope.end(op)


def _answer(scope: Scope, plain: Callable[..., Any], value: Any,
            then: Optional[Callable[[Any], Any]]) -> Any:
    if then is not None:
        value = then(value)
    return scope.adopt(value, plain)


def run_blocking(scope: Scope, plain: Callable[..., Any], call: Callable[..., Any], *args: Any,
                 then: Optional[Callable[[Any], Any]] = None) -> Any:
    """The blocking runner, through ``scope``."""
    scope.check()
    op = call(*args)
    with _during(scope, op):
        value = op.wait()
    return _answer(scope, plain, value, then)


async def run_async(scope: Scope, plain: Callable[..., Any], call: Callable[..., Any], *args: Any,
                    then: Optional[Callable[[Any], Any]] = None) -> Any:
    """The asyncio runner, through ``scope``."""
    scope.check()
    op = call(*args)
    with _during(scope, op):
        try:
            await _over(op)
        except asyncio.CancelledError:
            # As the plain runner: the call given up, its clean-up waited for.
            try:
                await _over(op.cancel())
            except asyncio.CancelledError:
                pass
            raise
        value = op.take()
    return _answer(scope, plain, value, then)


def close_blocking(scope: Scope) -> None:
    """Ends the client's calls in progress and releases its holds; returns when done."""
    ops, holds = scope.close()
    clean_ups = [op.cancel() for op in ops]
    releases = [_give_back(held) for held in holds]
    for op in clean_ups + releases:
        try:
            op.wait()
        except Exception:  # a release that failed (Redis gone): the lease runs out
            pass


async def close_async(scope: Scope) -> None:
    """:func:`close_blocking`, awaited."""
    ops, holds = scope.close()
    clean_ups = [op.cancel() for op in ops]
    releases = [_give_back(held) for held in holds]
    for op in clean_ups + releases:
        await _over(op)
        if op in releases:
            try:
                op.take()
            except Exception:  # as above
                pass
