//! The engine: requesting, waiting for, holding, renewing and releasing a lock of any kind.
//!
//! A kind of lock plugs in through [`Protocol`] (its scripts and its rules); the engine holds the
//! protocol in each [`Hold`] and never names a kind. Where each question is answered:
//! - how a lock is requested: `request.rs` (options and checks), `acquire.rs` (the request loop
//!   and waiting), `round.rs` (one round over the instances and its tally);
//! - how a lock is released: `release.rs` (one path for a guard, a dropped guard and a lost
//!   round's give-back);
//! - how a lock is renewed: `extend.rs` (judging an extension), used by the guard's `extend`
//!   (`guard.rs`) and the watchdog (`crate::watchdog`);
//! - what one script call on one server does and answers: `ops.rs`.

mod acquire;
mod extend;
mod guard;
mod label;
mod memory;
mod native;
mod ops;
mod protocol;
mod release;
mod replicas;
mod request;
mod round;
mod settle;
mod shared;
pub(crate) mod watchdog;

pub use guard::LockGuard;
pub use label::MAX_LABEL_LEN;
pub use replicas::Shortfall;
pub(crate) use replicas::{ReplicaAck, confirm_on as confirm_replicas_on};
pub use request::{
    DEFAULT_QUEUE_TIMEOUT, DEFAULT_TTL, LockRequest, MAX_TTL, MIN_QUEUE_TIMEOUT, MIN_TTL,
    WaitPolicy,
};

pub(crate) use extend::{Verdict, judge_extension};
pub(crate) use memory::FenceMemory;
pub(crate) use ops::{ExtendItem, Extended, extend_many};
pub(crate) use protocol::Hold;
pub(crate) use protocol::{Attempt, Protocol, ReleaseFence};
pub(crate) use release::Abandoned;
pub(crate) use shared::Shared;
