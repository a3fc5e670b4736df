"""APScheduler: a job that several processes schedule runs once per fire time.

Every process that runs a :class:`~apscheduler.schedulers.base.BaseScheduler` with the same job
fires it; with :class:`Executor` as the job's executor, each fire runs under
``client.once(job_id, tick=Tick.planned(fire_time))``: the first process to take the job's
lock runs it and records the fire time, the others find the record and skip it. A run that
raises records nothing, so another process's fire of the same time runs it (one at a time).

The fire time is the one APScheduler planned (the trigger's, not any host's clock), the same
in every process when their triggers agree: a cron trigger does by itself; an interval trigger
needs the same ``start_date`` everywhere (``IntervalTrigger(minutes=5,
start_date="2026-01-01")``), since by default each process counts from its own start.

::

    scheduler.add_executor(fencelock.apscheduler.Executor(client), "once")
    scheduler.add_job(rollup, "cron", minute="*/5", id="rollup", executor="once")

Requires APScheduler 3.10 or later, before 4 (``pip install fencelock[apscheduler]``).
"""

from __future__ import annotations

import logging
from typing import Any, List, Optional

from ._values import Ran, Tick, TooLate

try:
    from apscheduler.executors.base import run_job
    from apscheduler.executors.pool import ThreadPoolExecutor
except ImportError as missing:  # pragma: no cover - the message is the point
    raise ImportError("fencelock.apscheduler needs APScheduler 3: pip install 'fencelock[apscheduler]'") from missing

__all__ = ["Executor"]

log = logging.getLogger("fencelock.apscheduler")


class Executor(ThreadPoolExecutor):
    """A thread-pool executor whose jobs run once per fire time across the processes that
    schedule them (see the module's docs). ``client`` is a :class:`fencelock.Client`; the
    run-once record is the job's id and its fire time; ``ttl`` is the job's lock's lease
    (default 30 s, renewed while it runs), ``keep`` how long a fire's record is kept (default 7
    days)."""

    def __init__(self, client: Any, max_workers: int = 10, *, ttl: Optional[float] = None,
                 keep: Optional[float] = None, pool_kwargs: Any = None) -> None:
        super().__init__(max_workers, pool_kwargs)
        self._client = client
        self._ttl = ttl
        self._keep = keep

    def _do_submit_job(self, job: Any, run_times: List[Any]) -> None:
        def callback(f: Any) -> None:
            exc = f.exception()
            if exc:
                self._run_job_error(job.id, exc, getattr(exc, "__traceback__", None))
            else:
                self._run_job_success(job.id, f.result())

        f = self._pool.submit(self._run, job, run_times)
        f.add_done_callback(callback)

    def _run(self, job: Any, run_times: List[Any]) -> List[Any]:
        events: List[Any] = []
        for run_time in run_times:
            events.extend(run_job(_Fire(self, job, run_time), job._jobstore_alias, [run_time], self._logger.name))
        return events


class _Fire:
    """One fire of a job, as ``run_job`` calls it: the job's function under the run-once of
    its id and fire time."""

    __slots__ = ("_executor", "_job", "_run_time", "id", "misfire_grace_time", "args", "kwargs")

    def __init__(self, executor: Executor, job: Any, run_time: Any) -> None:
        self._executor = executor
        self._job = job
        self._run_time = run_time
        self.id = job.id
        self.misfire_grace_time = job.misfire_grace_time
        self.args = ()
        self.kwargs = {}

    def func(self) -> Any:
        job, executor = self._job, self._executor
        once = executor._client.once(job.id, tick=Tick.planned(self._run_time), ttl=executor._ttl,
                                     keep=executor._keep, label=f"apscheduler {job.id}"[:128])
        outcome = once.run(lambda fence: job.func(*job.args, **job.kwargs))
        if isinstance(outcome, Ran):
            return outcome.value
        if isinstance(outcome, TooLate):  # a planned tick is never late; kept for completeness
            return None
        log.info('job "%s" at %s: done before (fence %s), not run here', job.id, self._run_time, outcome.fence)
        return None

    def __str__(self) -> str:
        return str(self._job)
