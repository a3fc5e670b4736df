"""Waiting for a native operation from asyncio, without taking its result: the operation tells
the loop, from whichever thread ends it, that it is over."""

from __future__ import annotations

import asyncio
from typing import Any


def _wake(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


async def over(op: Any) -> None:
    """Waits until ``op`` is over, without taking its result."""
    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def done() -> None:
        try:
            loop.call_soon_threadsafe(_wake, future)
        except RuntimeError:
            pass  # the loop is closed: nobody waits

    op.on_done(done)
    await future
