"""Metrics and traces: a scripted run of locks, read back through the Prometheus collector
(``fencelock.prometheus``), the OpenTelemetry SDK's in-memory reader and span exporter
(``fencelock.otel``), and ``fencelock.metrics``; the instruments exported against
docs/observability.md's table; the ``lock`` label by pattern.

The registry is the process's, and its series add up across tests: the scripted run names its
locks under a prefix of its own and asks for every name as the ``lock`` label, so that its
series are its own (the renewals, which have no ``lock`` label, are compared as deltas)."""

from __future__ import annotations

import asyncio
import inspect
import re
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterator, List, Tuple

import pytest
from opentelemetry.metrics import Meter
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import fencelock
import fencelock.aio
import fencelock.metrics
import fencelock.otel
import fencelock.prometheus
from conftest import ROOT, wait_for

Key = Tuple[str, FrozenSet[Tuple[str, str]]]


def key(name: str, **labels: str) -> Key:
    return name, frozenset(labels.items())


def values(series: List[fencelock.metrics.Series]) -> Dict[Key, Any]:
    """A snapshot's values by series: a histogram's is its count."""
    out: Dict[Key, Any] = {}
    for s in series:
        value = s.value.count if isinstance(s.value, fencelock.metrics.Histogram) else s.value
        out[key(s.name, **s.labels)] = value
    return out


def renewals() -> Dict[str, int]:
    return {s.labels["outcome"]: s.value for s in fencelock.metrics.snapshot()
            if s.name == "fencelock_renewals_total"}


class Run:
    """What the scripted run left: its names, exporters and spans."""

    def __init__(self, prefix: str) -> None:
        self.lock = f"{prefix}a"
        self.resource = f"{prefix}r"
        self.job = f"{prefix}job"
        self.election = f"{prefix}election"
        self.registry = CollectorRegistry()
        self.reader = InMemoryMetricReader()
        self.spans = InMemorySpanExporter()
        self.renewals_before: Dict[str, int] = {}
        self.waited = 0.0

    def ours(self, k: Key) -> bool:
        return any(label == "lock" and value.startswith(self.lock[:-1]) for label, value in k[1])

    def expected(self) -> Dict[Key, Any]:
        """Every series of the run: a counter's total, a gauge's value, a histogram's count."""
        lock, job, election = self.lock, self.job, self.election
        kind = "lock"
        return {
            key("fencelock_acquisitions_total", kind=kind, outcome="granted", lock=lock): 2,
            key("fencelock_acquisitions_total", kind=kind, outcome="busy", lock=lock): 1,
            key("fencelock_acquisitions_total", kind=kind, outcome="granted", lock=job): 1,
            key("fencelock_acquisitions_total", kind="election", outcome="granted", lock=election): 1,
            key("fencelock_passes_total", kind=kind, outcome="taken", lock=lock): 1,
            key("fencelock_losses_total", kind=kind, reason="not_owner", lock=lock): 1,
            key("fencelock_fenced_writes_total", outcome="accepted", lock=self.resource): 1,
            key("fencelock_fenced_writes_total", outcome="refused", lock=self.resource): 1,
            key("fencelock_once_total", outcome="ran", lock=job): 1,
            key("fencelock_once_total", outcome="already_done", lock=job): 1,
            key("fencelock_terms_total", event="won", lock=election): 1,
            key("fencelock_held", kind=kind, lock=lock): 0,
            key("fencelock_held", kind=kind, lock=job): 0,
            key("fencelock_held", kind="election", lock=election): 0,
            key("fencelock_waiters", kind=kind, lock=lock): 0,
            # Histograms: the grants, the busy try, the waiter's grant; then the holds.
            key("fencelock_wait_seconds", kind=kind, lock=lock): 3,
            key("fencelock_wait_seconds", kind=kind, lock=job): 1,
            key("fencelock_wait_seconds", kind="election", lock=election): 1,
            key("fencelock_hold_seconds", kind=kind, lock=lock): 2,
            key("fencelock_hold_seconds", kind=kind, lock=job): 1,
            key("fencelock_hold_seconds", kind="election", lock=election): 1,
        }


@pytest.fixture(scope="module")
def run(server) -> Iterator[Run]:
    """Two grants, a busy try, a wait that a release passes the lock to, a forced release
    (the holder loses the lock), a fenced write refused, a run-once that runs and then finds
    it done, an election's term."""
    done = Run(f"py-metrics/{uuid.uuid4().hex[:8]}/")
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(done.spans))
    instrumentation = fencelock.otel.instrument(meter_provider=MeterProvider(metric_readers=[done.reader]),
                                                tracer_provider=tracer_provider, lock_labels=True)
    fencelock.prometheus.register(done.registry)
    done.renewals_before = renewals()
    client = fencelock.Client(server.url)
    try:
        first = client.lock(done.lock, ttl=1.0).acquire()
        assert client.lock(done.lock).try_acquire() is None
        waited: Dict[str, Any] = {}

        def waiter() -> None:
            started = time.monotonic()
            # A lease of 5 s: the place in line lasts as long (the shorter of the lease and
            # the queue timeout), so a loaded machine's late refresh cannot let it lapse.
            waited["guard"] = client.lock(done.lock, ttl=5.0, wait=30.0).acquire()
            waited["for"] = time.monotonic() - started

        thread = threading.Thread(target=waiter)
        thread.start()
        waiters = key("fencelock_waiters", kind="lock", lock=done.lock)
        wait_for("the waiter in line", lambda: values(fencelock.metrics.snapshot()).get(waiters) == 1, 10)
        # Its place as Redis has it, so that the release passes the lock rather than frees it.
        wait_for("the waiter's place", lambda: client.inspect(done.lock).waiting == 1, 10)
        time.sleep(0.3)
        assert first.release() is True
        thread.join(30)
        second = waited["guard"]
        done.waited = waited["for"]
        assert second.fence > first.fence
        # The holder's key deleted behind its back: it learns at its next renewal.
        assert server.raw().delete(f"fencelock:{{{done.lock}}}") == 1
        assert second.lost.wait(10) and second.lost_reason == "not_owner"
        store = client.fenced_store(done.resource)
        write = fencelock.Writes().set(f"{done.resource}:k", "v")
        assert store.apply(second.fence, write) == second.fence
        with pytest.raises(fencelock.Fenced):
            store.apply(first.fence, write)
        once = client.once(done.job)
        assert once.run(lambda fence: "did") == fencelock.Ran("did")
        assert isinstance(once.run(lambda fence: "again"), fencelock.Done)
        with client.election(done.election).campaign("node-a", ttl=5.0):
            pass
        yield done
    finally:
        instrumentation.stop()
        fencelock.metrics.enable(False)
        client.close()


def scraped(registry: CollectorRegistry) -> Dict[Key, float]:
    """The samples of a scrape (``generate_latest``), by name and labels."""
    out: Dict[Key, float] = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out[key(sample.name, **sample.labels)] = sample.value
    return out


def test_the_prometheus_scrape_has_every_series_of_the_run(run):
    samples = scraped(run.registry)
    got: Dict[Key, Any] = {}
    for (name, labels), value in samples.items():
        if not run.ours((name, labels)):
            continue
        if name.endswith("_seconds_count"):
            got[(name[: -len("_count")], labels)] = value
        elif not name.endswith(("_bucket", "_sum")):
            got[(name, labels)] = value
    assert got == run.expected()
    # The histograms: cumulative buckets up to +Inf, which is the count; the sum is positive.
    for (name, labels), count in run.expected().items():
        if not name.endswith("_seconds"):
            continue
        bounds = fencelock.metrics.buckets()
        cumulative = [samples[(f"{name}_bucket", labels | {("le", str(b))})] for b in bounds]
        cumulative.append(samples[(f"{name}_bucket", labels | {("le", "+Inf")})])
        assert cumulative == sorted(cumulative) and cumulative[-1] == count, name
        assert samples[(f"{name}_sum", labels)] > 0
    wait = samples[("fencelock_wait_seconds_sum", key("", kind="lock", lock=run.lock)[1])]
    assert wait >= 0.3  # the waiter waited for the release
    after = renewals()
    assert after.get("failed", 0) - run.renewals_before.get("failed", 0) >= 1
    assert samples[key("fencelock_renewals_total", outcome="failed")] == after["failed"]


def test_the_core_snapshot_and_text_agree(run):
    snapshot = {k: v for k, v in values(fencelock.metrics.snapshot()).items() if run.ours(k)}
    assert snapshot == run.expected()
    text = fencelock.metrics.render()
    assert f'fencelock_passes_total{{kind="lock",outcome="taken",lock="{run.lock}"}} 1\n' in text
    assert "# TYPE fencelock_wait_seconds histogram\n" in text


def otel_points(reader: InMemoryMetricReader) -> Dict[Key, Any]:
    """The data points of a collection, by name and attributes: a value, or a histogram
    point."""
    out: Dict[Key, Any] = {}
    data = reader.get_metrics_data()
    for resource in data.resource_metrics if data else []:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "fencelock"
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    out[key(metric.name, **point.attributes)] = point
    return out


def test_opentelemetry_reports_the_same_values(run):
    points = otel_points(run.reader)
    got = {k: (p.count if hasattr(p, "bucket_counts") else p.value) for k, p in points.items() if run.ours(k)}
    assert got == run.expected()
    core = {(s.name, frozenset(s.labels.items())): s.value for s in fencelock.metrics.snapshot()}
    # The core's buckets are the histograms' advice from OpenTelemetry's API 1.23 on.
    advised = "explicit_bucket_boundaries_advisory" in inspect.signature(Meter.create_histogram).parameters
    for k, point in points.items():
        if hasattr(point, "bucket_counts") and run.ours(k):
            # Every value the core recorded, in the core's buckets.
            assert (point.count, point.sum) == (core[k].count, pytest.approx(core[k].sum))
            if advised:
                assert list(point.explicit_bounds) == fencelock.metrics.buckets()
                assert list(point.bucket_counts) == list(core[k].counts)
    assert {k[0] for k in points} == set(table())


def test_the_spans_of_acquisitions_and_holds(run):
    def spans(name: str) -> List[Any]:
        return [s for s in run.spans.get_finished_spans()
                if s.name == name and s.attributes["lock"] == run.lock]

    wait_for("the lost hold's span", lambda: len(spans("fencelock.hold")) == 2, 10)
    acquired = sorted(spans("fencelock.acquire"), key=lambda s: s.start_time)
    assert [s.attributes["outcome"] for s in acquired] == ["granted", "busy", "granted"]
    assert all(s.attributes["kind"] == "lock" for s in acquired)
    waited = acquired[2]
    assert (waited.end_time - waited.start_time) / 1e9 >= 0.3
    assert waited.attributes["fence"] > acquired[0].attributes["fence"]
    assert "fence" not in acquired[1].attributes
    holds = {s.attributes["fence"]: s for s in spans("fencelock.hold")}
    released, lost = holds[acquired[0].attributes["fence"]], holds[waited.attributes["fence"]]
    assert released.events == ()
    assert [(e.name, dict(e.attributes)) for e in lost.events] == [("lock lost", {"reason": "not_owner"})]
    # The hold is not a child of its acquisition (which ends with the grant).
    assert lost.parent is None or lost.parent.span_id != waited.context.span_id


def table() -> Dict[str, Tuple[str, str, Tuple[str, ...]]]:
    """The table of docs/observability.md's section "The instruments" (the page's other
    tables are the command's): name -> (type, unit, labels)."""
    rows = {}
    text = (ROOT / "docs" / "observability.md").read_text()
    section = text.split("\n## The instruments\n", 1)[-1].split("\n## ", 1)[0]
    for line in section.splitlines():
        m = re.match(r"^\| `(fencelock_\w+)` \| (\w+) \| ([^|]+) \| ([^|]+) \|", line)
        if m:
            unit = m.group(3).strip()
            labels = tuple(label.strip() for label in m.group(4).split(","))
            rows[m.group(1)] = (m.group(2), "" if unit == "-" else unit, labels)
    assert len(rows) >= 10, "the instruments' table of docs/observability.md was not found"
    return rows


class RecordingMeter:
    """A meter provider that records the instruments made in it."""

    def __init__(self) -> None:
        self.made: Dict[str, Tuple[str, str]] = {}

    def get_meter(self, name: str, *args: Any, **kwargs: Any) -> "RecordingMeter":
        return self

    def _make(self, kind: str, name: str, unit: str) -> Any:
        self.made[name] = (kind, unit)
        return self

    def create_observable_counter(self, name: str, callbacks: Any = None, unit: str = "", description: str = "") -> Any:
        return self._make("counter", name, unit)

    def create_observable_gauge(self, name: str, callbacks: Any = None, unit: str = "", description: str = "") -> Any:
        return self._make("gauge", name, unit)

    def create_histogram(self, name: str, unit: str = "", description: str = "", **advice: Any) -> Any:
        return self._make("histogram", name, unit)

    def record(self, *args: Any) -> None:
        pass


def test_every_export_has_the_instruments_of_the_table():
    docs = table()
    core = fencelock.metrics.instruments()
    assert {i.name: (i.kind, i.unit, i.labels) for i in core} == docs
    # The collector's families, as a scrape names and types them (counters with `_total`).
    registry = CollectorRegistry()
    fencelock.prometheus.register(registry)
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", generate_latest(registry).decode(), re.M))
    assert types == {name: row[0] for name, row in docs.items()}
    # OpenTelemetry's instruments, with UCUM's units.
    meter = RecordingMeter()
    fencelock.otel.instrument(meter_provider=meter).stop()
    assert meter.made == {name: (row[0], "s" if row[1] == "seconds" else "") for name, row in docs.items()}


def test_register_is_idempotent_per_registry():
    registry = CollectorRegistry()
    first = fencelock.prometheus.register(registry)
    assert fencelock.prometheus.register(registry) is first
    assert fencelock.prometheus.register(CollectorRegistry()) is not first
    assert fencelock.metrics.enabled()


@pytest.mark.parametrize("bad", [1, "account:*", {"account:*": 1}, [("account:*",)], [1], 2.5])
def test_lock_labels_of_another_shape_are_refused(bad):
    with pytest.raises(fencelock.ConfigError, match="lock_labels must be") as refused:
        fencelock.metrics.enable(bad)
    assert isinstance(refused.value, ValueError)


def test_lock_labels_by_pattern(server):
    fencelock.metrics.enable({"account:*": "account"})
    try:
        before = values(fencelock.metrics.snapshot())
        client = fencelock.Client(server.url)
        for name in (f"account:{uuid.uuid4().hex}", f"py-metrics/{uuid.uuid4().hex}"):
            with client.lock(name, ttl=5.0):
                pass
        client.close()
        after = values(fencelock.metrics.snapshot())
    finally:
        fencelock.metrics.enable(False)
    for label in ("account", "other"):
        granted = key("fencelock_acquisitions_total", kind="lock", outcome="granted", lock=label)
        assert after[granted] - before.get(granted, 0) == 1
        held = key("fencelock_held", kind="lock", lock=label)
        assert after[held] == 0
    assert 'lock="account"' in fencelock.metrics.render()


def test_asyncio_acquisitions_are_traced(server, name):
    exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentation = fencelock.otel.instrument(meter_provider=MeterProvider(), tracer_provider=tracer_provider)

    async def main() -> None:
        client = fencelock.aio.Client(server.url)
        async with client.fair_lock(name, ttl=5.0):
            with pytest.raises(fencelock.Busy):
                await client.fair_lock(name, wait=0).acquire()
            with pytest.raises(fencelock.TimedOut):
                await client.fair_lock(name, wait=0.2).acquire()
            task = asyncio.ensure_future(client.fair_lock(name).acquire())
            await asyncio.sleep(0.2)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        await client.aclose()

    try:
        asyncio.run(asyncio.wait_for(main(), 60))
    finally:
        instrumentation.stop()
    assert fencelock._api.traced is None
    wait_for("the hold's span", lambda: any(s.name == "fencelock.hold" for s in exporter.get_finished_spans()), 10)
    spans = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
    assert [(s.name, s.attributes.get("outcome")) for s in spans if s.name == "fencelock.acquire"] == [
        ("fencelock.acquire", "granted"), ("fencelock.acquire", "busy"), ("fencelock.acquire", "timed_out"),
        ("fencelock.acquire", "cancelled"),
    ]
    assert all(s.attributes["kind"] == "fair lock" and s.attributes["lock"] == name for s in spans)
    [hold] = [s for s in spans if s.name == "fencelock.hold"]
    assert hold.events == ()
