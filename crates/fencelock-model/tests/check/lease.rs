//! The holder's side of a lease (`lease::LeaseModel`): the holder knows its lock is gone before
//! the server lets anyone else have it, within the stated assumptions; and each assumption,
//! dropped, and each break of the holder's rules, lets the checker find a run where it does not.

use super::*;
use fencelock_model::lease::{LeaseModel, LeaseMutants};

const KNOWS: &str = "the holder knows before anyone else can have it";

#[test]
fn the_holder_knows_before_anyone_else_can_have_it() {
    passes("lease", LeaseModel::small());
}

#[test]
fn without_the_drift_margin_a_slow_holder_clock_believes_too_long() {
    let model = LeaseModel {
        mutants: LeaseMutants {
            no_margin: true,
            ..LeaseMutants::default()
        },
        ..LeaseModel::small()
    };
    finds(model, &[KNOWS]);
}

#[test]
fn a_deadline_counted_from_the_reply_outlives_the_servers_expiry() {
    let model = LeaseModel {
        client_drift: 0,
        mutants: LeaseMutants {
            from_reply: true,
            ..LeaseMutants::default()
        },
        ..LeaseModel::small()
    };
    finds(model, &[KNOWS]);
}

#[test]
fn a_drift_beyond_the_margin_breaks_it() {
    let model = LeaseModel {
        client_drift: 2,
        ..LeaseModel::small()
    };
    finds(model, &[KNOWS]);
}

#[test]
fn a_server_clock_that_jumps_forward_breaks_it() {
    let model = LeaseModel {
        jumps: 1,
        ..LeaseModel::small()
    };
    finds(model, &[KNOWS]);
}
