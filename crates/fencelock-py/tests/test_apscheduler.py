"""APScheduler in two processes: each schedules the same interval job (the same start date) with
``fencelock.apscheduler.Executor``; every fire time runs once, in one process or the other."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import apscheduler  # noqa: F401  (the suite needs it: scripts/test installs it)
from conftest import stop_processes, tick_of, wait_for

PERIOD = 0.5
FIRES = 12

PROCESS = """
import os, signal, sys, time
import redis
import fencelock, fencelock.apscheduler
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.triggers.interval import IntervalTrigger

client = fencelock.Client(os.environ["FENCELOCK_URL"])
store = redis.Redis.from_url(os.environ["FENCELOCK_URL"])

def rollup():
    store.rpush("ran", os.getpid())
    time.sleep(0.05)

scheduler = BlockingScheduler(timezone="UTC")
scheduler.add_executor(fencelock.apscheduler.Executor(client), "once")
trigger = IntervalTrigger(seconds=float(os.environ["PERIOD"]), start_date="2026-01-01", timezone="UTC")
scheduler.add_job(rollup, trigger, id="rollup", executor="once", misfire_grace_time=30)
signal.signal(signal.SIGTERM, lambda *_: scheduler.shutdown(wait=True))
scheduler.start()
"""


def test_two_processes_run_each_fire_time_once(server, tmp_path: Path):
    store = server.raw()
    script = tmp_path / "process.py"
    script.write_text(PROCESS)
    env = dict(os.environ, FENCELOCK_URL=server.url, PERIOD=str(PERIOD))
    processes = [subprocess.Popen([sys.executable, str(script)], env=env, stdout=subprocess.DEVNULL,
                                  stderr=open(tmp_path / f"log{i}", "w"), start_new_session=True)
                 for i in range(2)]
    records = lambda: store.keys("fencelock:once:{rollup}:rollup@*")
    try:
        wait_for(f"{FIRES} fire times run", lambda: len(records()) >= FIRES, 60)
    finally:
        stop_processes(processes)

    ran = [int(pid) for pid in store.lrange("ran", 0, -1)]
    stored = [key.decode() for key in records()]
    times = sorted(tick_of(k) for k in stored)
    # Each fire time ran once (every run recorded under a fire time of its own), with no fire
    # time left out between the first and the last.
    assert len(ran) == len(stored), f"{len(ran)} runs for {len(stored)} fire times"
    steps = [round(b - a, 3) for a, b in zip(times, times[1:])]
    assert all(step == PERIOD for step in steps), f"fire times not one after the other: {sorted(stored)}"
    pids = {p.pid for p in processes}
    assert set(ran) <= pids
    print(f"{len(stored)} fire times, each run once by 2 processes (runs per process: "
          f"{[ran.count(pid) for pid in sorted(pids)]})")
