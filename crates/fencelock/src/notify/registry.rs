//! The waiters of each channel on this client, and what a release message says about whom to
//! wake.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::{Semaphore, broadcast, watch};

/// The waiters of one channel on this client.
pub(super) struct Channel {
    /// Wakes one waiter per `one` message: a count of pending wake-ups (never more than there
    /// are waiters), so that two releases in quick succession wake two waiters.
    pub(super) wake_one: Arc<Semaphore>,
    /// Bumped to wake every waiter.
    pub(super) generation: watch::Sender<u64>,
    /// The waiters that can be woken by their request's owner token.
    pub(super) addressed: HashMap<String, Arc<Personal>>,
    pub(super) subscriptions: usize,
    /// The server confirmed the subscription (and the connection has not dropped since).
    pub(super) subscribed: bool,
    /// Every message of the channel and every loss of its subscription, for the local
    /// subscribers that read payloads (made by the first of them: waiters never need it).
    pub(super) heard: Option<broadcast::Sender<Heard>>,
}

/// What a subscriber that reads payloads hears on a channel: each message, in the order the
/// server sent them; that the subscription was lost (messages may be missed from here on); that
/// it is subscribed again (nothing is missed from here on).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Heard {
    Message(Arc<[u8]>),
    Lost,
    Subscribed,
}

/// How many messages a payload subscriber may fall behind before it is told that it missed
/// some (a lagging receiver).
pub(super) const HEARD_BACKLOG: usize = 256;

impl Channel {
    /// Tells the payload subscribers, if any.
    pub(super) fn tell(&self, heard: Heard) {
        if let Some(sender) = &self.heard {
            // No receiver left: nobody to tell.
            let _ = sender.send(heard);
        }
    }
}

/// How long a channel stays subscribed after its last local waiter went away.
pub(super) const LINGER: Duration = Duration::from_secs(1);

/// A lock that a release passed to a waiter in line: its fence, and the server millisecond at
/// which the waiter's place would have lapsed (the passed lease ends then; the waiter matches it
/// against the replies of its tries to know when its lease began at the latest).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pass {
    pub(crate) fence: u64,
    pub(crate) lapses: u64,
}

/// Whom a release message wakes.
#[derive(Debug, PartialEq)]
pub(super) enum Wake<'a> {
    One,
    /// The waiter with this owner token, and what was passed to it, if anything.
    Token(&'a [u8], Option<Pass>),
    All,
}

impl<'a> Wake<'a> {
    pub(super) fn of(payload: &'a [u8]) -> Self {
        if payload == WAKE_ONE.as_bytes() {
            Wake::One
        } else if let Some(addressed) = payload.strip_prefix(WAKE_TOKEN.as_bytes()) {
            let mut parts = addressed.splitn(3, |b| *b == b':');
            let token = parts.next().unwrap_or_default();
            let number = |part: Option<&[u8]>| {
                std::str::from_utf8(part?)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
            };
            let pass = match (number(parts.next()), number(parts.next())) {
                (Some(fence), Some(lapses)) => Some(Pass { fence, lapses }),
                _ => None,
            };
            Wake::Token(token, pass)
        } else {
            Wake::All
        }
    }
}

/// What wakes one waiter alone: a permit per message addressed to its token, and the lock
/// passed to it, if the message said so.
pub(super) struct Personal {
    pub(super) wake: Semaphore,
    pub(super) passed: Mutex<Option<Pass>>,
}

impl Default for Personal {
    fn default() -> Self {
        Personal {
            wake: Semaphore::new(0),
            passed: Mutex::new(None),
        }
    }
}

impl Personal {
    pub(super) fn passed(&self) -> std::sync::MutexGuard<'_, Option<Pass>> {
        self.passed.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(super) type Registry = Arc<Mutex<HashMap<String, Channel>>>;

pub(super) fn lock(registry: &Registry) -> std::sync::MutexGuard<'_, HashMap<String, Channel>> {
    registry.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Hands a message to the payload readers of its channel, and wakes one local waiter of the
/// channel that was released, the one addressed, or all.
pub(super) fn deliver(registry: &Registry, channel: &str, payload: &[u8]) {
    let registry = lock(registry);
    let Some(entry) = registry.get(channel) else {
        return;
    };
    if let Some(heard) = &entry.heard {
        // Copied only for a payload reader (nobody left to hear it: nothing to do).
        let _ = heard.send(Heard::Message(Arc::from(payload)));
    }
    match Wake::of(payload) {
        Wake::One => {
            if entry.wake_one.available_permits() < entry.subscriptions {
                entry.wake_one.add_permits(1);
            }
        }
        Wake::Token(token, pass) => {
            let waiter = std::str::from_utf8(token)
                .ok()
                .and_then(|token| entry.addressed.get(token));
            if let Some(waiter) = waiter {
                if pass.is_some() {
                    *waiter.passed() = pass;
                }
                if waiter.wake.available_permits() == 0 {
                    waiter.wake.add_permits(1);
                }
            }
        }
        Wake::All => entry.generation.send_modify(|g| *g = g.wrapping_add(1)),
    }
}

/// Wakes every waiter of every channel (a release may have been missed).
pub(super) fn wake_everyone(registry: &Registry) {
    for entry in lock(registry).values() {
        entry.generation.send_modify(|g| *g = g.wrapping_add(1));
    }
}

use crate::script::{WAKE_ONE, WAKE_TO as WAKE_TOKEN};

#[cfg(test)]
mod tests {
    use super::{Pass, Wake};
    use crate::script::{WAKE_ALL, WAKE_ONE};

    #[test]
    fn release_payloads_say_whom_to_wake() {
        assert_eq!(Wake::of(WAKE_ONE.as_bytes()), Wake::One);
        assert_eq!(Wake::of(b"to:ab12"), Wake::Token(b"ab12", None));
        assert_eq!(
            Wake::of(b"to:ab12:1764000000123456:1764000005123"),
            Wake::Token(
                b"ab12",
                Some(Pass {
                    fence: 1_764_000_000_123_456,
                    lapses: 1_764_000_005_123
                })
            )
        );
        // A malformed pass wakes the waiter, and passes nothing.
        assert_eq!(Wake::of(b"to:ab12:x:5"), Wake::Token(b"ab12", None));
        assert_eq!(Wake::of(b"to:ab12:7"), Wake::Token(b"ab12", None));
        assert_eq!(Wake::of(WAKE_ALL.as_bytes()), Wake::All);
        assert_eq!(Wake::of(b""), Wake::All);
    }
}
