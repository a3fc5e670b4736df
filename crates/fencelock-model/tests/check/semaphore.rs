//! The semaphore's model (`semaphore::SemModel`): every property within the bound, and its mutants
//! caught.

use super::*;
use fencelock_model::semaphore::{SemModel, SemMutants};

const PERMITS: &str = "semaphore: at most N permits held on the server";
const BELIEVED: &str = "semaphore: clients within their deadlines hold at most N permits";
const ORDER: &str = "semaphore: a grant leaves room for every request that waits longer";

#[test]
fn the_semaphore_with_weighted_takes_passes_every_property() {
    passes("semaphore", SemModel::small());
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
