//! One acquisition round over the instances, and its tally: the acquire script on every
//! instance at once, decided as soon as a majority granted or can no longer grant.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::connection::is_unreachable;
use crate::engine::ops::{self, AcquireReply};
use crate::engine::protocol::Attempt;
use crate::engine::protocol::Hold;
use crate::engine::request::LockRequest;
use crate::engine::shared::Shared;
use crate::error::{Conflict, Error, Result};
use crate::quorum::Answer;

/// The outcome of one acquisition round over the instances.
pub(crate) enum Round {
    /// A majority granted the lock.
    Won {
        fence: u64,
        sent_at: Instant,
        granted: Indexes,
    },
    /// Held by another owner (on enough instances to deny a majority). `remaining` is the
    /// shortest lease among the holders' instances; `split` is true when this round had
    /// some grants (a split vote with other contenders).
    Contended {
        remaining: Option<Duration>,
        split: bool,
        give_back: GiveBack,
        /// The caller's place in line (one server only): when it lapses on the server's clock,
        /// and when this round was sent.
        place: Option<Place>,
    },
    /// Too many instances failed for a majority; the error says which and how.
    Failed {
        error: Error,
        unreachable: bool,
        give_back: GiveBack,
    },
}

/// A waiter's place in line as one round left it: the server millisecond at which it lapses
/// (the script's reply), and the instant the round was sent, before the server read its clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Place {
    pub(crate) lapses: u64,
    pub(crate) sent_at: Instant,
}

/// The instances where a lost round may have been granted to its token: those that granted,
/// and those whose answer is unknown (failed or not waited for; the request may still apply).
#[derive(Default)]
pub(crate) struct GiveBack {
    pub(crate) granted: Indexes,
    pub(crate) unknown: Indexes,
}

/// Indexes of instances: inline up to five (Redlock's usual count), so that a round on one
/// server allocates nothing for them.
pub(crate) type Indexes = smallvec::SmallVec<[usize; 5]>;

impl LockRequest {
    /// One acquisition round: the acquire script on every instance at once, decided as soon as
    /// a majority granted or can no longer grant. A round that is not won gives back what it may
    /// have taken before it returns.
    /// `waiting`: this request is one of the client's waiters for the lock (it subscribed).
    pub(crate) async fn round(
        &self,
        shared: &Shared,
        hold: &Arc<Hold>,
        waiting: bool,
    ) -> Result<Round> {
        let instances = &shared.instances;
        let quorum = instances.quorum();
        let limit = instances.limit(self.ttl);
        let attempt = Attempt {
            ttl: self.ttl,
            queue_timeout: self.place_lasts(),
            others_wait: instances.local_waiters(hold.keys.channel()) > usize::from(waiting),
            waiting,
        };
        // A queued waiter (fair, or a read-write waiter) hears every instance out when it loses
        // a round: an instance not waited for would have to be given back under a new token,
        // and that give-back's release message would wake this waiter at once, round after
        // round, each round leaving a waiting entry behind.
        let queues = !attempt.queue_timeout.is_zero();
        let sent_at = Instant::now();
        let background = instances.background();
        let answers = instances
            .acquire_on_all(
                |server| {
                    let background = background.clone();
                    ops::acquire(server.clone(), hold.clone(), attempt, limit, background)
                },
                |answers| {
                    let granted = answers.iter().filter(|a| is_grant(a)).count();
                    let against = answers
                        .iter()
                        .filter(|a| a.is_some() && !is_grant(a))
                        .count();
                    quorum.reached(granted) || (!queues && quorum.out_of_reach(against))
                },
            )
            .await;

        let mut tally = Tally::of(&answers, hold, sent_at);
        if let (true, Some(fence)) = (quorum.reached(tally.granted), tally.fence) {
            return Ok(Round::Won {
                fence,
                sent_at,
                granted: tally.give_back.granted,
            });
        }
        // A conflict is the lock's state only where a majority says so. Over Redlock a minority
        // can lag behind (a release of this owner's last hold still on its way there) and
        // answer with a conflict that no longer holds: that counts as a refusal.
        if let Some(conflict) = tally.conflict.filter(|_| quorum.reached(tally.conflicts)) {
            self.give_back(shared, hold, tally.give_back).await;
            return Err(Error::Conflict {
                lock: self.name.clone(),
                conflict,
            });
        }
        tally.refused += tally.conflicts;
        if let Some((key, found)) = tally.foreign {
            self.give_back(shared, hold, tally.give_back).await;
            return Err(Error::WrongType {
                lock: self.name.clone(),
                key,
                found,
            });
        }
        if quorum.out_of_reach(tally.failed) {
            let (granted, refused) = (tally.granted, tally.refused);
            let error = instances.failure(&self.name, "acquire", answers, granted, refused);
            return Ok(Round::Failed {
                error,
                unreachable: tally.unreachable,
                give_back: tally.give_back,
            });
        }
        Ok(Round::Contended {
            remaining: tally.remaining,
            split: tally.granted > 0,
            give_back: tally.give_back,
            // Only one server passes a lock (a place is taken nowhere else).
            place: tally.place.filter(|_| instances.is_single()),
        })
    }
}

/// What the instances answered in one round, counted.
struct Tally {
    /// The largest fence granted.
    fence: Option<u64>,
    granted: usize,
    refused: usize,
    /// The shortest remaining lease of a holder.
    remaining: Option<Duration>,
    failed: usize,
    /// Every failure was a server out of reach (a retry may find it back).
    unreachable: bool,
    /// A key that is not a lock of fencelock's: the key, and what it holds.
    foreign: Option<(String, String)>,
    conflict: Option<Conflict>,
    conflicts: usize,
    give_back: GiveBack,
    /// The place in line the refusing server gave this try.
    place: Option<Place>,
}

impl Tally {
    fn of(answers: &[Answer<AcquireReply>], hold: &Hold, sent_at: Instant) -> Tally {
        let mut tally = Tally {
            fence: None,
            granted: 0,
            refused: 0,
            remaining: None,
            failed: 0,
            unreachable: true,
            foreign: None,
            conflict: None,
            conflicts: 0,
            give_back: GiveBack::default(),
            place: None,
        };
        for (i, answer) in answers.iter().enumerate() {
            tally.add(i, answer, hold, sent_at);
        }
        tally
    }

    fn add(&mut self, i: usize, answer: &Answer<AcquireReply>, hold: &Hold, sent_at: Instant) {
        match answer {
            Some(Ok(AcquireReply::Granted { fence })) => {
                self.granted += 1;
                self.fence = self.fence.max(Some(*fence));
                self.give_back.granted.push(i);
            }
            Some(Ok(AcquireReply::Held {
                remaining: Some(r),
                place: lapses,
            })) => {
                self.refused += 1;
                self.remaining = Some(self.remaining.map_or(*r, |m| m.min(*r)));
                self.place = lapses.map(|lapses| Place { lapses, sent_at });
            }
            Some(Ok(AcquireReply::Held {
                remaining: None, ..
            })) => {
                self.foreign = Some((
                    hold.keys.lock().to_owned(),
                    "a key with no expiry".to_owned(),
                ));
            }
            Some(Ok(AcquireReply::Refused(c))) => {
                self.conflicts += 1;
                self.conflict.get_or_insert_with(|| c.clone());
            }
            Some(Ok(AcquireReply::Foreign { key, found })) => {
                self.foreign = Some((key.clone(), found.clone()));
            }
            Some(Err(err)) => {
                self.failed += 1;
                self.unreachable &= is_unreachable(err);
                self.give_back.unknown.push(i);
            }
            None => self.give_back.unknown.push(i),
        }
    }
}

fn is_grant(answer: &Answer<AcquireReply>) -> bool {
    matches!(answer, Some(Ok(AcquireReply::Granted { .. })))
}
