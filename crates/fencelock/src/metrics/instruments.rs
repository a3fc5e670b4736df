//! Every instrument fencelock reports, defined once: the core records them, and every front
//! end (the `fencelock` command, the Python and the Node.js packages) exports them under these
//! names, units and labels.

/// What an instrument measures with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum InstrumentKind {
    /// Only goes up (Prometheus `counter`).
    Counter,
    /// Goes up and down (Prometheus `gauge`).
    Gauge,
    /// A distribution in [`BUCKETS`] (Prometheus `histogram`).
    Histogram,
}

impl InstrumentKind {
    /// The Prometheus type's name: `counter`, `gauge` or `histogram`.
    pub fn as_str(self) -> &'static str {
        match self {
            InstrumentKind::Counter => "counter",
            InstrumentKind::Gauge => "gauge",
            InstrumentKind::Histogram => "histogram",
        }
    }
}

/// One instrument: its name, kind, unit, labels and meaning.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Instrument {
    /// Its name, as Prometheus shows it (a counter's ends in `_total`).
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: InstrumentKind,
    /// Its unit (`seconds`), or `""` for a count.
    pub unit: &'static str,
    /// Its labels, besides `lock` (present only when [`LockLabels`](super::LockLabels) asks
    /// for it, and never on [`RENEWALS`]).
    pub labels: &'static [&'static str],
    /// What it counts, one sentence (Prometheus's `# HELP`).
    pub help: &'static str,
}

impl Instrument {
    /// An instrument (for [`render`](super::render) of series of one's own).
    pub const fn new(
        name: &'static str,
        kind: InstrumentKind,
        unit: &'static str,
        labels: &'static [&'static str],
        help: &'static str,
    ) -> Self {
        Instrument {
            name,
            kind,
            unit,
            labels,
            help,
        }
    }
}

/// `fencelock_acquisitions_total`.
pub const ACQUISITIONS: &str = "fencelock_acquisitions_total";
/// `fencelock_wait_seconds`.
pub const WAIT: &str = "fencelock_wait_seconds";
/// `fencelock_hold_seconds`.
pub const HOLD: &str = "fencelock_hold_seconds";
/// `fencelock_held`.
pub const HELD: &str = "fencelock_held";
/// `fencelock_waiters`.
pub const WAITERS: &str = "fencelock_waiters";
/// `fencelock_losses_total`.
pub const LOSSES: &str = "fencelock_losses_total";
/// `fencelock_renewals_total`.
pub const RENEWALS: &str = "fencelock_renewals_total";
/// `fencelock_passes_total`.
pub const PASSES: &str = "fencelock_passes_total";
/// `fencelock_fenced_writes_total`.
pub const FENCED_WRITES: &str = "fencelock_fenced_writes_total";
/// `fencelock_once_total`.
pub const ONCE: &str = "fencelock_once_total";
/// `fencelock_terms_total`.
pub const TERMS: &str = "fencelock_terms_total";

/// The upper bounds of the histograms' buckets, in seconds (a last bucket, `+Inf`, takes the
/// rest): from half a millisecond (an uncontended acquisition on a local network) to an hour
/// (a long hold).
pub const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0, 300.0, 900.0, 3600.0,
];

/// Every instrument, in the order the exports list them.
pub const INSTRUMENTS: &[Instrument] = &[
    Instrument {
        name: ACQUISITIONS,
        kind: InstrumentKind::Counter,
        unit: "",
        labels: &["kind", "outcome"],
        help: "Acquisitions by outcome: granted, busy, timed_out, failed.",
    },
    Instrument {
        name: WAIT,
        kind: InstrumentKind::Histogram,
        unit: "seconds",
        labels: &["kind"],
        help: "Time from an acquisition's request to its outcome.",
    },
    Instrument {
        name: HOLD,
        kind: InstrumentKind::Histogram,
        unit: "seconds",
        labels: &["kind"],
        help: "Time from a grant to its release or loss.",
    },
    Instrument {
        name: HELD,
        kind: InstrumentKind::Gauge,
        unit: "",
        labels: &["kind"],
        help: "Locks this process holds now (a lost one no longer counts).",
    },
    Instrument {
        name: WAITERS,
        kind: InstrumentKind::Gauge,
        unit: "",
        labels: &["kind"],
        help: "Requests of this process waiting now.",
    },
    Instrument {
        name: LOSSES,
        kind: InstrumentKind::Counter,
        unit: "",
        labels: &["kind", "reason"],
        help: "Locks lost before their release, by reason: not_owner, expired, max_hold_reached.",
    },
    Instrument {
        name: RENEWALS,
        kind: InstrumentKind::Counter,
        unit: "",
        labels: &["outcome"],
        help: "Renewals of held locks by outcome: ok, failed.",
    },
    Instrument {
        name: PASSES,
        kind: InstrumentKind::Counter,
        unit: "",
        labels: &["kind", "outcome"],
        help: "Locks passed to this process's waiters by a release: taken, or missed (the pass came too late to use).",
    },
    Instrument {
        name: FENCED_WRITES,
        kind: InstrumentKind::Counter,
        unit: "",
        labels: &["outcome"],
        help: "Fenced writes by outcome: accepted, refused (a newer fence was accepted).",
    },
    Instrument {
        name: ONCE,
        kind: InstrumentKind::Counter,
        unit: "",
        labels: &["outcome"],
        help: "Run-once starts by outcome: ran, failed, already_done, too_late, gave_up.",
    },
    Instrument {
        name: TERMS,
        kind: InstrumentKind::Counter,
        unit: "",
        labels: &["event"],
        help: "Election terms: won, lost (by a loss, not a resignation), observed (a new term seen by an observer).",
    },
];

/// The instrument named `name`.
pub fn instrument(name: &str) -> Option<&'static Instrument> {
    INSTRUMENTS.iter().find(|i| i.name == name)
}
