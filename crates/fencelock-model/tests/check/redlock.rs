//! The plain lock over Redlock (`redlock::RedlockModel`): every property with a restart, and its
//! mutants caught.

use super::*;
use fencelock_model::redlock::{RedlockModel, RedlockMutants};

const SHARED: &str = "redlock: no two grants share a fence";
const FENCING: &str = "redlock: the resource never accepts two grants' writes with one fence";

fn finds(mutants: RedlockMutants) {
    let names = BTreeSet::from([SHARED, FENCING]);
    let checker = RedlockModel::small()
        .with(mutants)
        .checker()
        .finish_when(HasDiscoveries::AllOf(names.clone()))
        .spawn_bfs()
        .join();
    for name in names {
        let Some(path) = checker.discovery(name) else {
            panic!("{name} held in {} states", checker.unique_state_count());
        };
        eprintln!("found: {name}\n{:?}", path.into_actions());
    }
}

#[test]
fn redlock_with_a_restart_passes_every_property() {
    let checker = RedlockModel::small().checker().spawn_bfs().join();
    eprintln!(
        "redlock: {} unique states, {} states, depth {}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth()
    );
    checker.assert_properties();
}

#[test]
fn a_redlock_fence_that_is_not_the_majoritys_largest_is_given_twice() {
    finds(RedlockMutants {
        first_fence: true,
        ..RedlockMutants::default()
    });
}

#[test]
fn a_redlock_release_without_its_fence_floor_gives_a_fence_twice() {
    finds(RedlockMutants {
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
    finds(mutant);
    let name = "redlock: one holder within its deadline";
    let checker = RedlockModel::small()
        .with(mutant)
        .checker()
        .finish_when(HasDiscoveries::AnyOf(BTreeSet::from([name])))
        .spawn_bfs()
        .join();
    let path = checker.discovery(name).expect("two holders");
    eprintln!("found: {name}\n{:?}", path.into_actions());
}
