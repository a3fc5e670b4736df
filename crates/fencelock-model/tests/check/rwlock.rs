//! The read-write lock's model (`rwlock::RwModel`): every property within the bound, and its
//! mutants caught.

use super::*;
use fencelock_model::rwlock::{RwModel, RwMutants};

const ALONE: &str = "rwlock: a writer holds alone on the server";
const BELIEVED: &str =
    "rwlock: a writer within its deadline is the only client that believes it holds";
const ORDER: &str =
    "rwlock: no request is granted ahead of one of the other kind that waits longer";

#[test]
fn the_read_write_lock_passes_every_property() {
    passes("rwlock", RwModel::small());
}

fn mutant(mutants: RwMutants) -> RwModel {
    RwModel::small().with(mutants)
}

#[test]
fn a_read_past_a_writer_or_a_write_past_readers_breaks_exclusion() {
    for mutants in [
        RwMutants {
            read_past_writer: true,
            ..RwMutants::default()
        },
        RwMutants {
            write_past_readers: true,
            ..RwMutants::default()
        },
    ] {
        finds(mutant(mutants), &[ALONE]);
        finds(mutant(mutants), &[BELIEVED]);
    }
}

#[test]
fn readers_or_writers_that_do_not_wait_their_turn_are_caught() {
    for mutants in [
        RwMutants {
            readers_first: true,
            ..RwMutants::default()
        },
        RwMutants {
            writers_first: true,
            ..RwMutants::default()
        },
    ] {
        finds(mutant(mutants), &[ORDER]);
    }
}
