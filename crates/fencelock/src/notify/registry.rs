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
    /// The server confirmed the subscription (and the connection has not dropped since). On
    /// Redis Cluster: a confirmation that names the channel came (see [`confirmed`]), and no
    /// `sunsubscribe` of it since.
    pub(super) subscribed: bool,
    /// On Redis Cluster: the subscription was lost, and not confirmed again since (its waiters
    /// are woken once it is: a release may have been missed meanwhile).
    pub(super) lost: bool,
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

/// A lock that a release passed to a waiter in line: its fence, the server millisecond at which
/// the waiter's place would have lapsed (the waiter matches it against the replies of its tries
/// to know when its lease began at the latest), and the one at which the passed lease ends
/// (`None`: when the place would have lapsed, as a release of protocol 1 without a claim said).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pass {
    pub(crate) fence: u64,
    pub(crate) lapses: u64,
    pub(crate) ends: Option<u64>,
}

/// Whom a release message wakes.
#[derive(Debug, PartialEq)]
pub(super) enum Wake<'a> {
    One,
    /// The waiter with this owner token, what was passed to it, if anything, and the token of
    /// the waiter next in line behind it, if a pass named one.
    Token(&'a [u8], Option<Pass>, Option<&'a [u8]>),
    All,
}

impl<'a> Wake<'a> {
    pub(super) fn of(payload: &'a [u8]) -> Self {
        if payload == WAKE_ONE.as_bytes() {
            Wake::One
        } else if let Some(addressed) = payload.strip_prefix(WAKE_TOKEN.as_bytes()) {
            // `<token>`, or `<token>:<fence>:<lapses>`, then `:<ends>`, then `:<next token>`.
            let mut parts = addressed.splitn(5, |b| *b == b':');
            let token = parts.next().unwrap_or_default();
            let number = |part: Option<&[u8]>| {
                std::str::from_utf8(part?)
                    .ok()
                    .and_then(|s| s.parse::<u64>().ok())
            };
            let (fence, lapses) = (number(parts.next()), number(parts.next()));
            let ends = parts.next().map(|part| number(Some(part)));
            let pass = match (fence, lapses, ends) {
                // A claim that is not a number passes nothing: the waiter tries.
                (Some(_), Some(_), Some(None)) | (None, _, _) | (_, None, _) => None,
                (Some(fence), Some(lapses), ends) => Some(Pass {
                    fence,
                    lapses,
                    ends: ends.flatten(),
                }),
            };
            let behind = parts
                .next()
                .filter(|next| pass.is_some() && !next.is_empty());
            Wake::Token(token, pass, behind)
        } else {
            Wake::All
        }
    }
}

/// What a message addressed to one waiter told it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Addressed {
    /// The lock is passed to it.
    Passed(Pass),
    /// The lock was passed to the waiter ahead of it in line: it tries again at this instant,
    /// when that waiter's claim has run out (unless it was confirmed, or passed on to this one).
    Behind(tokio::time::Instant),
}

/// What wakes one waiter alone: a permit per message addressed to its token, and what the
/// message said, if more than "wake up".
pub(super) struct Personal {
    pub(super) wake: Semaphore,
    pub(super) addressed: Mutex<Option<Addressed>>,
}

impl Default for Personal {
    fn default() -> Self {
        Personal {
            wake: Semaphore::new(0),
            addressed: Mutex::new(None),
        }
    }
}

impl Personal {
    pub(super) fn addressed(&self) -> std::sync::MutexGuard<'_, Option<Addressed>> {
        self.addressed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn wake(&self) {
        if self.wake.available_permits() == 0 {
            self.wake.add_permits(1);
        }
    }
}

pub(super) type Registry = Arc<Mutex<HashMap<String, Channel>>>;

pub(super) fn lock(registry: &Registry) -> std::sync::MutexGuard<'_, HashMap<String, Channel>> {
    registry.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The channel of one waiter: the lock's channel, `:`, the owner token of its request. Release
/// messages addressed to that waiter go there first (`publish_to` in `script/prelude.lua`).
pub(super) fn own_channel(channel: &str, token: &str) -> String {
    format!("{channel}:{token}")
}

/// Hands a message to the payload readers of its channel, and wakes one local waiter of the
/// channel that was released, the one addressed, or all. A message on a waiter's own channel
/// (see [`own_channel`]) is for that waiter alone: it is not heard by payload readers, and it
/// wakes nobody else (the lock's channel carries the same message to them if it must).
pub(super) fn deliver(registry: &Registry, channel: &str, payload: &[u8]) {
    let registry = lock(registry);
    let (entry, only) = match registry.get(channel) {
        Some(entry) => (entry, None),
        None => {
            let Some((entry, token)) = channel
                .rsplit_once(':')
                .and_then(|(lock, token)| Some((registry.get(lock)?, token)))
            else {
                return;
            };
            (entry, Some(token.as_bytes()))
        }
    };
    if only.is_some() {
        if let Wake::Token(token, pass, behind) = Wake::of(payload) {
            let token = Some(token).filter(|t| Some(*t) == only);
            let behind = behind.filter(|t| Some(*t) == only);
            wake_addressed(entry, token, pass, behind);
        }
        return;
    }
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
        Wake::Token(token, pass, behind) => wake_addressed(entry, Some(token), pass, behind),
        Wake::All => entry.generation.send_modify(|g| *g = g.wrapping_add(1)),
    }
}

/// Wakes the waiter with owner token `token` (and tells it what was passed to it), and tells the
/// waiter `behind` (next in line) when to try again.
fn wake_addressed(
    entry: &Channel,
    token: Option<&[u8]>,
    pass: Option<Pass>,
    behind: Option<&[u8]>,
) {
    let waiter = |token: &[u8]| {
        std::str::from_utf8(token)
            .ok()
            .and_then(|token| entry.addressed.get(token))
    };
    if let Some(waiter) = token.and_then(waiter) {
        if let Some(pass) = pass {
            *waiter.addressed() = Some(Addressed::Passed(pass));
        }
        waiter.wake();
    }
    if let Some(waiter) = behind.and_then(waiter) {
        let mut addressed = waiter.addressed();
        // A pass to it that it has not taken yet stays.
        if !matches!(*addressed, Some(Addressed::Passed(_))) {
            *addressed = Some(Addressed::Behind(tokio::time::Instant::now() + BEHIND));
            drop(addressed);
            waiter.wake();
        }
    }
}

/// On Redis Cluster: a confirmation of a sharded subscription that names `channel` came (the
/// reply to an `SSUBSCRIBE`, ours or the `redis` crate's own after a reconnection, whichever
/// command it was taken as the reply to). The channel counts as subscribed from here on; its
/// payload readers are told, and after a loss its waiters are woken (a release may have been
/// missed). A channel nobody registered (a waiter's own) is left alone.
pub(super) fn confirmed(registry: &Registry, channel: &str) {
    let mut registry = lock(registry);
    let Some(entry) = registry.get_mut(channel) else {
        return;
    };
    if entry.subscribed {
        return;
    }
    entry.subscribed = true;
    entry.tell(Heard::Subscribed);
    if std::mem::take(&mut entry.lost) {
        entry.generation.send_modify(|g| *g = g.wrapping_add(1));
    }
}

/// On Redis Cluster: `channel` is not subscribed any more (an `sunsubscribe` of it: a node that
/// stopped serving its slot, or our own unsubscription). Its payload readers are told of the
/// gap if it was subscribed. Whether someone here still listens on it, and it must be
/// subscribed again.
pub(super) fn unsubscribed(registry: &Registry, channel: &str) -> bool {
    let mut registry = lock(registry);
    let Some(entry) = registry.get_mut(channel) else {
        return false;
    };
    if std::mem::take(&mut entry.subscribed) {
        entry.lost = true;
        entry.tell(Heard::Lost);
    }
    entry.subscriptions > 0 || entry.heard.is_some()
}

/// On Redis Cluster: a node's connection dropped, and which channels it served is not known:
/// every channel counts as lost (see [`unsubscribed`]). The channels someone here still
/// listens on, to subscribe again.
pub(super) fn all_unsubscribed(registry: &Registry) -> Vec<String> {
    let mut registry = lock(registry);
    let mut listened = Vec::new();
    for (channel, entry) in registry.iter_mut() {
        if std::mem::take(&mut entry.subscribed) {
            entry.lost = true;
            entry.tell(Heard::Lost);
        }
        if entry.subscriptions > 0 || entry.heard.is_some() {
            listened.push(channel.clone());
        }
    }
    listened
}

/// Wakes every waiter of every channel (a release may have been missed).
pub(super) fn wake_everyone(registry: &Registry) {
    for entry in lock(registry).values() {
        entry.generation.send_modify(|g| *g = g.wrapping_add(1));
    }
}

use crate::script::{PASS_CLAIM, WAKE_ONE, WAKE_TO as WAKE_TOKEN};

/// When the waiter behind a pass tries again: once the claim has run out, measured from the
/// message (sent after the claim began), with room for the clocks' rates to differ.
const BEHIND: Duration = PASS_CLAIM.saturating_add(Duration::from_millis(15));

#[cfg(test)]
mod tests {
    use super::{Pass, Wake};
    use crate::script::{WAKE_ALL, WAKE_ONE};

    #[test]
    fn release_payloads_say_whom_to_wake() {
        assert_eq!(Wake::of(WAKE_ONE.as_bytes()), Wake::One);
        assert_eq!(Wake::of(b"to:ab12"), Wake::Token(b"ab12", None, None));
        let pass = |ends| Pass {
            fence: 1_764_000_000_123_456,
            lapses: 1_764_000_005_123,
            ends,
        };
        // Protocol 1 without a claim: the lease ends when the place lapses.
        assert_eq!(
            Wake::of(b"to:ab12:1764000000123456:1764000005123"),
            Wake::Token(b"ab12", Some(pass(None)), None)
        );
        assert_eq!(
            Wake::of(b"to:ab12:1764000000123456:1764000005123:1764000001000"),
            Wake::Token(b"ab12", Some(pass(Some(1_764_000_001_000))), None)
        );
        assert_eq!(
            Wake::of(b"to:ab12:1764000000123456:1764000005123:1764000001000:cd34"),
            Wake::Token(
                b"ab12",
                Some(pass(Some(1_764_000_001_000))),
                Some(&b"cd34"[..])
            )
        );
        // A malformed pass wakes the waiter, and passes nothing (nor names the next).
        assert_eq!(Wake::of(b"to:ab12:x:5"), Wake::Token(b"ab12", None, None));
        assert_eq!(Wake::of(b"to:ab12:7"), Wake::Token(b"ab12", None, None));
        assert_eq!(
            Wake::of(b"to:ab12:7:8:x:cd34"),
            Wake::Token(b"ab12", None, None)
        );
        assert_eq!(Wake::of(WAKE_ALL.as_bytes()), Wake::All);
        assert_eq!(Wake::of(b""), Wake::All);
    }
}
