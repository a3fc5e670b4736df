"""Closing a client (``client.close()``, ``await client.aclose()``, the end of its ``with`` or
``async with`` block): what a client keeps to do it, and the runners that keep it.

Every call of a client goes through its scope: a call on a closed client raises
:class:`fencelock.ClientClosed`; a call in progress (a wait for a lock, a read) is remembered
until it is over, so that the closing can give it up (it then raises ``ClientClosed``). What a
call gives that holds something (a guard, a leadership, a multi-lock guard, a run) is kept by
the native module, by client, for the exit; the closing has it give back the client's
(``close_holds``). The calls of a guard itself (``release``, ``extend``) are not the client's:
they still answer after the close (``release()`` gives ``False``), and a ``with`` block whose
lock the close released raises ``NotHeld`` (reason ``released``) at its end, as for any lock
lost during the block.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Callable, List, Optional, Set, Tuple

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
    """A client's calls in progress (see the module docs)."""

    __slots__ = ("_lock", "_closed", "_ops")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._ops: Set[Any] = set()

    @property
    def closed(self) -> bool:
        return self._closed

    def begin(self, op: Any) -> None:
        """Remembers ``op`` for the closing. No lock: the closing marks the scope closed
        before it takes the calls, so a call added too late sees the mark and gives itself
        up (``set.add`` and ``discard`` are atomic)."""
        self._ops.add(op)
        if self._closed:
            self._ops.discard(op)
            op.cancel()
            raise closed_error()

    def end(self, op: Any) -> None:
        self._ops.discard(op)

    def failed(self) -> None:
        """A call of the client's failed: ``ClientClosed`` if the closing ended it (raised from
        an ``except`` block, which re-raises the call's own error otherwise)."""
        if self._closed:
            raise closed_error() from None

    def adopt(self, value: Any, plain: Callable[..., Any]) -> Any:
        """Gives a hold's own calls the plain runner (they are not the client's). A hold that
        raced the closing is released at once (the closing may have given it back already)."""
        if isinstance(value, Holding):
            value._run = plain
            if self._closed:
                _give_back(value)  # goes on by itself
                raise closed_error()
        return value

    def close(self) -> List[Any]:
        """Marks the client closed: the calls in progress, for the caller to end. Empty the
        second time."""
        with self._lock:
            self._closed = True
            ops, self._ops = list(self._ops), set()
        return ops


def _give_back(held: Any) -> Any:
    """Starts the release (or the resignation) of ``held``: its operation."""
    native = held._native
    release = getattr(native, "release", None) or native.resign
    return release()


def run_blocking(scope: Scope, plain: Callable[..., Any], call: Callable[..., Any], *args: Any,
                 then: Optional[Callable[[Any], Any]] = None) -> Any:
    """The blocking runner, through ``scope`` (the path of every call: ``Scope``'s steps
    written out, one Python frame)."""
    if scope._closed:
        raise closed_error()
    op = call(*args)
    scope._ops.add(op)
    try:
        if scope._closed:  # closed since: see Scope.begin
            op.cancel()
            raise closed_error()
        value = op.wait()
    except RuntimeError:
        scope.failed()
        raise
    finally:
        scope._ops.discard(op)
    if then is not None:
        value = then(value)
    if isinstance(value, Holding):  # Scope.adopt, written out
        value._run = plain
        if scope._closed:
            _give_back(value)
            raise closed_error()
    return value


async def run_async(scope: Scope, plain: Callable[..., Any], call: Callable[..., Any], *args: Any,
                    then: Optional[Callable[[Any], Any]] = None) -> Any:
    """The asyncio runner, through ``scope``."""
    if scope._closed:
        raise closed_error()
    op = call(*args)
    scope.begin(op)
    try:
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
    except RuntimeError:
        scope.failed()
        raise
    finally:
        scope.end(op)
    if then is not None:
        value = then(value)
    return scope.adopt(value, plain)


def _ending(scope: Scope, native_client: Any) -> Tuple[List[Any], Any]:
    """Closes ``scope``: the calls' clean-ups, and the give-back of the client's holds."""
    clean_ups = [op.cancel() for op in scope.close()]
    return clean_ups, native_client.close_holds()


def close_blocking(scope: Scope, native_client: Any) -> None:
    """Ends the client's calls in progress and releases its holds; returns when done."""
    clean_ups, holds = _ending(scope, native_client)
    for op in clean_ups + [holds]:
        try:
            op.wait()
        except Exception:  # a release that failed (Redis gone): the lease runs out
            pass


async def close_async(scope: Scope, native_client: Any) -> None:
    """:func:`close_blocking`, awaited."""
    clean_ups, holds = _ending(scope, native_client)
    for op in clean_ups + [holds]:
        await _over(op)
    try:
        holds.take()
    except Exception:  # as above
        pass
