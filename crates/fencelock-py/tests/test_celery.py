"""Celery with a real Redis broker: three beats (beat run on every host, as happens) each send
every tick's task, stamped with its tick by ``fencelock.celery.Scheduler``; three worker
processes take them. The body (``fencelock.celery.once_per_tick``) runs once per tick. One run
fails and Celery retries its task: the tick still runs once (the retry keeps the tick). One
worker is SIGKILLed in the middle of a run: that run records nothing, and another worker runs
its tick once the lock's lease (2 s) has run out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import celery  # noqa: F401  (the suite needs it: scripts/test installs it)
from conftest import stop_processes, tick_of, wait_for

PERIOD = 0.5
TICKS = 20

TASKS = """
import os, time
import redis
import fencelock, fencelock.celery
from celery import Celery

app = Celery("ticks", broker=os.environ["BROKER"])
app.conf.update(
    beat_scheduler="fencelock.celery:Scheduler",
    fencelock_url=os.environ["FENCELOCK_URL"],
    beat_schedule={"rollup": {"task": "ticks.rollup", "schedule": float(os.environ["PERIOD"])}},
    worker_prefetch_multiplier=1,
    broker_connection_retry_on_startup=True,
)
client = fencelock.Client(os.environ["FENCELOCK_URL"])
store = redis.Redis.from_url(os.environ["FENCELOCK_URL"])

@app.task(name="ticks.rollup", autoretry_for=(RuntimeError,), default_retry_delay=0.2, max_retries=3)
@fencelock.celery.once_per_tick(client, job="rollup", ttl=2.0)
def rollup(fence):
    store.rpush("started", fence)
    if store.delete("fail"):  # the test asks for one run that fails: Celery retries the task
        store.rpush("failed", fence)
        raise RuntimeError("failed once")
    if store.delete("hang"):  # the test asks for one run that hangs, and kills its worker
        store.set("hanging", f"{os.getpid()} {fence}")
        time.sleep(120)
    time.sleep(0.1)
    store.rpush("ran", fence)
"""


def _start(args, env, cwd, log):
    return subprocess.Popen([sys.executable, "-m", "celery", "-A", "ticks", *args], env=env, cwd=cwd,
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def test_three_beats_and_three_workers_run_each_tick_once_and_a_killed_run_is_run_again(server, tmp_path: Path):
    store = server.raw()
    (tmp_path / "ticks.py").write_text(TASKS)
    env = dict(os.environ, BROKER=server.url + "/1", FENCELOCK_URL=server.url, PERIOD=str(PERIOD),
               PYTHONPATH=os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH")) if p))
    logs = [open(tmp_path / f"log{i}", "w") for i in range(6)]
    workers, beats = [], []
    try:
        for i in range(3):
            workers.append(_start(["worker", "--pool", "solo", "-n", f"w{i}@%h", "-l", "info", "--without-gossip",
                                   "--without-mingle", "--without-heartbeat"], env, tmp_path, logs[i]))
        wait_for("the workers ready", lambda: all("ready." in (tmp_path / f"log{i}").read_text()
                                                    for i in range(3)), 60)
        for i in range(3):
            # Started a third of a period apart: their sends spread over the period.
            beats.append(_start(["beat", "-s", str(tmp_path / f"beat{i}"), "--pidfile", str(tmp_path / f"beat{i}.pid"),
                                 "-l", "info"], env, tmp_path, logs[3 + i]))
            time.sleep(PERIOD / 3)

        records = lambda: store.keys("fencelock:once:{rollup}:rollup@*")
        wait_for("five ticks run", lambda: len(records()) >= 5, 60)
        store.set("fail", 1)
        wait_for("a run failing", lambda: store.llen("failed") == 1, 30)
        store.set("hang", 1)
        wait_for("a run hanging", lambda: store.get("hanging"), 30)
        pid, killed_fence = store.get("hanging").decode().split()
        os.kill(int(pid), signal.SIGKILL)
        wait_for(f"{TICKS} ticks run", lambda: len(records()) >= TICKS, 60)
        stop_processes(beats)
        # What the beats sent is taken and found done (or run) meanwhile.
        wait_for("the queue drained", lambda: store.llen("celery") == 0 if store.exists("celery") else True, 30)
        time.sleep(3 * PERIOD)
    finally:
        stop_processes(beats)
        stop_processes(workers)
        for log in logs:
            log.close()

    stored = {key.decode(): store.get(key).decode() for key in records()}
    fences = sorted(int(v.split(":")[0]) for v in stored.values())
    ran = sorted(int(f) for f in store.lrange("ran", 0, -1))
    started = [int(f) for f in store.lrange("started", 0, -1)]
    # Each tick ran once: every run that finished is recorded, under a tick of its own.
    assert ran == fences, f"runs {ran} against records {stored}"
    # The killed run started, and recorded nothing; so did the failed one, whose retry (Celery
    # keeps the message's headers, its tick with them) or another worker ran its tick, once,
    # and cleared its count of failures.
    assert int(killed_fence) in started and int(killed_fence) not in fences
    failed = [int(f) for f in store.lrange("failed", 0, -1)]
    assert len(failed) == 1 and failed[0] not in fences
    assert store.keys("fencelock:once-failed:*") == []
    # No tick was lost, the killed run's included: the recorded ticks follow each other.
    ticks = sorted(tick_of(k) for k in stored)
    steps = [round(b - a, 3) for a, b in zip(ticks, ticks[1:])]
    assert all(step == PERIOD for step in steps), f"ticks not one after the other: {sorted(stored)}"
    assert len(ticks) >= TICKS
    print(f"{len(ticks)} ticks, each run once by 3 workers from 3 beats; {len(started)} runs started "
          f"(1 failed and retried, 1 killed: their ticks run again)")
