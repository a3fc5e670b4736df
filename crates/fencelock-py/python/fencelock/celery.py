"""Celery: a periodic task whose body runs once per tick, however many workers receive it.

Beat run on several hosts (or restarted, or a message redelivered) sends one tick's task
several times, and each worker that receives it would run it. Wrapped with
:func:`once_per_tick`, the body runs under ``client.once(job, tick=...)``: the first worker to
take the job's lock runs it and records the tick; the others (waiting for the lock meanwhile)
find the record and skip it.

The tick:

- ``every=SECONDS`` (the period of the beat schedule's entry): the **Redis server's clock**
  floored to it when the worker starts the message, so that workers whose clocks disagree
  agree on it. A message that waited in the queue past its period runs the tick it is taken
  in, not the one it was sent for: prefer the :class:`Scheduler`'s stamp.
- Otherwise the tick the message was sent for: its ``fencelock_tick`` header (seconds since the
  epoch), which beat stamps with :class:`Scheduler` (by the Redis server's clock when it sends
  it, so a message that waited in the queue still runs its own tick; what several beats need),
  or ``task.apply_async(headers={"fencelock_tick": t})``; else its ETA. A message with none of
  them is refused (``fencelock.InvalidArgument``): there is no tick to run once.

The body gets the lock's fence as the keyword argument ``fence``. A body that raises records
nothing (the exception goes on, to Celery's retry if the task asks for one): the next message
of that tick runs it. The task returns the body's value when it ran, ``None`` when the tick was
done (or too late: ``late=``).

Requires Celery 5.3 or later (``pip install fencelock[celery]``).
"""

from __future__ import annotations

import datetime
import functools
import logging
from typing import Any, Callable, Optional

from . import _checks
from ._values import Ran, Tick, TooLate
from .errors import InvalidArgument

try:
    from celery import current_task
    from celery import schedules as celery_schedules
    from celery.beat import PersistentScheduler
except ImportError as missing:  # pragma: no cover - the message is the point
    raise ImportError("fencelock.celery needs Celery: pip install 'fencelock[celery]'") from missing

__all__ = ["once_per_tick", "Scheduler"]

log = logging.getLogger("fencelock.celery")


def once_per_tick(client: Any, *, every: Optional[float] = None, early: Optional[float] = None,
                  late: Optional[float] = None, job: Optional[str] = None, ttl: Optional[float] = None,
                  wait: Optional[float] = None, keep: Optional[float] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Wraps a Celery task's body (put it under ``@app.task``) so that it runs once per tick
    across workers (see the module's docs). ``client`` is a :class:`fencelock.Client`;
    ``job`` names the run-once record (default: the body's module and name); ``ttl`` and
    ``wait`` are the job's lock's (default: 30 s, and as long as it takes); ``keep`` the
    record's (default 7 days)."""
    for option, value in (("every", every), ("early", early), ("late", late), ("ttl", ttl), ("wait", wait),
                          ("keep", keep)):
        problem = _checks._seconds(value) if value is not None else None
        if problem:
            raise InvalidArgument(f"invalid argument for lock {job!r}: {option} {problem}", lock=job)

    def decorate(body: Callable[..., Any]) -> Callable[..., Any]:
        name = job or f"{body.__module__}.{body.__qualname__}"

        @functools.wraps(body)
        def task(*args: Any, **kwargs: Any) -> Any:
            request = current_task.request if current_task else None
            tick = _tick(name, request, every, early, late)
            label = f"celery {getattr(request, 'hostname', None)} {getattr(request, 'id', None)}"
            once = client.once(name, tick=tick, ttl=ttl, wait=wait, keep=keep, label=label[:128])
            outcome = once.run(lambda fence: body(*args, fence=fence, **kwargs))
            if isinstance(outcome, Ran):
                return outcome.value
            if isinstance(outcome, TooLate):
                log.info("%s: %.3f s after its tick began, later than late=%s: not run", name, outcome.late, late)
            else:
                log.info("%s: tick %s done before (fence %s): not run", name, outcome.tick, outcome.fence)
            return None

        return task

    return decorate


def _tick(job: str, request: Any, every: Optional[float], early: Optional[float], late: Optional[float]) -> Tick:
    if every is not None:
        return Tick.every(every, early=early, late=late)
    planned = getattr(request, "fencelock_tick", None)
    if planned is None:
        planned = getattr(request, "eta", None)
    if isinstance(planned, str):
        planned = datetime.datetime.fromisoformat(planned)
    if isinstance(planned, datetime.datetime):
        if planned.tzinfo is None:
            planned = planned.replace(tzinfo=datetime.timezone.utc)
        return Tick.planned(planned)
    if isinstance(planned, (int, float)) and not isinstance(planned, bool):
        return Tick.planned(float(planned))
    raise InvalidArgument(
        f"invalid argument for lock {job!r}: the message says no planned time (no fencelock_tick "
        "header, no ETA): give once_per_tick every=, the period of its beat schedule",
        lock=job,
    )


class Scheduler(PersistentScheduler):
    """Celery beat's scheduler that stamps each periodic task it sends with its tick, by the
    Redis server's clock at the time it sends it (the ``fencelock_tick`` header that
    :func:`once_per_tick` reads): beats on several hosts, whatever their clocks, stamp one
    tick's messages alike, and a message that waits in the queue still runs its own tick.

    The tick of an interval entry is the server's clock floored to its period; of a crontab
    entry, to the minute. Other entries (solar) are sent unstamped.

    ``app.conf.beat_scheduler = "fencelock.celery:Scheduler"`` and
    ``app.conf.fencelock_url = "redis://..."`` (the server the tasks' locks live on; the clock
    read is that of the task's name's).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._fencelock: Any = None
        super().__init__(*args, **kwargs)

    def apply_async(self, entry: Any, producer: Any = None, advance: bool = True, **kwargs: Any) -> Any:
        period = _period(entry.schedule)
        if period:
            if self._fencelock is None:
                from ._sync import Client

                self._fencelock = Client(self.app.conf.fencelock_url)
            tick = self._fencelock.once(entry.task, tick=Tick.every(period)).current_tick()
            options = dict(entry.options)
            options["headers"] = dict(options.get("headers") or {}, fencelock_tick=tick)
            entry.options = options
        return super().apply_async(entry, producer=producer, advance=advance, **kwargs)


def _period(schedule: Any) -> Optional[float]:
    """An entry's period in seconds: an interval's, a minute for a crontab, else ``None``."""
    if isinstance(schedule, celery_schedules.crontab):
        return 60.0
    if isinstance(schedule, celery_schedules.schedule):
        seconds = schedule.run_every.total_seconds()
        return seconds if seconds > 0 else None
    return None
