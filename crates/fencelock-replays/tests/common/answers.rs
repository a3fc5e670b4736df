//! What a walk's clients were answered, as a trace checked by the model at the walk's end.

use fencelock_model::trace::{self, Event, Seen as Saw, Trace, What, WriteOutcome};

use super::Request;

/// What a walk's clients were answered, as a trace (`fencelock_model::trace`), to be explained
/// by the model at the walk's end: the walk checks the server against the model after every
/// step, and this the answers the library gave against the model's rules.
#[derive(Default)]
pub struct Answers {
    trace: Trace,
    /// The holds (client, fence) whose holder was told.
    told: std::collections::HashSet<(usize, u64)>,
}

impl Answers {
    /// Answers about a lock of `permits` (a semaphore's; 1 otherwise).
    pub fn of(permits: u32) -> Self {
        let mut answers = Self::default();
        answers.trace.permits = permits;
        answers
    }

    /// Client `i` was granted `fence` (one permit).
    pub fn granted(&mut self, i: usize, fence: u64) {
        self.saw(i, Saw::Granted { fence, permits: 1 });
    }

    /// Client `i` gives back what `request` holds (`held`: the model says it still holds it).
    pub async fn give_back(&mut self, i: usize, request: &mut Request, held: bool) {
        let fence = request.guard(i).fence();
        self.saw(i, Saw::Release { fence });
        request.release(i, held).await;
        let held = Some(held);
        self.saw(i, Saw::Released { fence, held });
    }

    /// Client `i`'s renewal was refused: it was told, and gives back what `request` holds.
    pub async fn refused(&mut self, i: usize, request: &mut Request) {
        self.told(i, request.guard(i).fence());
        self.give_back(i, request, false).await;
    }

    /// Client `i` saw `seen` (a step after the last).
    pub fn saw(&mut self, i: usize, seen: Saw) {
        let line = self.trace.events.len() + 1;
        self.trace.events.push(Event {
            line,
            at_ns: 1_000 * line as u64,
            what: What::Worker {
                worker: u32::try_from(i).unwrap(),
                lock: "walk".into(),
                seen,
            },
        });
    }

    /// Client `i`, holding `fence`, knows its lock is lost (once a hold).
    pub fn told(&mut self, i: usize, fence: u64) {
        if self.told.insert((i, fence)) {
            self.saw(
                i,
                Saw::Told {
                    fence,
                    deadline_ns: None,
                },
            );
        }
    }

    /// Every holder whose deadline has passed in the plain lock's model knows it (a lease or a
    /// claim that ran out, a pass delivered after its claim).
    pub fn deadlines(&mut self, s: &fencelock_model::State, requests: &[Request]) {
        for (i, (c, request)) in s.clients.iter().zip(requests).enumerate() {
            if let (fencelock_model::Phase::Holding { deadline, .. }, Request::Holding(guard)) =
                (c.phase, request)
                && deadline <= s.now
            {
                self.told(i, guard.fence());
            }
        }
    }

    /// Client `i`'s fenced write with `fence`, begun just after the last step, answered now.
    pub fn wrote(&mut self, i: usize, fence: u64, outcome: WriteOutcome) {
        let started_ns = 1_000 * self.trace.events.len() as u64 + 500;
        self.saw(
            i,
            Saw::Write {
                fence,
                started_ns,
                outcome,
            },
        );
    }

    /// The model explains the answers; `walk` names the walk in a failure.
    pub fn explained(&self, walk: &str) {
        let mut trace = self.trace.clone();
        trace.permits = trace.permits.max(1);
        if let Err(e) = trace::check(&trace) {
            panic!(
                "{walk}: the model does not explain the answers of the library: {e}\n{:#?}",
                trace.events
            );
        }
    }
}
