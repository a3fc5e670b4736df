//! The plain lock over Redlock (`redlock::RedlockModel`): every property with a restart, and its
//! mutants caught.

use super::*;
use fencelock_model::redlock::{RedlockModel, RedlockMutants};

const SHARED: &str = "redlock: no two grants share a fence";
const FENCING: &str = "redlock: the resource never accepts two grants' writes with one fence";

/// The mutant gives one fence to two grants, and the resource accepts both grants' writes.
fn finds_twice(mutants: RedlockMutants) {
    finds_all(RedlockModel::small().with(mutants), &[SHARED, FENCING]);
}

#[test]
fn redlock_with_a_restart_passes_every_property() {
    passes("redlock", RedlockModel::small());
}

#[test]
fn a_redlock_fence_that_is_not_the_majoritys_largest_is_given_twice() {
    finds_twice(RedlockMutants {
        first_fence: true,
        ..RedlockMutants::default()
    });
}

#[test]
fn a_redlock_release_without_its_fence_floor_gives_a_fence_twice() {
    finds_twice(RedlockMutants {
        no_release_floor: true,
        ..RedlockMutants::default()
    });
}

#[test]
fn an_instance_back_within_the_lease_after_a_restart_gives_a_fence_twice() {
    let mutant = RedlockMutants {
        restart_within_lease: true,
        ..RedlockMutants::default()
    };
    finds_twice(mutant);
    finds(
        RedlockModel::small().with(mutant),
        &["redlock: one holder within its deadline"],
    );
}
