//! The semaphore's model (`semaphore::SemModel`): every property within the bound, and its mutants
//! caught.

use super::*;
use fencelock_model::semaphore::{SemModel, SemMutants};

const PERMITS: &str = "semaphore: at most N permits held on the server";
const BELIEVED: &str = "semaphore: clients within their deadlines hold at most N permits";
const ORDER: &str = "semaphore: a grant leaves room for every request that waits longer";

fn finds(model: SemModel, names: &[&'static str]) {
    let checker = model
        .checker()
        .finish_when(HasDiscoveries::AnyOf(
            names.iter().copied().collect::<BTreeSet<_>>(),
        ))
        .spawn_bfs()
        .join();
    let Some(name) = names.iter().find(|name| checker.discovery(name).is_some()) else {
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

#[test]
fn the_semaphore_with_weighted_takes_passes_every_property() {
    let started = Instant::now();
    let checker = SemModel::small().checker().spawn_bfs().join();
    eprintln!(
        "semaphore: {} unique states, {} states, depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker.assert_properties();
}

#[test]
fn a_semaphore_that_counts_holds_not_permits_gives_more_than_n() {
    let model = SemModel::small().with(SemMutants {
        count_holds: true,
        ..SemMutants::default()
    });
    finds(model.clone(), &[PERMITS]);
    finds(model, &[BELIEVED]);
}

#[test]
fn a_semaphore_that_ignores_longer_waits_lets_a_small_take_overtake() {
    let model = SemModel::small().with(SemMutants {
        no_ahead: true,
        ..SemMutants::default()
    });
    finds(model, &[ORDER]);
}
