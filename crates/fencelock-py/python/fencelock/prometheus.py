"""fencelock's metrics in a ``prometheus_client`` registry (the extra ``prometheus``:
``pip install 'fencelock[prometheus]'``).

::

    import fencelock.prometheus
    import prometheus_client

    fencelock.prometheus.register(lock_labels={"account:*": "account"})
    prometheus_client.start_http_server(9100)       # /metrics: fencelock_acquisitions_total, ...

The collector reads the core's registry at each scrape (a few microseconds; no Redis command)
and yields every instrument of ``docs/observability.md``, with the names, help texts, types and
labels the core defines, and the histograms' buckets (in seconds, cumulative, with ``+Inf``).
"""

from __future__ import annotations

import threading
import weakref
from typing import Dict, Iterator, List, Sequence

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.utils import floatToGoString

from . import metrics

__all__ = ["FencelockCollector", "register"]


class FencelockCollector:
    """A ``prometheus_client`` custom collector of fencelock's metrics: one family per
    instrument of :func:`fencelock.metrics.instruments` (a counter, a gauge or a histogram),
    with a sample per series of :func:`fencelock.metrics.snapshot`.

    Register it with :func:`register`, which also enables the core's registry; registered by
    hand (``registry.register(FencelockCollector())``), it exports nothing until
    :func:`fencelock.metrics.enable` is called. The counters' samples are named as the table
    names them (``fencelock_acquisitions_total``): ``prometheus_client`` keeps a counter's family
    name without ``_total`` and adds it back to its samples. If the ``lock`` label was turned on
    or off while the process ran, the series recorded without it show ``lock=""``, which
    Prometheus reads as no label.
    """

    def describe(self) -> Iterator[Metric]:
        """The families without samples: their names, for the registry's check of duplicates."""
        for instrument in metrics.instruments():
            yield _family(instrument, instrument.labels)

    def collect(self) -> Iterator[Metric]:
        """Every family, with the series as they are now."""
        by_name: Dict[str, List[metrics.Series]] = {}
        for series in metrics.snapshot():
            by_name.setdefault(series.name, []).append(series)
        for instrument in metrics.instruments():
            found = by_name.get(instrument.name, [])
            names = _label_names(instrument.labels, found)
            family = _family(instrument, names)
            for series in found:
                values = [series.labels.get(name, "") for name in names]
                value = series.value
                if isinstance(value, metrics.Histogram):
                    if isinstance(family, HistogramMetricFamily):
                        le = [(floatToGoString(bound), float(n)) for bound, n in value.cumulative()]
                        family.add_metric(values, le, value.sum)
                elif not isinstance(family, HistogramMetricFamily):
                    family.add_metric(values, value)
            yield family


def _label_names(declared: Sequence[str], found: List[metrics.Series]) -> List[str]:
    """The instrument's labels, then those its series add (``lock``), in the order seen."""
    names = list(declared)
    for series in found:
        for name in series.labels:
            if name not in names:
                names.append(name)
    return names


def _family(instrument: metrics.Instrument, labels: Sequence[str]) -> Metric:
    if instrument.kind == "counter":
        return CounterMetricFamily(instrument.name, instrument.help, labels=labels, unit=instrument.unit)
    if instrument.kind == "gauge":
        return GaugeMetricFamily(instrument.name, instrument.help, labels=labels, unit=instrument.unit)
    return HistogramMetricFamily(instrument.name, instrument.help, labels=labels, unit=instrument.unit)


_lock = threading.Lock()
#: The collector registered in each registry by :func:`register`.
_registered: "weakref.WeakKeyDictionary[CollectorRegistry, FencelockCollector]" = weakref.WeakKeyDictionary()


def register(registry: CollectorRegistry = REGISTRY, lock_labels: metrics.LockLabels = None) -> FencelockCollector:
    """Enables fencelock's metrics (:func:`fencelock.metrics.enable`) and registers a
    :class:`FencelockCollector` in ``registry`` (``prometheus_client``'s default registry unless
    told): the collector, the same one if ``registry`` has it already.

    ``lock_labels``: whether the series name their locks, as :func:`fencelock.metrics.enable`
    takes it; ``None`` (the default) leaves the process's setting as it is (no ``lock`` label,
    unless an earlier call asked for one).
    """
    metrics._ensure(lock_labels)
    with _lock:
        collector = _registered.get(registry)
        if collector is None:
            collector = FencelockCollector()
            registry.register(collector)
            _registered[registry] = collector
        return collector
