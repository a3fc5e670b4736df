"""Scheduled jobs from Python: ``client.once(job, tick=fencelock.Tick...)`` runs once per tick
(by the Redis server's clock, or the time the scheduler planned), with the record the command's
``run --once --every/--tick`` and the Rust library's ``Once::tick`` keep; a start too late for
its tick runs nothing; a keep that would break "never twice" is refused."""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from datetime import datetime, timezone

import pytest

import fencelock
import fencelock.aio

MIDNIGHT = 1795910400.0  # 2026-11-29T00:00:00Z


def test_the_starts_of_one_tick_by_the_servers_clock_run_once(server, name):
    client = fencelock.Client(server.url)
    seconds, micros = server.raw().time()
    calls = []

    def work(fence):
        calls.append(fence)
        time.sleep(0.1)

    results = []
    once = lambda: results.append(client.once(name, tick=fencelock.Tick.every(3600), label="beat").run(work))
    threads = [threading.Thread(target=once) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(calls) == 1
    done = [r for r in results if isinstance(r, fencelock.Done)]
    assert len(done) == 3
    # The hour the server's clock was in (or the next, within the 5 s early window).
    since = int(seconds + micros / 1e6 + 5)
    hour = float(since - since % 3600)
    assert all(d.tick == hour for d in done), done
    record = f"fencelock:once:{{{name}}}:{name}@" + time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(hour))
    kept = server.raw().pttl(record)
    assert 7 * 86400 * 1000 - 60_000 < kept <= 7 * 86400 * 1000


def test_a_planned_tick_runs_once_while_kept_and_the_command_finds_it_done(server, name, fencelock_cli):
    client = fencelock.Client(server.url)
    planned = fencelock.Tick.planned(datetime(2026, 11, 29, tzinfo=timezone.utc))
    assert planned.at == MIDNIGHT
    first = client.once(name, tick=planned, keep=1.5).run(lambda fence: fence)
    assert isinstance(first, fencelock.Ran)
    again = client.once(name, tick=fencelock.Tick.planned(MIDNIGHT + 0.0003), keep=1.5).run(lambda fence: fence)
    assert again == fencelock.Done(first.value, again.at, MIDNIGHT)
    record = f"fencelock:once:{{{name}}}:{name}@2026-11-29T00:00:00.000Z"
    assert 0 < server.raw().pttl(record) <= 1500
    # The command's `run --once --tick` of that time is the same record.
    command = [fencelock_cli, "run", "--url", server.url, "--once", name, "--tick", "2026-11-29T00:00:00Z",
               "--done-exit", "3", "--", "false"]
    found = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert found.returncode == 3, found.stderr
    assert "was done before" in found.stderr
    # The next tick runs, from asyncio too.

    async def next_tick():
        aio = fencelock.aio.Client(server.url)

        async def work(fence):
            return fence

        return await aio.once(name, tick=fencelock.Tick.planned(MIDNIGHT + 3600)).run(work)

    assert isinstance(asyncio.run(next_tick()), fencelock.Ran)


def test_a_start_too_late_for_its_tick_runs_nothing(server, name):
    client = fencelock.Client(server.url)
    tick = fencelock.Tick.every(3600, early=0.001, late=0.001)
    late = client.once(name, tick=tick).run(lambda fence: pytest.fail("ran"))
    assert isinstance(late, fencelock.TooLate)
    assert late.tick % 3600 == 0 and 0.001 < late.late < 3600
    assert server.raw().keys(f"*{name}*") == []


def test_a_keep_that_would_break_never_twice_is_refused(server, name):
    client = fencelock.Client(server.url)
    with pytest.raises(fencelock.InvalidArgument, match="keep it at least") as refused:
        client.once(name, tick=fencelock.Tick.every(3600), keep=3600).run(lambda fence: None)
    assert refused.value.lock == name
    with pytest.raises(fencelock.InvalidArgument, match="tick"):
        client.once(name, tick="hourly")
    with pytest.raises(ValueError, match="timezone"):
        fencelock.Tick.planned(datetime(2026, 11, 29))
    assert server.raw().keys(f"*{name}*") == []


def test_a_tick_whose_runs_fail_gives_up_after_its_attempts(server, name):
    client = fencelock.Client(server.url)
    planned = fencelock.Tick.planned(MIDNIGHT)
    failures = f"fencelock:once-failed:{{{name}}}:{name}@2026-11-29T00:00:00.000Z"
    calls = []

    def failing(fence):
        calls.append(fence)
        raise RuntimeError("no")

    for n in (1, 2):
        with pytest.raises(RuntimeError):
            client.once(name, tick=planned, attempts=2).run(failing)
        assert server.raw().get(failures) == str(n).encode()
    gave_up = client.once(name, tick=planned, attempts=2).run(failing)
    assert gave_up == fencelock.GaveUp(2, MIDNIGHT)
    assert len(calls) == 2
    # More attempts allowed: it runs, and its success clears the count.
    assert isinstance(client.once(name, tick=planned, attempts=3).run(lambda fence: "ok"), fencelock.Ran)
    assert not server.raw().exists(failures)
    with pytest.raises(fencelock.InvalidArgument, match="attempts"):
        client.once(name, attempts="3")


def test_the_work_is_told_when_its_run_loses_the_lock(server, name):
    client = fencelock.Client(server.url)
    seen = {}

    def work(fence, run):
        seen["tick"] = run.tick
        assert not run.lost.is_set() and run.is_held()
        # The lock's key goes (as if a newer holder's operator forced it away): the run's next
        # renewal finds it gone.
        server.raw().delete(f"fencelock:{{{name}}}")
        seen["lost"] = run.lost.wait(10)
        seen["reason"] = run.lost_reason

    # Told of the loss; it returned anyway, and as no newer run's fence was accepted meanwhile
    # its record is written (the fence check is what "never twice" rests on).
    outcome = client.once(name, tick=fencelock.Tick.planned(MIDNIGHT), ttl=0.6).run(work)
    assert isinstance(outcome, fencelock.Ran)
    assert seen == {"tick": MIDNIGHT, "lost": True, "reason": "not_owner"}

    async def main():
        aio = fencelock.aio.Client(server.url)

        async def work(fence, run):
            assert run.tick is None
            await asyncio.get_running_loop().run_in_executor(None, server.raw().delete, f"fencelock:{{{name}/2}}")
            return await asyncio.wait_for(run.lost(), 10)

        ran = await aio.once(f"{name}/2", ttl=0.6).run(work)
        assert ran == fencelock.Ran("not_owner")

    asyncio.run(main())
