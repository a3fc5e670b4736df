//! The exhaustive checks: the protocol as it is passes every property within the small bounds,
//! and each break of it (a mutant) makes the checker find a counterexample.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Debug;
use std::hash::Hash;
use std::time::Instant;

use fencelock_model::once::OnceModel;
use fencelock_model::{LockModel, Mutants};
use stateright::{Checker, HasDiscoveries, Model};

const FENCES: &str = "fences of grants strictly increase";
const RESOURCE: &str = "the resource accepts no fence below one it accepted";
const FENCING: &str = "the resource refuses an older grant's write after a newer one's";
const CLAIMED: &str = "a passed lease lasts the claim until confirmed";
const GRANTED: &str = "a release with a live waiter in line grants it within the claim";
const EXCLUSION: &str =
    "one holder within its deadline unless a failover lost a grant or the clock jumped";

/// What the breadth-first checker asks of a model (every model of the crate is one).
pub trait Checked:
    Model<
        State: Hash + Debug + Clone + PartialEq + Send + Sync + 'static,
        Action: Debug + Clone + PartialEq,
    > + Send
    + Sync
    + 'static
{
}

impl<M> Checked for M where
    M: Model<
            State: Hash + Debug + Clone + PartialEq + Send + Sync + 'static,
            Action: Debug + Clone + PartialEq,
        > + Send
        + Sync
        + 'static
{
}

/// Checks `model` exhaustively and asserts every property (`name` says which in the log).
pub fn passes(name: &str, model: impl Checked) {
    let started = Instant::now();
    let checker = model.checker().spawn_bfs().join();
    eprintln!(
        "{name}: {} unique states, {} states, depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker.assert_properties();
}

/// Checks `model` exhaustively and asserts that property `name` is never broken.
pub fn holds(model: impl Checked, name: &'static str) {
    model.checker().spawn_bfs().join().assert_no_discovery(name);
}

/// Checks `model` until one of `names` fails, and asserts that one did.
pub fn finds(model: impl Checked, names: &[&'static str]) {
    let checker = model
        .checker()
        .finish_when(HasDiscoveries::AnyOf(names.iter().copied().collect()))
        .spawn_bfs()
        .join();
    let found = names
        .iter()
        .copied()
        .find(|name| checker.discovery(name).is_some());
    let Some(name) = found else {
        panic!(
            "none of {names:?} failed in {} states",
            checker.unique_state_count()
        );
    };
    eprintln!(
        "found: {name}\n{:?}",
        checker.discovery(name).expect("found").into_actions()
    );
}

/// Checks `model` until every one of `names` fails, and asserts that each did.
pub fn finds_all(model: impl Checked, names: &[&'static str]) {
    let checker = model
        .checker()
        .finish_when(HasDiscoveries::AllOf(names.iter().copied().collect()))
        .spawn_bfs()
        .join();
    for &name in names {
        let Some(path) = checker.discovery(name) else {
            panic!("{name} held in {} states", checker.unique_state_count());
        };
        eprintln!("found: {name}\n{:?}", path.into_actions());
    }
}

#[test]
fn fences_failover_and_the_clock_pass_every_property() {
    passes("fences", LockModel::fences());
}

#[test]
fn a_clock_that_jumps_forward_ends_leases_early_and_the_fences_still_hold() {
    // Two clients within their deadlines (a witness), and every fence property holds.
    passes(
        "forward jump",
        LockModel {
            jumps: 1,
            failovers: 0,
            steps_back: 0,
            ..LockModel::fences()
        },
    );
}

#[test]
fn the_line_and_the_pass_pass_every_property() {
    passes("passing", LockModel::passing());
}

#[test]
fn a_dead_waiter_with_one_behind_it_passes_every_property() {
    let model = LockModel::dead_waiter();
    let checker = model.clone().checker().spawn_bfs().join();
    eprintln!(
        "dead waiter: {} unique states",
        checker.unique_state_count()
    );
    for property in model.properties() {
        if property.expectation == stateright::Expectation::Always {
            checker.assert_no_discovery(property.name);
        }
    }
}

#[test]
fn a_resource_without_the_fence_check_accepts_a_stale_write() {
    let model = LockModel::fences().with(Mutants {
        no_resource_check: true,
        ..Mutants::default()
    });
    finds(model, &[RESOURCE]);
}

#[test]
fn a_pass_without_the_claim_bound_keeps_the_lock_for_a_dead_waiter() {
    let mutant = Mutants {
        unbounded_claim: true,
        ..Mutants::default()
    };
    finds(LockModel::passing().with(mutant), &[CLAIMED]);
    // The liveness bound itself: a waiter died in line with a live one behind it.
    finds(LockModel::dead_waiter().with(mutant), &[GRANTED]);
}

#[test]
fn a_renewal_that_does_not_check_the_owner_makes_two_holders_without_a_failover() {
    let model = LockModel {
        failovers: 0,
        ..LockModel::fences()
    };
    holds(model.clone(), EXCLUSION);
    finds(
        model.with(Mutants {
            renew_any_owner: true,
            ..Mutants::default()
        }),
        &[EXCLUSION],
    );
}

#[test]
fn a_counter_only_fence_goes_backwards_after_a_failover() {
    let model = LockModel::fences().with(Mutants {
        fence_counter_only: true,
        ..Mutants::default()
    });
    finds(model.clone(), &[FENCES]);
    // Without a failover the counter alone keeps growing.
    holds(
        LockModel {
            failovers: 0,
            ..model
        },
        FENCES,
    );
}

#[test]
fn a_clock_only_fence_goes_backwards() {
    let model = LockModel::fences().with(Mutants {
        fence_clock_only: true,
        ..Mutants::default()
    });
    finds(model, &[FENCES]);
}

#[test]
fn a_promoted_replica_whose_clock_lags_too_far_breaks_the_fences() {
    let model = LockModel::fences().with(Mutants {
        unbounded_clock_lag: true,
        ..Mutants::default()
    });
    finds(model.clone(), &[FENCES]);
    finds(model, &[FENCING]);
}

#[test]
fn run_once_begins_in_one_step_and_counts_the_work_once() {
    passes("run-once", OnceModel::small());
}

#[test]
fn a_two_step_begin_counts_the_work_twice() {
    let model = OnceModel {
        two_step_begin: true,
        ..OnceModel::small()
    };
    finds(model, &["the work is counted done by at most one run"]);
}

#[path = "check/election.rs"]
mod election;
#[path = "check/fair.rs"]
mod fair;
#[path = "check/lease.rs"]
mod lease;
#[path = "check/multi.rs"]
mod multi;
#[path = "check/redlock.rs"]
mod redlock;
#[path = "check/reentrant.rs"]
mod reentrant;
#[path = "check/rwlock.rs"]
mod rwlock;
#[path = "check/semaphore.rs"]
mod semaphore;
