//! The election's model (`election::ElectionModel`): every property within the bound, and its
//! mutants caught.

use super::*;
use fencelock_model::election::{ElectionModel, ElectionMutants};

const ANSWERS: &str = "election: leader() never answers nobody while a term is held";
const NAMES: &str = "election: leader() names only the term the lock holds, never one resigned";

fn finds(mutants: ElectionMutants, name: &'static str) {
    let checker = ElectionModel::small()
        .with(mutants)
        .checker()
        .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([name])))
        .spawn_bfs()
        .join();
    let Some(path) = checker.discovery(name) else {
        panic!("{name} held in {} states", checker.unique_state_count());
    };
    eprintln!("found: {name}\n{:?}", path.into_actions());
}

#[test]
fn the_election_passes_every_property() {
    let checker = ElectionModel::small().checker().spawn_bfs().join();
    eprintln!(
        "election: {} unique states, {} states, depth {}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth()
    );
    checker.assert_properties();
}

#[test]
fn a_leader_read_from_the_record_alone_names_a_lapsed_leader() {
    let mutant = ElectionMutants {
        record_alone: true,
        ..ElectionMutants::default()
    };
    finds(mutant, NAMES);
}

#[test]
fn a_renewal_that_does_not_keep_the_record_leaves_a_term_without_its_leader() {
    let mutant = ElectionMutants {
        record_not_kept: true,
        ..ElectionMutants::default()
    };
    finds(mutant, ANSWERS);
}

#[test]
fn a_deposed_leaders_proclaim_hides_the_new_leader() {
    let mutant = ElectionMutants {
        proclaim_unchecked: true,
        ..ElectionMutants::default()
    };
    finds(mutant, ANSWERS);
}

#[test]
fn a_term_that_is_the_clock_alone_repeats() {
    let mutant = ElectionMutants {
        term_clock_only: true,
        ..ElectionMutants::default()
    };
    finds(mutant, "election: terms strictly increase");
}
