//! Leader election for JavaScript: the leadership a campaign wins, and an observer of the
//! leaders.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::SystemTime;

use fencelock::LostSignal;
use fencelock::election::{Leader, Leadership as RustLeadership, Observation, Observe};
use napi::bindgen_prelude::PromiseRaw;
use napi::{Env, Result};
use napi_derive::napi;

use crate::admin::Follow;
use crate::client::Context;
use crate::errors::Failure;
use crate::held::{Kept, LostCallback, lost_pair};

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
    at.duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, crate::errors::ms)
}

/// A leadership: held until resigned or lost. Dropped unresigned, it is resigned in the
/// background; the end of the thread resigns what still leads.
#[napi]
pub struct Leadership {
    election: String,
    term: u64,
    since: f64,
    kept: Kept<RustLeadership>,
    lost: LostSignal,
    /// The value announced last: kept through a proclaim in flight and after the resignation.
    value: Arc<Mutex<String>>,
}

impl Leadership {
    pub fn new(leadership: RustLeadership, context: Context) -> Self {
        Leadership {
            election: leadership.election().name().to_owned(),
            term: leadership.term(),
            since: epoch_ms(leadership.since()),
            lost: leadership.lost(),
            value: Arc::new(Mutex::new(leadership.value().to_owned())),
            kept: Kept::new(leadership, context.keeper),
        }
    }
}

#[napi]
impl Leadership {
    #[napi(getter)]
    pub fn election(&self) -> String {
        self.election.clone()
    }

    /// The term: a fence, strictly larger than every earlier leader's.
    #[napi(getter)]
    pub fn term(&self) -> u64 {
        self.term
    }

    /// When the term began, in milliseconds since the epoch (the server's clock).
    #[napi(getter)]
    pub fn since(&self) -> f64 {
        self.since
    }

    /// The value announced last in this term.
    #[napi(getter)]
    pub fn value(&self) -> String {
        self.value
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether this process still leads, as far as it can tell now.
    #[napi]
    pub fn is_held(&self) -> bool {
        !self.lost.is_lost()
    }

    /// `[code, message]` if the leadership is lost (or resigned) now, else `null`.
    #[napi(ts_return_type = "[string, string] | null")]
    pub fn lost_now(&self) -> Option<Vec<String>> {
        lost_pair(&self.lost)
    }

    /// Calls `callback(code, message)` when the leadership is lost or resigned.
    #[napi(ts_args_type = "callback: (code: string, message: string) => void")]
    pub fn on_lost(&self, callback: LostCallback) {
        self.kept.on_lost(&self.lost, callback);
    }

    /// Announces a new value for this term.
    #[napi]
    pub fn proclaim<'env>(&self, env: &'env Env, value: String) -> Result<PromiseRaw<'env, ()>> {
        let election = self.election.clone();
        let announced = self.value.clone();
        self.kept.run(
            env,
            |hold| async move {
                let mut leadership = hold.slot().write().await;
                match leadership.as_mut() {
                    Some(leadership) => {
                        leadership.proclaim(value).await?;
                        leadership.value().clone_into(
                            &mut announced.lock().unwrap_or_else(PoisonError::into_inner),
                        );
                        Ok(())
                    }
                    None => Err(Failure::GivenBack { lock: election }),
                }
            },
            |()| (),
        )
    }

    /// Resigns: `true` if this process still led.
    #[napi]
    pub fn resign<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, bool>> {
        self.kept.finish(env)
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
