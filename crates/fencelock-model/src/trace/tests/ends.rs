//! How a hold may end without its release: its holder told (no sooner than the deadline it
//! says), a trace cut short, the permits a take needs, a server that lost its data, a Sentinel
//! failover, a killed worker.

use super::*;

#[test]
fn a_told_holder_s_lease_runs_out_no_sooner_than_the_deadline_it_was_told_of() {
    // Worker 2's grant returns at 4,000 ns; worker 1, told later, says its lease's deadline was
    // `deadline`: before it, its lease cannot have run out on the server.
    let told = |deadline: u64| {
        trace(1)
            .take(1, 10)
            .take(2, 11)
            .w(
                1,
                Seen::Told {
                    fence: 10,
                    deadline_ns: Some(deadline),
                },
            )
            .release(1, 10, false)
    };
    told(4_001).rejected_at(
        4,
        "while worker 1 (fence 10) held it, told it was lost but not yet past worker 1 (fence 10)'s deadline at 4001 ns",
    );
    told(4_000).explained();
    told(3_500).explained();
}

#[test]
fn a_semaphore_s_takes_need_their_permits_free() {
    let takes = |worker: u32, fence: u64, permits: u32| {
        move |t: T| t.ask(worker).w(worker, Seen::Granted { fence, permits })
    };
    // Takes of 2 and 1 of 3 permits fit; another take of 1 does not, until one is released.
    let full = takes(2, 11, 1)(takes(1, 10, 2)(trace(3)));
    full.clone_with(takes(3, 12, 1)).rejected_at(
        6,
        "worker 3 was granted fence 12 while worker 1 (fence 10), worker 2 (fence 11) held it",
    );
    full.clone_with(|t| t.release(1, 10, true).pipe(takes(3, 12, 1)))
        .explained();
    // A take of 2 with 1 free: a holder told of its loss frees its permits, enough only if it
    // held 2.
    full.clone_with(takes(3, 12, 2)).rejected_at(6, "held it");
    full.clone_with(|t| t.pipe(takes(3, 12, 2)).w(2, told(11)).release(2, 11, false))
        .rejected_at(6, "while worker 1 (fence 10) held it");
    full.clone_with(|t| t.pipe(takes(3, 12, 2)).w(1, told(10)).release(1, 10, false))
        .explained();
    // More than the lock has.
    takes(1, 10, 4)(trace(3)).rejected_at(2, "for 4 permits, more than the lock's 3");
}

#[test]
fn a_trace_that_ends_inside_a_section_leaves_its_holder_time_to_be_told() {
    // Cut (a run killed) while worker 1 is paused: it would have been told after the last line.
    let mut t = trace(1).take(1, 10).take(2, 11);
    t.rejected_at(4, "while worker 1 (fence 10) held it");
    t.trace.cut = true;
    t.explained();
    // Its section ended by its next grant, untold: not explained, cut or not.
    let mut t = trace(1).take(1, 10).take(2, 11).take(1, 12);
    t.trace.cut = true;
    t.rejected_at(4, "while worker 1 (fence 10) held it");
}

#[test]
fn a_server_that_lost_its_data_explains_a_second_holder() {
    let lost = trace(1)
        .take(1, 10)
        .push(What::Fault(Loss::Restart))
        .take(2, 11);
    lost.explained();
    // The hold lost, the first holder's release cannot find it once the second is granted.
    lost.clone_with(|t| t.release(1, 10, true))
        .rejected_at(7, "said the lock was still held");
    // A hold granted after the restart is not lost by it.
    trace(1)
        .push(What::Fault(Loss::Restart))
        .take(1, 10)
        .take(2, 11)
        .rejected_at(5, "while worker 1 (fence 10) held it");
}

#[test]
fn within_a_sentinel_failover_the_old_master_may_still_answer() {
    // A hold granted before the failover is lost to the promoted replica; the old master, not
    // yet demoted, still finds it at the release.
    let failover = |t: T| {
        t.push(What::Fault(Loss::FailoverStart))
            .take(2, 11)
            .release(1, 10, true)
            .push(What::Fault(Loss::FailoverEnd))
    };
    failover(trace(1).take(1, 10)).explained();
    // After the failover, the same answer is not explained.
    trace(1)
        .take(1, 10)
        .push(What::Fault(Loss::FailoverStart))
        .push(What::Fault(Loss::FailoverEnd))
        .take(2, 11)
        .release(1, 10, true)
        .rejected_at(8, "said the lock was still held");
    // A grant made after the failover ended is not lost by it.
    trace(1)
        .push(What::Fault(Loss::FailoverStart))
        .push(What::Fault(Loss::FailoverEnd))
        .take(1, 10)
        .take(2, 11)
        .rejected_at(6, "held it");
}

#[test]
fn a_killed_worker_shows_only_the_writes_it_made() {
    // Killed after one accepted write: a second, in flight, may be in the log; not a third.
    let killed = trace(1)
        .take(1, 10)
        .write(1, 10, WriteOutcome::Accepted)
        .w(1, Seen::Killed);
    killed.clone_with(|t| t.log(&[(10, 1)])).explained();
    killed
        .clone_with(|t| t.log(&[(10, 1), (10, 1)]))
        .explained();
    killed
        .clone_with(|t| t.log(&[(10, 1), (10, 1), (10, 1)]))
        .rejected_at(5, "entry 3 of 3");
    // Killed before any: its one write in flight.
    trace(1)
        .take(1, 10)
        .w(1, Seen::Killed)
        .log(&[(10, 1)])
        .explained();
    // Nor a write of another worker's, or of another fence.
    trace(2)
        .take(1, 10)
        .take(2, 11)
        .w(1, Seen::Killed)
        .log(&[(11, 1)])
        .rejected_at(6, "entry 1 of 1");
    trace(2)
        .take(1, 10)
        .take(2, 11)
        .w(1, Seen::Killed)
        .log(&[(10, 2)])
        .rejected_at(6, "entry 1 of 1");
}

#[test]
fn a_killed_holder_ends_its_section_and_its_hidden_write_may_show_in_the_log() {
    trace(1)
        .take(1, 10)
        .w(1, Seen::Killed)
        .take(2, 11)
        .write(2, 11, WriteOutcome::Accepted)
        .log(&[(10, 1), (11, 2)])
        .explained();
    trace(1)
        .take(1, 10)
        .take(2, 11)
        .w(1, Seen::Killed)
        .rejected_at(4, "held it");
}

fn told(fence: u64) -> Seen {
    Seen::Told {
        fence,
        deadline_ns: None,
    }
}
