"""fencelock's metrics in this process: what its locks do, counted by the Rust core.

Every instrument is defined once, in the core, and every front end (this package, the Node.js
package, the ``fencelock`` command) exports the same names, types, units and labels: the
table is in ``docs/observability.md``. Nothing is recorded until :func:`enable` is called
(the exporters call it): then the core counts into one in-memory registry per process, which
:func:`snapshot` and :func:`render` read (a few microseconds; no Redis command).

To export them, use :mod:`fencelock.prometheus` (a ``prometheus_client`` collector) or
:mod:`fencelock.otel` (OpenTelemetry instruments and spans); or serve :func:`render`'s text
yourself::

    import fencelock.metrics

    fencelock.metrics.enable(lock_labels={"account:*": "account"})
    ...
    print(fencelock.metrics.render())   # fencelock_acquisitions_total{kind="lock",...} 3
"""

from __future__ import annotations

import threading
from typing import Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple, Union

from . import _native

__all__ = ["Instrument", "Histogram", "Series", "LockLabels", "enable", "instruments", "buckets", "snapshot", "render"]

#: What :func:`enable` takes as ``lock_labels``.
LockLabels = Union[None, bool, Mapping[str, str], Sequence[Tuple[str, str]]]


class Instrument(NamedTuple):
    """One instrument the core reports (a row of ``docs/observability.md``'s table)."""

    #: Its name, as Prometheus shows it (a counter's ends in ``_total``).
    name: str
    #: ``"counter"``, ``"gauge"`` or ``"histogram"``.
    kind: str
    #: ``"seconds"``, or ``""`` for a count.
    unit: str
    #: Its labels, besides ``lock`` (which only :func:`enable`'s ``lock_labels`` adds, and
    #: never to ``fencelock_renewals_total``).
    labels: Tuple[str, ...]
    #: What it counts, one sentence (Prometheus's ``# HELP``).
    help: str


class Histogram(NamedTuple):
    """A histogram's value: ``counts[i]`` values fell in bucket ``i`` of :func:`buckets` (above
    the bound before it, up to its own), and ``counts[-1]`` above the last bound."""

    counts: Tuple[int, ...]
    #: The sum of the values (seconds).
    sum: float
    #: How many values.
    count: int

    def cumulative(self) -> List[Tuple[float, int]]:
        """``(upper bound, values up to it)`` for each bound of :func:`buckets`, then
        ``(float("inf"), every value)``: Prometheus's ``le`` buckets."""
        bounds = buckets() + [float("inf")]
        out: List[Tuple[float, int]] = []
        below = 0
        for bound, n in zip(bounds, self.counts):
            below += n
            out.append((bound, below))
        return out


class Series(NamedTuple):
    """One series as it is now."""

    #: The instrument's name.
    name: str
    #: Its labels (``kind``, ``outcome``, ... and ``lock`` if asked for).
    labels: Dict[str, str]
    #: ``"counter"``, ``"gauge"`` or ``"histogram"``.
    kind: str
    #: An ``int`` (a counter's total), a ``float`` (a gauge) or a :class:`Histogram`.
    value: Union[int, float, Histogram]


_lock = threading.Lock()
_enabled = False
_instruments: Optional[List[Instrument]] = None
_buckets: Optional[List[float]] = None


def enable(lock_labels: LockLabels = None) -> None:
    """Starts recording fencelock's metrics in this process (once: a later call only changes
    ``lock_labels``, for the series recorded after it).

    ``lock_labels`` says whether the series carry the lock's name as a ``lock`` label:

    - ``None`` or ``False`` (the default): no ``lock`` label;
    - ``True``: every lock's name (for a process that uses a few fixed names only: a name per
      account would make a series per account);
    - a dict (or a list of pairs) ``{pattern: label}``: the label of the first pattern that
      matches the name, ``"other"`` for a name none matches. A pattern ending in ``*`` matches
      the names that start with what is before it, any other the name itself:
      ``{"account:*": "account", "reports/nightly": "nightly"}``.

    For a fenced write the name is the resource's, for a run-once the job's key (without its
    tick), for an election's term the election's. Raises :class:`fencelock.ConfigError` (a
    ``ValueError``) for a ``lock_labels`` of another shape, and ``RuntimeError`` if another
    extension installed a recorder for Rust's ``metrics`` crate in this process first.
    """
    global _enabled
    if isinstance(lock_labels, Mapping) and not isinstance(lock_labels, dict):
        lock_labels = dict(lock_labels)
    with _lock:
        _native.metrics_enable(lock_labels)
        _enabled = True


def _ensure(lock_labels: LockLabels) -> None:
    """For the exporters: :func:`enable` with ``lock_labels``, or, when that is ``None``,
    only if nothing enabled it yet (``None`` keeps the process's setting)."""
    if lock_labels is not None or not _enabled:
        enable(lock_labels)


def enabled() -> bool:
    """Whether :func:`enable` was called in this process."""
    return _enabled


def instruments() -> List[Instrument]:
    """Every instrument the core reports, in the order the exports list them (whether or not
    it has series yet)."""
    global _instruments
    if _instruments is None:
        _instruments = [
            Instrument(name, kind, unit, tuple(labels), help)
            for name, kind, unit, labels, help in _native.metrics_instruments()
        ]
    return list(_instruments)


def buckets() -> List[float]:
    """The upper bounds of the histograms' buckets, in seconds, from 0.0005 to 3600 (a last
    bucket, ``+Inf``, takes the rest)."""
    global _buckets
    if _buckets is None:
        _buckets = _native.metrics_buckets()
    return list(_buckets)


def snapshot() -> List[Series]:
    """Every series now, sorted by name and labels (empty before :func:`enable`). Counters
    count from the process's :func:`enable`; a series appears with its first value."""
    out = []
    for name, labels, kind, value in _native.metrics_snapshot():
        if kind == "histogram":
            counts, total, count = value  # type: ignore[misc]
            value = Histogram(tuple(counts), total, count)
        out.append(Series(name, dict(labels), kind, value))
    return out


def render() -> str:
    """Every series in the Prometheus text format (version 0.0.4), each instrument with its
    ``# HELP`` and ``# TYPE``: what a ``/metrics`` endpoint serves, or node_exporter's textfile
    collector reads. Empty before :func:`enable`."""
    return _native.metrics_render()
