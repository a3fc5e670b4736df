"""fencelock's metrics and traces in OpenTelemetry (the extra ``opentelemetry``:
``pip install 'fencelock[opentelemetry]'``, with the SDK or a distro of your choice).

::

    import fencelock.otel

    fencelock.otel.instrument(meter_provider=provider, tracer_provider=tracer_provider)

- **Metrics**: every instrument of ``docs/observability.md``, under the same names and labels
  (as attributes), in the meter ``fencelock``. The counters are observable counters and the
  gauges observable gauges, read from the core's series at each collection; the histograms
  are synchronous histograms fed, at each collection, with every value the core recorded since
  the last one (from :func:`instrument` on; at most 65,536 between two collections), with the
  core's buckets as their advice (OpenTelemetry API 1.23 or later; before, give the SDK a
  ``View`` with ``ExplicitBucketHistogramAggregation(fencelock.metrics.buckets())``). Units
  are UCUM's (``s``).
- **Traces** (with a ``tracer_provider``): a span ``fencelock.acquire`` per acquisition of a
  lock (``lock``, ``fair_lock``, ``semaphore``, ``read_write_lock``, ``reentrant_lock``, and
  ``threading_lock``, which goes through them), with the attributes ``lock``, ``kind`` (the
  core's: ``lock``, ``fair lock``, ``read lock``, ...), ``outcome`` (``granted``, ``busy``,
  ``timed_out``, ``failed``, or ``cancelled``: interrupted or cancelled) and ``fence`` (once
  granted); then a span ``fencelock.hold`` from the grant to the release or loss, with an
  event ``lock lost`` (attribute ``reason``: ``not_owner``, ``expired``,
  ``max_hold_reached``) on a loss. A hold's span ends from fencelock's answering thread: give
  the tracer provider a batching span processor (``BatchSpanProcessor``), not an exporter that
  waits on the network in ``on_end``.

Untraced, an acquisition costs one look at a module attribute.
"""

from __future__ import annotations

import threading
from typing import Any, Dict, Iterable, List, Optional, Set

from opentelemetry import metrics as otel_metrics
from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import Span, Status, StatusCode, Tracer, TracerProvider

from . import _api, _native, aio, metrics
from .errors import Busy, TimedOut

__all__ = ["Instrumentation", "instrument"]

#: The meter's and the tracer's name.
SCOPE = "fencelock"
#: A request's kind (``_api.spec``'s) as the core's series and spans name it.
KINDS = {
    "lock": "lock",
    "fair": "fair lock",
    "semaphore": "semaphore",
    "read": "read lock",
    "write": "write lock",
    "reentrant": "reentrant lock",
}
#: The core's units in UCUM's spelling (a count has none).
UNITS = {"seconds": "s"}

_lock = threading.Lock()
#: The instrumentations not stopped: each one's histograms get every value the core records.
_active: List["Instrumentation"] = []


def _take_observations() -> None:
    """Hands the values the core recorded since the last take to every active
    instrumentation's histograms (from a collection's callback: the histograms are collected
    just after)."""
    taken = _native.metrics_take_observations()
    if not taken:
        return
    for instrumentation in list(_active):
        instrumentation._record(taken)


class Instrumentation:
    """What :func:`instrument` set up; :meth:`stop` undoes it."""

    def __init__(self, meter_provider: MeterProvider, tracer: Optional[Tracer]) -> None:
        meter = meter_provider.get_meter(SCOPE, _native.VERSION)
        self._stopped = False
        self._histograms: Dict[str, Any] = {}
        self._tracing = None if tracer is None else _Tracing(tracer)
        for instrument in metrics.instruments():
            unit = UNITS.get(instrument.unit, instrument.unit)
            if instrument.kind == "histogram":
                self._histograms[instrument.name] = _histogram(meter, instrument, unit)
                continue
            create = meter.create_observable_counter if instrument.kind == "counter" else meter.create_observable_gauge
            create(instrument.name, callbacks=[self._observer(instrument.name)], unit=unit,
                   description=instrument.help)

    def _observer(self, name: str) -> Any:
        def observe(options: CallbackOptions) -> Iterable[Observation]:
            if self._stopped:
                return []
            _take_observations()
            return [Observation(value, dict(labels))
                    for series, labels, _, value in _native.metrics_snapshot() if series == name]

        return observe

    def _record(self, taken: List[Any]) -> None:
        for name, labels, value in taken:
            histogram = self._histograms.get(name)
            if histogram is not None:
                histogram.record(value, dict(labels))

    def stop(self) -> None:
        """Stops: the meter's instruments are no longer fed (they stay in the meter, with no
        more data points), and the acquisitions are no longer traced (holds traced already end
        as they would have). The core goes on counting, for the other exporters."""
        with _lock:
            if self._stopped:
                return
            self._stopped = True
            if self in _active:
                _active.remove(self)
            if not _active:
                _native.metrics_keep_observations(False)
            if self._tracing is not None and _api.traced is self._tracing:
                _api.traced = None


def _histogram(meter: Any, instrument: metrics.Instrument, unit: str) -> Any:
    try:
        return meter.create_histogram(instrument.name, unit=unit, description=instrument.help,
                                      explicit_bucket_boundaries_advisory=metrics.buckets())
    except TypeError:  # an API before 1.23: the SDK's default buckets (or a View's)
        return meter.create_histogram(instrument.name, unit=unit, description=instrument.help)


def instrument(meter_provider: Optional[MeterProvider] = None, tracer_provider: Optional[TracerProvider] = None,
               lock_labels: metrics.LockLabels = None) -> Instrumentation:
    """Enables fencelock's metrics in this process (:func:`fencelock.metrics.enable`) and
    reports them through ``meter_provider`` (the global one if ``None``); with a
    ``tracer_provider``, traces the acquisitions and holds from now on (the last
    instrumentation given one traces them). See the module's docs.

    ``lock_labels``: whether the series name their locks, as :func:`fencelock.metrics.enable`
    takes it; ``None`` (the default) leaves the process's setting as it is. Give each meter
    provider one instrumentation (a second one would report every series twice).
    """
    metrics._ensure(lock_labels)
    provider = otel_metrics.get_meter_provider() if meter_provider is None else meter_provider
    tracer = None if tracer_provider is None else tracer_provider.get_tracer(SCOPE, _native.VERSION)
    instrumentation = Instrumentation(provider, tracer)
    with _lock:
        _active.append(instrumentation)
        _native.metrics_keep_observations(True)
        if instrumentation._tracing is not None:
            _api.traced = instrumentation._tracing
    return instrumentation


class _Tracing:
    """``_api.traced``: an acquisition in a ``fencelock.acquire`` span, and its hold in a
    ``fencelock.hold`` span."""

    __slots__ = ("_tracer",)

    def __init__(self, tracer: Tracer) -> None:
        self._tracer = tracer

    def __call__(self, request: Any, try_only: bool) -> Any:
        if isinstance(request, aio.LockRequest):
            return self._awaited(request, try_only)
        kind, span = self._start(request)
        with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
            try:
                guard = request._run(*_call(request, try_only), then=request._make)
            except BaseException as error:
                _refused(span, error)
                raise
            _granted(span, guard)
        if guard is not None:
            self._hold(guard, kind)
        return guard

    async def _awaited(self, request: Any, try_only: bool) -> Any:
        kind, span = self._start(request)
        with trace.use_span(span, end_on_exit=True, record_exception=False, set_status_on_exception=False):
            try:
                guard = await request._run(*_call(request, try_only), then=request._make)
            except BaseException as error:
                _refused(span, error)
                raise
            _granted(span, guard)
        if guard is not None:
            self._hold(guard, kind)
        return guard

    def _start(self, request: Any) -> Any:
        kind = KINDS.get(request._kind, request._kind)
        return kind, self._tracer.start_span("fencelock.acquire", attributes={"lock": request.name, "kind": kind})

    def _hold(self, guard: Any, kind: str) -> None:
        """The hold's span, in the caller's context, until the lock is released or lost."""
        span = self._tracer.start_span("fencelock.hold",
                                       attributes={"lock": guard.name, "kind": kind, "fence": _fence(guard.fence)})
        try:
            op = guard._native.lost()
        except RuntimeError:  # not this process's guard (a fork's child)
            span.end()
            return
        _watched.add(op)
        op.on_done(lambda: _hold_over(span, op))


#: The watches of the traced holds (an operation dropped before it answers is stopped).
_watched: Set[Any] = set()


def _hold_over(span: Span, op: Any) -> None:
    """Ends a hold's span when its guard's ``lost`` watch answers ``(code, message)``."""
    _watched.discard(op)
    try:
        code, _ = op.take()
    except Exception:  # the watch ended without an answer (the interpreter is ending)
        code = None
    if code is not None and code != "released":
        span.add_event("lock lost", {"reason": code})
    span.end()


def _call(request: Any, try_only: bool) -> tuple:
    return (request._acquirer.acquire, request._spec, True) if try_only else (request._acquirer.acquire, request._spec)


def _fence(fence: int) -> Any:
    """A fence as an attribute: an ``int`` while it fits OpenTelemetry's (64-bit signed), else
    its decimal text."""
    return fence if fence < 1 << 63 else str(fence)


def _granted(span: Span, guard: Any) -> None:
    if guard is None:
        span.set_attribute("outcome", "busy")
    else:
        span.set_attributes({"outcome": "granted", "fence": _fence(guard.fence)})


def _refused(span: Span, error: BaseException) -> None:
    if isinstance(error, Busy):
        outcome = "busy"
    elif isinstance(error, TimedOut):
        outcome = "timed_out"
    elif isinstance(error, Exception):
        outcome = "failed"
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, str(error)))
    else:  # KeyboardInterrupt, asyncio.CancelledError: given up
        outcome = "cancelled"
    span.set_attribute("outcome", outcome)
