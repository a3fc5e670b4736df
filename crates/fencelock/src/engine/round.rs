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
use crate::error::{Error, Result};
use crate::quorum::Answer;

/// The outcome of one acquisition round over the instances.
pub(crate) enum Round {
    /// A majority granted the lock.
    Won {
        fence: u64,
        sent_at: Instant,
        granted: Vec<usize>,
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
    pub(crate) granted: Vec<usize>,
    pub(crate) unknown: Vec<usize>,
}

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
        let answers = instances
            .on_all(
                None,
                |server| ops::acquire(server.clone(), hold.clone(), attempt, limit),
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

        let mut fence = None;
        let mut granted = 0;
        let mut refused = 0;
        let mut remaining: Option<Duration> = None;
        let mut failed = 0;
        let mut unreachable = true;
        let mut foreign = None;
        let mut conflict = None;
        let mut conflicts = 0;
        let mut give_back = GiveBack::default();
        let mut place = None;
        for (i, answer) in answers.iter().enumerate() {
            match answer {
                Some(Ok(AcquireReply::Granted { fence: f })) => {
                    granted += 1;
                    fence = fence.max(Some(*f));
                    give_back.granted.push(i);
                }
                Some(Ok(AcquireReply::Held {
                    remaining: Some(r),
                    place: lapses,
                })) => {
                    refused += 1;
                    remaining = Some(remaining.map_or(*r, |m| m.min(*r)));
                    place = lapses.map(|lapses| Place { lapses, sent_at });
                }
                Some(Ok(AcquireReply::Held {
                    remaining: None, ..
                })) => {
                    foreign = Some((
                        hold.keys.lock().to_owned(),
                        "a key with no expiry".to_owned(),
                    ));
                }
                Some(Ok(AcquireReply::Refused(c))) => {
                    conflicts += 1;
                    conflict.get_or_insert_with(|| c.clone());
                }
                Some(Ok(AcquireReply::Foreign { key, found })) => {
                    foreign = Some((key.clone(), found.clone()));
                }
                Some(Err(err)) => {
                    failed += 1;
                    unreachable &= is_unreachable(err);
                    give_back.unknown.push(i);
                }
                None => give_back.unknown.push(i),
            }
        }
        if let (true, Some(fence)) = (quorum.reached(granted), fence) {
            return Ok(Round::Won {
                fence,
                sent_at,
                granted: give_back.granted,
            });
        }
        // A conflict is the lock's state only where a majority says so. Over Redlock a minority
        // can lag behind (a release of this owner's last hold still on its way there) and
        // answer with a conflict that no longer holds: that counts as a refusal.
        if let Some(conflict) = conflict.filter(|_| quorum.reached(conflicts)) {
            self.give_back(shared, hold, give_back).await;
            return Err(Error::Conflict {
                lock: self.name.clone(),
                conflict,
            });
        }
        refused += conflicts;
        if let Some((key, found)) = foreign {
            self.give_back(shared, hold, give_back).await;
            return Err(Error::WrongType {
                lock: self.name.clone(),
                key,
                found,
            });
        }
        if quorum.out_of_reach(failed) {
            let error = instances.failure(&self.name, "acquire", answers, granted, refused);
            return Ok(Round::Failed {
                error,
                unreachable,
                give_back,
            });
        }
        Ok(Round::Contended {
            remaining,
            split: granted > 0,
            give_back,
            // Only one server passes a lock (a place is taken nowhere else).
            place: place.filter(|_| instances.is_single()),
        })
    }
}

fn is_grant(answer: &Answer<AcquireReply>) -> bool {
    matches!(answer, Some(Ok(AcquireReply::Granted { .. })))
}
