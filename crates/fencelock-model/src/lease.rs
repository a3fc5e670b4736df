//! The holder's side of a lease: the local deadline that `LockGuard::is_held`, `lost()` and the
//! watchdog go by (`lease.rs` in the library), against the server's expiry of the key, when the
//! two clocks drift apart, requests and replies take any time, and the holder pauses.
//!
//! The checked property: **the holder knows before anyone else can have it** — whenever the
//! server has let the key expire (so that another client could be granted the lock), the holder
//! no longer believes it holds the lock: its clock has reached its deadline, or it was told.
//!
//! The assumptions, each a bound of the model (and each shown necessary by a test that drops
//! it):
//! - The clocks' rates differ by at most the drift margin's proportional part
//!   ([`LeaseModel::client_drift`] against the margin's [`LeaseModel::factor_percent`]); the
//!   server's clock never jumps ([`LeaseModel::jumps`]: Redis expires keys by its wall clock,
//!   so a step forward of the server's clock expires them early).
//! - The deadline counts from the instant the confirming request was *sent*, on the holder's
//!   monotonic clock, not from its reply ([`LeaseMutants::from_reply`] breaks that).
//! - Nothing bounds the network's delay or the holder's pauses: a request may be executed and
//!   answered any time later, or never, and the holder may act late.
//!
//! Time moves in real ticks; each clock advances a whole number of units a tick: the server's
//! [`NOMINAL`], the holder's within `NOMINAL ± client_drift` (a choice each tick). A lease is
//! [`TTL`] units, renewed (the watchdog) from a third of it on.

use stateright::{Model, Property};

/// Units a clock advances in a tick at the nominal rate (a tick stands for 10 ms: a unit for
/// 0.1 ms).
pub const NOMINAL: u32 = 100;
/// The lease, in units (four ticks).
pub const TTL: u32 = 4 * NOMINAL;
/// The margin's constant part, in units (`ClockDrift::min`).
pub const MIN: u32 = 2;

/// Breaks of the holder's rules, each a flag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct LeaseMutants {
    /// No drift margin: the deadline is the whole lease after the request was sent.
    pub no_margin: bool,
    /// The deadline counts from the reply's arrival, not from the request's sending.
    pub from_reply: bool,
}

/// The model's bounds.
#[derive(Clone, Debug)]
pub struct LeaseModel {
    /// The last real tick a run reaches.
    pub max_time: u8,
    /// How far the holder's clock rate may be from the nominal, in units a tick (1 = 1 %).
    pub client_drift: u32,
    /// The margin's proportional part, in percent of the lease (`ClockDrift::factor`, 1 %).
    pub factor_percent: u32,
    /// How many renewals a run may send.
    pub renewals: u8,
    /// How many times the server's clock may jump forward by a tick.
    pub jumps: u8,
    /// Breaks of the rules.
    pub mutants: LeaseMutants,
}

impl LeaseModel {
    /// The bounds `tests/check` uses: 9 ticks, a 1 % drift against the default 1 % margin, two
    /// renewals, no jumps.
    pub fn small() -> Self {
        LeaseModel {
            max_time: 9,
            client_drift: 1,
            factor_percent: 1,
            renewals: 2,
            jumps: 0,
            mutants: LeaseMutants::default(),
        }
    }

    /// The margin subtracted from the lease: `ttl * factor + min`.
    fn margin(&self) -> u32 {
        if self.mutants.no_margin {
            0
        } else {
            TTL * self.factor_percent / 100 + MIN
        }
    }
}

/// A request on its way: sent at the holder's clock `sent`; `done` once the server ran it
/// (`Some(true)`: the lease was set or extended, `Some(false)`: the key had expired).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct InFlight {
    pub sent: u32,
    pub done: Option<bool>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaseState {
    /// Real time, in ticks.
    pub now: u8,
    /// The holder's clock and the server's, in units.
    pub client: u32,
    pub server: u32,
    /// When the key expires, on the server's clock (`None`: never set).
    pub expires: Option<u32>,
    /// The holder's deadline on its clock, once a confirmation arrived.
    pub deadline: Option<u32>,
    /// The holder was told the lock is gone (a renewal's answer).
    pub told: bool,
    pub in_flight: Option<InFlight>,
    pub renewals: u8,
    pub jumps: u8,
    /// Witnesses: a renewal extended the lease; the key expired on the server.
    pub renewed: bool,
    pub expired: bool,
}

impl LeaseState {
    /// The server has let the key go: another client could be granted the lock.
    pub fn free_on_server(&self) -> bool {
        self.expires.is_some_and(|e| self.server >= e)
    }

    /// The holder believes it holds the lock (`is_held`).
    pub fn believed(&self) -> bool {
        !self.told && self.deadline.is_some_and(|d| self.client < d)
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum LeaseAction {
    /// A tick: the holder's clock advances this many units, the server's [`NOMINAL`].
    Tick(u32),
    /// The server's clock steps forward by a tick.
    Jump,
    /// The holder sends its acquire (first) or a renewal (the watchdog, from a third of the
    /// lease on).
    Send,
    /// The server runs the request.
    Run,
    /// The reply reaches the holder.
    Reply,
}

impl Model for LeaseModel {
    type State = LeaseState;
    type Action = LeaseAction;

    fn init_states(&self) -> Vec<LeaseState> {
        vec![LeaseState {
            now: 0,
            client: 1000,
            server: 5000,
            expires: None,
            deadline: None,
            told: false,
            in_flight: None,
            renewals: 0,
            jumps: 0,
            renewed: false,
            expired: false,
        }]
    }

    fn actions(&self, s: &LeaseState, actions: &mut Vec<LeaseAction>) {
        if s.now < self.max_time {
            for rate in NOMINAL - self.client_drift..=NOMINAL + self.client_drift {
                actions.push(LeaseAction::Tick(rate));
            }
            if s.jumps < self.jumps {
                actions.push(LeaseAction::Jump);
            }
        }
        match &s.in_flight {
            None if s.told => {}
            None if s.deadline.is_none() && s.expires.is_none() => actions.push(LeaseAction::Send),
            None => {
                // The watchdog renews from a third of the lease on, while it believes it holds.
                let due = s
                    .deadline
                    .map(|d| (d + self.margin()).saturating_sub(TTL) + TTL / 3);
                if s.renewals < self.renewals
                    && s.believed()
                    && due.is_some_and(|due| s.client >= due)
                {
                    actions.push(LeaseAction::Send);
                }
            }
            Some(InFlight { done: None, .. }) => actions.push(LeaseAction::Run),
            Some(InFlight { done: Some(_), .. }) => actions.push(LeaseAction::Reply),
        }
    }

    fn next_state(&self, s: &LeaseState, action: LeaseAction) -> Option<LeaseState> {
        let mut n = s.clone();
        match action {
            LeaseAction::Tick(rate) => {
                n.now += 1;
                n.client += rate;
                n.server += NOMINAL;
            }
            LeaseAction::Jump => {
                n.server += NOMINAL;
                n.jumps += 1;
            }
            LeaseAction::Send => {
                if s.expires.is_some() {
                    n.renewals += 1;
                }
                n.in_flight = Some(InFlight {
                    sent: s.client,
                    done: None,
                });
            }
            LeaseAction::Run => {
                let granted = match s.expires {
                    // The acquire: the key is free.
                    None => true,
                    // A renewal: only while the key is still this holder's.
                    Some(_) => !s.free_on_server(),
                };
                if granted {
                    n.expires = Some(s.server + TTL);
                }
                if let Some(f) = &mut n.in_flight {
                    f.done = Some(granted);
                }
            }
            LeaseAction::Reply => {
                let f = n.in_flight.take()?;
                if f.done == Some(true) {
                    let from = if self.mutants.from_reply {
                        s.client
                    } else {
                        f.sent
                    };
                    let deadline = from + TTL.saturating_sub(self.margin());
                    // A confirmation older than the current one is ignored (`lease::confirm`).
                    if s.deadline.is_none_or(|d| deadline > d) {
                        n.renewed |= s.deadline.is_some();
                        n.deadline = Some(deadline);
                    }
                } else {
                    n.told = true;
                }
            }
        }
        n.expired |= n.free_on_server();
        Some(n)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "the holder knows before anyone else can have it",
                |_, s: &LeaseState| !(s.free_on_server() && s.believed()),
            ),
            Property::sometimes("a renewal extends the lease", |_, s: &LeaseState| s.renewed),
            Property::sometimes("the key expires on the server", |_, s: &LeaseState| {
                s.expired
            }),
        ]
    }

    fn within_boundary(&self, s: &LeaseState) -> bool {
        s.now <= self.max_time
    }
}
