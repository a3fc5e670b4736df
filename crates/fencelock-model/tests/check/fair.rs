//! The fair lock's model (`fair::FairModel`): every property within the bounds, and its mutants
//! caught.

use super::*;
use fencelock_model::fair::{FairModel, FairMutants};

const CLAIMED: &str = "fair: a passed lease lasts the claim until confirmed";
const ORDER: &str = "fair: no grant passes over a place ahead that has not lapsed";
const GRANTED: &str =
    "fair: a release with a live waiter queued grants a live client within the claim";
const FREED: &str =
    "fair: a free lock with a live waiter queued is granted within the queue timeout";

#[test]
fn the_fair_lock_passes_every_property() {
    passes("fair", FairModel::small());
}

#[test]
fn the_fair_lock_with_lost_messages_and_the_clock_passes_every_property() {
    passes("fair, lossy", FairModel::lossy());
}

#[test]
fn a_fair_pass_without_the_claim_keeps_the_lock_for_a_dead_head() {
    let mutant = FairMutants {
        unbounded_claim: true,
        ..FairMutants::default()
    };
    finds(FairModel::small().with(mutant), &[CLAIMED]);
    finds(FairModel::small().with(mutant), &[GRANTED]);
}

#[test]
fn an_acquire_that_skips_the_queue_passes_over_a_waiter() {
    let mutant = FairMutants {
        skip_queue: true,
        ..FairMutants::default()
    };
    finds(FairModel::small().with(mutant), &[ORDER]);
}

#[test]
fn a_dead_waiters_place_that_never_lapses_blocks_the_queue() {
    let mutant = FairMutants {
        no_lapse: true,
        ..FairMutants::default()
    };
    let model = FairModel {
        max_time: 6,
        ..FairModel::small()
    };
    finds(model.with(mutant), &[FREED]);
}

#[test]
fn a_pass_whose_fence_is_the_clock_alone_goes_backwards() {
    let mutant = FairMutants {
        pass_fence_clock_only: true,
        ..FairMutants::default()
    };
    finds(
        FairModel::lossy().with(mutant),
        &["fair: fences of grants strictly increase"],
    );
}
