"""fencelock from Python, beside redis-py's Lock and python-redis-lock, on one real redis-server.

Workloads (each contender in turn, in rounds; the table gives the median of the rounds):
  P1  one thread, a new key each cycle: acquire + release, cycles/s and cycle p50/p99
  P2  8 threads on one key, each holding it 1 ms: grants/s and wait p99
  P3  8 processes on one key, each holding it 1 ms: grants/s and wait p99

Contenders use their defaults, as a user would; redis-py's Lock polls every `sleep` seconds
(0.1 by default), so it also runs with sleep=0.001. Only fencelock gives a fence.

    scripts/ensure-python --release
    target/py-venv/bin/python crates/fencelock-py/bench/bench.py [--seconds 5] [--rounds 3] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from typing import Any, Callable, Dict, List, Tuple

import redis
import redis_lock

import fencelock

TTL = 10


class Server:
    def __init__(self) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.dir = tempfile.mkdtemp(prefix="fencelock-pybench-")
        binary = os.environ.get("FENCELOCK_TEST_SERVER") or shutil.which("redis-server")
        if not binary:
            sys.exit("no redis-server on PATH (scripts/ensure-redis installs it)")
        self.version = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout.split()[2]
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.dir],
            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
        )
        self.url = f"redis://127.0.0.1:{self.port}"
        for _ in range(500):
            try:
                redis.Redis(port=self.port).ping()
                return
            except redis.ConnectionError:
                time.sleep(0.01)
        self.stop()
        sys.exit("redis-server did not start")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


# A contender makes, per thread or process, a function `cycle(key, hold)` that acquires the
# lock `key` (waiting as long as it takes), holds it `hold` seconds, releases it, and returns
# the seconds it waited.
Cycle = Callable[[str, float], float]


def fencelock_maker(url: str) -> Callable[[], Cycle]:
    client_box: Dict[int, fencelock.Client] = {}

    def make() -> Cycle:
        client = client_box.setdefault(os.getpid(), fencelock.Client(url))

        def cycle(key: str, hold: float) -> float:
            started = time.perf_counter()
            guard = client.lock(key, ttl=TTL).acquire()
            waited = time.perf_counter() - started
            if hold:
                time.sleep(hold)
            guard.release()
            return waited

        return cycle

    return make


def redis_maker(url: str, new_lock: Callable[[redis.Redis, str], Any]) -> Callable[[], Cycle]:
    """A lock on redis-py's client: ``new_lock(client, key)`` makes it (redis-py's ``Lock``,
    python-redis-lock's ``Lock``: both ``acquire(blocking=True)`` and ``release()``)."""
    pools: Dict[int, redis.Redis] = {}

    def make() -> Cycle:
        r = pools.setdefault(os.getpid(), redis.Redis.from_url(url))

        def cycle(key: str, hold: float) -> float:
            lock = new_lock(r, key)
            started = time.perf_counter()
            lock.acquire(blocking=True)
            waited = time.perf_counter() - started
            if hold:
                time.sleep(hold)
            lock.release()
            return waited

        return cycle

    return make


def redis_py_maker(url: str, sleep: float) -> Callable[[], Cycle]:
    return redis_maker(url, lambda r, key: r.lock(key, timeout=TTL, sleep=sleep))


def python_redis_lock_maker(url: str) -> Callable[[], Cycle]:
    return redis_maker(url, lambda r, key: redis_lock.Lock(r, key, expire=TTL))


def percentile(values: List[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def p1(make: Callable[[], Cycle], seconds: float) -> Dict[str, float]:
    cycle = make()
    prefix = f"bench/p1/{uuid.uuid4().hex}/"
    times: List[float] = []
    end = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < end:
        started = time.perf_counter()
        cycle(f"{prefix}{i}", 0.0)
        times.append(time.perf_counter() - started)
        i += 1
    return {"per_s": len(times) / seconds, "p50_us": percentile(times, 0.5) * 1e6, "p99_us": percentile(times, 0.99) * 1e6}


def contend(make: Callable[[], Cycle], key: str, seconds: float, results: list, start: threading.Event) -> None:
    cycle = make()
    waits: List[float] = []
    start.wait()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        waits.append(cycle(key, 0.001))
    results.append(waits)


def p2(make: Callable[[], Cycle], seconds: float) -> Dict[str, float]:
    key = f"bench/p2/{uuid.uuid4().hex}"
    results: list = []
    start = threading.Event()
    threads = [threading.Thread(target=contend, args=(make, key, seconds, results, start)) for _ in range(8)]
    for t in threads:
        t.start()
    start.set()
    for t in threads:
        t.join()
    return summarize(results, seconds)


def _process(make, key, seconds, queue, start) -> None:
    results: list = []
    contend(make, key, seconds, results, start)
    queue.put(results[0])


def p3(make: Callable[[], Cycle], seconds: float) -> Dict[str, float]:
    key = f"bench/p3/{uuid.uuid4().hex}"
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    start = context.Event()
    processes = [context.Process(target=_process, args=(make, key, seconds, queue, start)) for _ in range(8)]
    for p in processes:
        p.start()
    time.sleep(0.5)  # every process has made its client
    start.set()
    results = [queue.get(timeout=seconds + 60) for _ in processes]
    for p in processes:
        p.join(30)
    return summarize(results, seconds)


def summarize(results: List[List[float]], seconds: float) -> Dict[str, float]:
    waits = [w for r in results for w in r]
    return {"per_s": len(waits) / seconds, "wait_p50_ms": percentile(waits, 0.5) * 1e3, "wait_p99_ms": percentile(waits, 0.99) * 1e3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the medians and every round here")
    parser.add_argument("--workloads", default="P1,P2,P3", help="which workloads (comma-separated)")
    parser.add_argument("--contenders", default="", help="only the contenders whose name contains one of these (comma-separated)")
    args = parser.parse_args()

    server = Server()
    try:
        contenders: List[Tuple[str, Callable[[], Cycle]]] = [
            ("fencelock", fencelock_maker(server.url)),
            ("redis-py Lock", redis_py_maker(server.url, 0.1)),
            ("redis-py Lock, sleep=0.001", redis_py_maker(server.url, 0.001)),
            ("python-redis-lock", python_redis_lock_maker(server.url)),
        ]
        wanted = args.contenders.split(",") if args.contenders else [""]
        contenders = [c for c in contenders if any(w in c[0] for w in wanted)]
        workloads = [w for w in [("P1", p1), ("P2", p2), ("P3", p3)] if w[0] in args.workloads.split(",")]
        rounds: Dict[str, Dict[str, List[Dict[str, float]]]] = {}
        for round_ in range(args.rounds):
            for wname, workload in workloads:
                for cname, make in contenders:
                    result = workload(make, args.seconds)
                    rounds.setdefault(wname, {}).setdefault(cname, []).append(result)
                    print(f"round {round_ + 1} {wname} {cname}: {result}", file=sys.stderr, flush=True)
    finally:
        server.stop()

    medians = {
        w: {c: {k: statistics.median(r[k] for r in runs) for k in runs[0]} for c, runs in by_c.items()}
        for w, by_c in rounds.items()
    }
    print(f"redis-server {server.version}, Python {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
          f"{args.seconds:g} s per run, median of {args.rounds} rounds\n")
    print("| workload | contender | cycles/s | p50 | p99 |")
    print("|---|---|---:|---:|---:|")
    for w, by_c in medians.items():
        for c, m in by_c.items():
            if w == "P1":
                print(f"| {w} | {c} | {m['per_s']:,.0f} | {m['p50_us']:,.0f} µs | {m['p99_us']:,.0f} µs |")
            else:
                print(f"| {w} | {c} | {m['per_s']:,.0f} | wait {m['wait_p50_ms']:,.2f} ms | wait {m['wait_p99_ms']:,.1f} ms |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"medians": medians, "rounds": rounds, "seconds": args.seconds}, f, indent=1)


if __name__ == "__main__":
    main()
