//! The models against the real scripts, one module a replay, in one test binary (one build and
//! one link instead of one per replay): random walks of each model replayed on a real
//! `redis-server` through the library, compared with the model after every step.
//! `cargo test -p fencelock-replays conformance_fair::` runs one replay.

mod common;

mod conformance;
mod conformance_election;
mod conformance_fair;
mod conformance_line;
mod conformance_once;
mod conformance_redlock;
mod conformance_reentrant;
mod conformance_rwlock;
mod conformance_semaphore;
