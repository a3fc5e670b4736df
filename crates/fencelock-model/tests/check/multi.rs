//! `multi_lock`'s model (`multi::MultiModel`): progress under the pause, its mutants caught, and
//! what the checker found.

use super::*;
use fencelock_model::multi::{MultiModel, MultiMutants, Pause};

const MOVES: &str = "multi: some request can always move until all are done";
const BOUNDED: &str = "multi: a request is granted within the bound on failed rounds";

#[test]
fn multi_lock_in_name_order_makes_progress() {
    passes("multi", MultiModel::small());
}

#[test]
fn multi_lock_without_the_pause_hands_names_back_and_forth() {
    let mutant = MultiMutants {
        no_pause: true,
        ..MultiMutants::default()
    };
    finds(MultiModel::small().with(mutant), &[BOUNDED]);
}

#[test]
fn multi_lock_that_waits_holding_what_it_took_deadlocks() {
    let mutant = MultiMutants {
        hold_while_waiting: true,
        ..MultiMutants::default()
    };
    finds(MultiModel::small().with(mutant), &[MOVES]);
    finds(
        MultiModel::small().with(mutant),
        &["multi: every request is granted"],
    );
}

#[test]
fn multi_lock_livelocks_when_the_pause_only_outlasts_the_give_back() {
    // The assumption the bound rests on: with a pause that ends as soon as the other
    // request has given its names back, two requests in name order can each be passed one
    // name and fail on the other, round after round.
    let model = MultiModel {
        pause: Pause::OutlastsGiveBack,
        ..MultiModel::small()
    };
    finds(model, &[BOUNDED]);
}

#[test]
fn multi_lock_under_a_pause_that_outlasts_every_round_makes_progress() {
    // The assumption of the pause before the library ordered it (every pause as long as a
    // round): progress, had equal pauses not come back together.
    let model = MultiModel {
        pause: Pause::OutlastsRound,
        ..MultiModel::small()
    };
    passes("multi", model);
}

#[test]
fn multi_lock_in_the_callers_order_is_bounded_by_the_pause_too() {
    // Not a guard the checker can see: under the pause, two requests that try in opposite
    // orders are granted within the same bound (name order spares rounds in practice).
    let model = MultiModel::small().with(MultiMutants {
        caller_order: true,
        ..MultiMutants::default()
    });
    holds(model, BOUNDED);
}
