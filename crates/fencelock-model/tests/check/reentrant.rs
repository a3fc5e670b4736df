//! The reentrant lock's model (`reentrant::ReModel`): every property within the bound, and its
//! mutants caught.

use super::*;
use fencelock_model::reentrant::{ReModel, ReMutants};

const ONE_OWNER: &str = "one owner believes it holds the lock at a time";
const LIMIT: &str = "the holds stay within the re-entry limit";

#[test]
fn the_reentrant_lock_passes_every_property() {
    passes("reentrant", ReModel::small());
}

fn mutant(mutants: ReMutants) -> ReModel {
    ReModel::small().with(mutants)
}

#[test]
fn an_entry_that_does_not_check_the_owner_lets_two_owners_in() {
    let model = mutant(ReMutants {
        no_owner_check: true,
        ..ReMutants::default()
    });
    finds(model, &[ONE_OWNER]);
}

#[test]
fn a_release_that_does_not_find_its_hold_frees_another_owners_lock() {
    finds(
        mutant(ReMutants {
            release_without_hold: true,
            ..ReMutants::default()
        }),
        &[ONE_OWNER],
    );
}

#[test]
fn a_renewal_that_does_not_find_its_hold_revives_a_lapsed_one() {
    finds(
        mutant(ReMutants {
            renew_without_hold: true,
            ..ReMutants::default()
        }),
        &[ONE_OWNER],
    );
}

#[test]
fn no_re_entry_limit_is_caught() {
    finds(
        mutant(ReMutants {
            no_depth_limit: true,
            ..ReMutants::default()
        }),
        &[LIMIT],
    );
}
