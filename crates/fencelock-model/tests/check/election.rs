//! The election's model (`election::ElectionModel`): every property within the bound, and its
//! mutants caught.

use super::*;
use fencelock_model::election::{ElectionModel, ElectionMutants};

const ANSWERS: &str = "election: leader() never answers nobody while a term is held";
const NAMES: &str = "election: leader() names only the term the lock holds, never one resigned";

#[test]
fn the_election_passes_every_property() {
    passes("election", ElectionModel::small());
}

#[test]
fn a_leader_read_from_the_record_alone_names_a_lapsed_leader() {
    let mutant = ElectionMutants {
        record_alone: true,
        ..ElectionMutants::default()
    };
    finds(ElectionModel::small().with(mutant), &[NAMES]);
}

#[test]
fn a_renewal_that_does_not_keep_the_record_leaves_a_term_without_its_leader() {
    let mutant = ElectionMutants {
        record_not_kept: true,
        ..ElectionMutants::default()
    };
    finds(ElectionModel::small().with(mutant), &[ANSWERS]);
}

#[test]
fn a_deposed_leaders_proclaim_hides_the_new_leader() {
    let mutant = ElectionMutants {
        proclaim_unchecked: true,
        ..ElectionMutants::default()
    };
    finds(ElectionModel::small().with(mutant), &[ANSWERS]);
}

#[test]
fn a_term_that_is_the_clock_alone_repeats() {
    let mutant = ElectionMutants {
        term_clock_only: true,
        ..ElectionMutants::default()
    };
    finds(
        ElectionModel::small().with(mutant),
        &["election: terms strictly increase"],
    );
}
