//! The exhaustive checks: the protocol as it is passes every property within the small bounds,
//! and each break of it (a mutant) makes the checker find a counterexample.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::time::Instant;

use fencelock_model::once::OnceModel;
use fencelock_model::{LockModel, Mutants};
use stateright::{Checker, HasDiscoveries, Model};

const FENCES: &str = "fences of grants strictly increase";
const RESOURCE: &str = "the resource accepts no fence below one it accepted";
const FENCING: &str = "the resource refuses an older grant's write after a newer one's";
const CLAIMED: &str = "a passed lease lasts the claim until confirmed";
const GRANTED: &str = "a release with a live waiter in line grants it within the claim";

fn passes(name: &str, model: LockModel) {
    let started = Instant::now();
    let checker = model.checker().spawn_bfs().join();
    eprintln!(
        "{name}: {} unique states, {} states, depth {}, {:.1?}",
        checker.unique_state_count(),
        checker.state_count(),
        checker.max_depth(),
        started.elapsed()
    );
    checker.assert_properties();
}

#[test]
fn fences_failover_and_the_clock_pass_every_property() {
    passes("fences", LockModel::fences());
}

#[test]
fn a_clock_that_jumps_forward_ends_leases_early_and_the_fences_still_hold() {
    // Two clients within their deadlines (a witness), and every fence property holds.
    passes(
        "forward jump",
        LockModel {
            jumps: 1,
            failovers: 0,
            steps_back: 0,
            ..LockModel::fences()
        },
    );
}

#[test]
fn the_line_and_the_pass_pass_every_property() {
    passes("passing", LockModel::passing());
}

#[test]
fn a_dead_waiter_with_one_behind_it_passes_every_property() {
    let model = LockModel::dead_waiter();
    let checker = model.clone().checker().spawn_bfs().join();
    eprintln!(
        "dead waiter: {} unique states",
        checker.unique_state_count()
    );
    for property in model.properties() {
        if property.expectation == stateright::Expectation::Always {
            checker.assert_no_discovery(property.name);
        }
    }
}

/// Checks `model` until one of `names` fails, and asserts that one did.
fn finds(model: LockModel, names: &[&'static str]) {
    let checker = model
        .checker()
        .finish_when(HasDiscoveries::AnyOf(
            names.iter().copied().collect::<BTreeSet<_>>(),
        ))
        .spawn_bfs()
        .join();
    let found = names
        .iter()
        .copied()
        .find(|name| checker.discovery(name).is_some());
    let Some(name) = found else {
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
fn a_resource_without_the_fence_check_accepts_a_stale_write() {
    let model = LockModel::fences().with(Mutants {
        no_resource_check: true,
        ..Mutants::default()
    });
    finds(model, &[RESOURCE]);
}

#[test]
fn a_pass_without_the_claim_bound_keeps_the_lock_for_a_dead_waiter() {
    let mutant = Mutants {
        unbounded_claim: true,
        ..Mutants::default()
    };
    finds(LockModel::passing().with(mutant), &[CLAIMED]);
    // The liveness bound itself: a waiter died in line with a live one behind it.
    finds(LockModel::dead_waiter().with(mutant), &[GRANTED]);
}

#[test]
fn a_counter_only_fence_goes_backwards_after_a_failover() {
    let model = LockModel::fences().with(Mutants {
        fence_counter_only: true,
        ..Mutants::default()
    });
    finds(model.clone(), &[FENCES]);
    // Without a failover the counter alone keeps growing.
    LockModel {
        failovers: 0,
        ..model
    }
    .checker()
    .spawn_bfs()
    .join()
    .assert_no_discovery(FENCES);
}

#[test]
fn a_clock_only_fence_goes_backwards() {
    let model = LockModel::fences().with(Mutants {
        fence_clock_only: true,
        ..Mutants::default()
    });
    finds(model, &[FENCES]);
}

#[test]
fn a_promoted_replica_whose_clock_lags_too_far_breaks_the_fences() {
    let model = LockModel::fences().with(Mutants {
        unbounded_clock_lag: true,
        ..Mutants::default()
    });
    finds(model.clone(), &[FENCES]);
    finds(model, &[FENCING]);
}

#[test]
fn run_once_begins_in_one_step_and_counts_the_work_once() {
    let checker = OnceModel::small().checker().spawn_bfs().join();
    eprintln!("run-once: {} unique states", checker.unique_state_count());
    checker.assert_properties();
}

#[test]
fn a_two_step_begin_counts_the_work_twice() {
    let model = OnceModel {
        two_step_begin: true,
        ..OnceModel::small()
    };
    let checker = model.checker().spawn_bfs().join();
    let path = checker.discovery("the work is counted done by at most one run");
    let Some(path) = path else {
        panic!("no double run in {} states", checker.unique_state_count());
    };
    eprintln!("double run: {:?}", path.into_actions());
}

mod fair {
    use super::*;
    use fencelock_model::fair::{FairModel, FairMutants};

    const CLAIMED: &str = "fair: a passed lease lasts the claim until confirmed";
    const ORDER: &str = "fair: no grant passes over a place ahead that has not lapsed";
    const GRANTED: &str =
        "fair: a release with a live waiter queued grants a live client within the claim";
    const FREED: &str =
        "fair: a free lock with a live waiter queued is granted within the queue timeout";

    /// Checks `model` until one of `names` fails, and asserts that one did.
    fn finds(model: FairModel, names: &[&'static str]) {
        let checker = model
            .checker()
            .finish_when(HasDiscoveries::AnyOf(
                names.iter().copied().collect::<BTreeSet<_>>(),
            ))
            .spawn_bfs()
            .join();
        let found = names
            .iter()
            .copied()
            .find(|name| checker.discovery(name).is_some());
        let Some(name) = found else {
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

    fn passes(name: &str, model: FairModel) {
        let started = Instant::now();
        let checker = model.checker().spawn_bfs().join();
        eprintln!(
            "{name}: {} unique states, {} states, depth {}, {:.1?}",
            checker.unique_state_count(),
            checker.state_count(),
            checker.max_depth(),
            started.elapsed()
        );
        checker.assert_properties();
    }

    #[test]
    fn the_fair_lock_passes_every_property() {
        passes("fair", FairModel::small());
    }

    #[test]
    fn the_fair_lock_with_lost_messages_and_the_clock_passes_every_property() {
        passes("fair, lossy", FairModel::lossy());
    }

    #[test]
    fn a_fair_pass_without_the_claim_keeps_the_lock_for_a_dead_head() {
        let mutant = FairMutants {
            unbounded_claim: true,
            ..FairMutants::default()
        };
        finds(FairModel::small().with(mutant), &[CLAIMED]);
        finds(FairModel::small().with(mutant), &[GRANTED]);
    }

    #[test]
    fn an_acquire_that_skips_the_queue_passes_over_a_waiter() {
        let mutant = FairMutants {
            skip_queue: true,
            ..FairMutants::default()
        };
        finds(FairModel::small().with(mutant), &[ORDER]);
    }

    #[test]
    fn a_dead_waiters_place_that_never_lapses_blocks_the_queue() {
        let mutant = FairMutants {
            no_lapse: true,
            ..FairMutants::default()
        };
        let model = FairModel {
            max_time: 6,
            ..FairModel::small()
        };
        finds(model.with(mutant), &[FREED]);
    }
}

mod semaphore {
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
}

mod election {
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
}

mod multi {
    use super::*;
    use fencelock_model::multi::{MultiModel, MultiMutants};

    const MOVES: &str = "multi: some request can always move until all are done";
    const BOUNDED: &str = "multi: a request is granted within the bound on failed rounds";

    fn finds(model: MultiModel, name: &'static str) {
        let checker = model
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
    fn multi_lock_in_name_order_makes_progress() {
        let checker = MultiModel::small().checker().spawn_bfs().join();
        eprintln!(
            "multi: {} unique states, {} states, depth {}",
            checker.unique_state_count(),
            checker.state_count(),
            checker.max_depth()
        );
        checker.assert_properties();
    }

    #[test]
    fn multi_lock_without_the_pause_hands_names_back_and_forth() {
        let mutant = MultiMutants {
            no_pause: true,
            ..MultiMutants::default()
        };
        finds(MultiModel::small().with(mutant), BOUNDED);
    }

    #[test]
    fn multi_lock_that_waits_holding_what_it_took_deadlocks() {
        let mutant = MultiMutants {
            hold_while_waiting: true,
            ..MultiMutants::default()
        };
        finds(MultiModel::small().with(mutant), MOVES);
        finds(
            MultiModel::small().with(mutant),
            "multi: every request is granted",
        );
    }

    #[test]
    fn multi_lock_livelocks_when_the_pause_only_outlasts_the_give_back() {
        // The assumption the bound rests on: with a pause that ends as soon as the other
        // request has given its names back, two requests in name order can each be passed one
        // name and fail on the other, round after round.
        let model = MultiModel {
            pause_outlasts_round: false,
            ..MultiModel::small()
        };
        finds(model, BOUNDED);
    }

    #[test]
    fn multi_lock_in_the_callers_order_is_bounded_by_the_pause_too() {
        // Not a guard the checker can see: under the pause, two requests that try in opposite
        // orders are granted within the same bound (name order spares rounds in practice).
        let model = MultiModel::small().with(MultiMutants {
            caller_order: true,
            ..MultiMutants::default()
        });
        model
            .checker()
            .spawn_bfs()
            .join()
            .assert_no_discovery(BOUNDED);
    }
}

mod redlock {
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
}
