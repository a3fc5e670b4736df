//! The library's integration tests, one module a file, in one test binary (one build and one
//! link instead of one per file): `cargo test -p fencelock --test integration lock::` runs one
//! file's tests. Binaries of their own: `layers` and `protocol`, which read files beside the
//! package (ARCHITECTURE.md, docs/PROTOCOL.md) that the published crate leaves out, and
//! `metrics`, `losses` and `spans`, which install the process's global recorder or subscriber.

mod common;

mod acl;
mod blocking;
mod client;
mod clocked;
mod cluster;
mod cluster_failover;
mod cluster_subscriptions;
mod coalesce;
mod election;
mod election_record;
mod fair;
mod fair_release;

mod faults;
mod fenced;
mod inspect;
mod int_format;
mod kinds;
mod kinds_foreign;
mod labels;
mod lock;
mod lock_delay;
mod lost;
mod lost_replies;
mod multi;
mod native;
mod once;
mod passing;
#[cfg(feature = "postgres")]
mod postgres;
mod reassert;
mod redlock;
mod redlock_defaults;
mod reentrant;
mod replicas;
mod replies;
mod revoke;
mod rwlock;

mod semaphore;
mod semaphore_release;
mod sentinel;
mod ticks;
mod tls;
mod tries;
mod waiters;
