//! Leader election for JavaScript: the leadership a campaign wins (`fencelock_bind`'s
//! [`Leading`]), and an observer of the leaders.

use std::time::SystemTime;

use fencelock::election::{Leader, Leadership as RustLeadership, Observation, Observe};
use fencelock_bind::holds::Leading;
use fencelock_bind::kept::since_epoch;
use napi::bindgen_prelude::PromiseRaw;
use napi::{Env, Result};
use napi_derive::napi;

use crate::admin::Follow;
use crate::env::Context;
use crate::held::{self, LostCallback, lost_pair};

/// A leader: its value, its term (a fence) and when the term began (milliseconds since the
/// epoch, by the server's clock).
#[napi(object, object_from_js = false)]
pub struct LeaderValue {
    pub value: String,
    pub term: u64,
    pub since: f64,
}

pub fn leader_value(leader: &Leader) -> LeaderValue {
    LeaderValue {
        value: leader.value.clone(),
        term: leader.term,
        since: epoch_ms(leader.since),
    }
}

pub fn epoch_ms(at: SystemTime) -> f64 {
    crate::errors::ms(since_epoch(at))
}

/// A leadership: held until resigned or lost. Dropped unresigned, it is resigned in the
/// background; the end of the thread resigns what still leads.
#[napi]
pub struct Leadership {
    leading: Leading<()>,
}

impl Leadership {
    pub fn new(leadership: RustLeadership, context: Context) -> Self {
        Leadership {
            leading: Leading::new(leadership, context),
        }
    }
}

#[napi]
impl Leadership {
    #[napi(getter)]
    pub fn election(&self) -> String {
        self.leading.election().to_owned()
    }

    /// The term: a fence, strictly larger than every earlier leader's.
    #[napi(getter)]
    pub fn term(&self) -> u64 {
        self.leading.term()
    }

    /// When the term began, in milliseconds since the epoch (the server's clock).
    #[napi(getter)]
    pub fn since(&self) -> f64 {
        epoch_ms(self.leading.since())
    }

    /// The value announced last in this term (through a proclaim in flight, and after the
    /// resignation).
    #[napi(getter)]
    pub fn value(&self) -> String {
        self.leading.value()
    }

    /// Whether this process still leads, as far as it can tell now.
    #[napi]
    pub fn is_held(&self) -> bool {
        self.leading.is_held()
    }

    /// `[code, message]` if the leadership is lost (or resigned) now, else `null`.
    #[napi(ts_return_type = "[string, string] | null")]
    pub fn lost_now(&self) -> Option<Vec<String>> {
        lost_pair(self.leading.lost())
    }

    /// Calls `callback(code, message)` when the leadership is lost or resigned.
    #[napi(ts_args_type = "callback: (code: string, message: string) => void")]
    pub fn on_lost(&self, callback: LostCallback) {
        held::on_lost(self.leading.kept(), self.leading.lost(), callback);
    }

    /// Announces a new value for this term.
    #[napi]
    pub fn proclaim<'env>(&self, env: &'env Env, value: String) -> Result<PromiseRaw<'env, ()>> {
        held::run(
            env,
            self.leading.kept(),
            self.leading.proclaim(value),
            |()| (),
        )
    }

    /// Resigns: `true` if this process still led.
    #[napi]
    pub fn resign<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        held::release(env, self.leading.kept())
    }
}

/// What an observer sees: `code` (`leader`, `vacant`, `gap`) and the leader for `leader`.
#[napi(object, object_from_js = false)]
pub struct ObservationValue {
    pub code: String,
    pub leader: Option<LeaderValue>,
}

/// The leaders of an election, one observation at a time.
#[napi]
pub struct Observer {
    follow: Follow<Observe>,
}

impl Observer {
    pub fn new(stream: Observe) -> Self {
        Observer {
            follow: Follow::new(stream),
        }
    }
}

#[napi]
impl Observer {
    /// The next observation, waiting at most `timeout` milliseconds (`undefined`: as long as it
    /// takes); `null` when the time ran out.
    #[napi]
    pub fn next<'env>(
        &self,
        env: &'env Env,
        timeout: Option<f64>,
        cancel: Option<&crate::cancel::Cancel>,
    ) -> Result<PromiseRaw<'env, Option<ObservationValue>>> {
        self.follow.next(env, timeout, cancel, |seen: Observation| {
            let leader = match &seen {
                Observation::Leader(leader) => Some(leader_value(leader)),
                _ => None,
            };
            ObservationValue {
                code: seen.code().to_owned(),
                leader,
            }
        })
    }
}
