//! Where a lock lives in Redis: key names, the release channel, and name validation.
//!
//! For lock `NAME` under prefix `P` (default `fencelock`):
//! - `P:{NAME}` holds the lock: `<owner token>:<fence>`, with the lease as its TTL;
//! - `P:{NAME}:fence` holds the last fence handed out for `NAME`; it never expires;
//! - `P:{NAME}:released` is the channel a release is published on;
//! - for a plain lock on one server, `P:{NAME}:waiters` holds the waiters a release may pass
//!   the lock to (token -> when the place lapses, in server milliseconds); the plain lock's
//!   scripts name it (and the fence key and channel) from the lock key themselves;
//! - for a fair lock, `P:{NAME}:queue` and `P:{NAME}:alive` hold its waiters.
//!
//! The lock key is a string (`<token>:<fence>`) for plain and fair locks, and a hash recording
//! its kind for reentrant locks, read-write locks and semaphores.
//!
//! The braces are a Redis Cluster hash tag: every key of one lock lives in one slot.

use crate::error::{Error, Result};

/// The longest lock name accepted, in bytes.
pub const MAX_NAME_LEN: usize = 1024;

/// The Redis names of one lock.
#[derive(Debug, Clone)]
pub(crate) struct LockKeys {
    /// `P:{N}:fenceP:{N}:released`: the lock key, the fence key and the channel in one string
    /// (one allocation per acquisition instead of three).
    all: String,
    /// Where the lock key ends (`P:{N}`).
    lock_end: usize,
    /// Where the fence key ends (`P:{N}:fence`).
    fence_end: usize,
}

impl LockKeys {
    pub(crate) fn new(prefix: &str, name: &str) -> Self {
        let mut all = String::with_capacity(2 * (prefix.len() + name.len() + 3) + 15);
        for part in [prefix, ":{", name, "}"] {
            all.push_str(part);
        }
        let lock_end = all.len();
        all.push_str(":fence");
        let fence_end = all.len();
        all.extend_from_within(..lock_end);
        all.push_str(":released");
        LockKeys {
            all,
            lock_end,
            fence_end,
        }
    }

    /// The lock key: `P:{N}`.
    pub(crate) fn lock(&self) -> &str {
        self.all.get(..self.lock_end).unwrap_or_default()
    }

    /// The fence key: `P:{N}:fence`.
    pub(crate) fn fence(&self) -> &str {
        self.all.get(..self.fence_end).unwrap_or_default()
    }

    /// The release channel: `P:{N}:released`.
    pub(crate) fn channel(&self) -> &str {
        self.all.get(self.fence_end..).unwrap_or_default()
    }

    /// A fair lock's queue: waiter token -> ticket (arrival order, the server ms it arrived at).
    pub(crate) fn queue(&self) -> String {
        format!("{}:queue", self.lock())
    }

    /// A fair lock's waiter liveness: waiter token -> when its place lapses.
    pub(crate) fn alive(&self) -> String {
        format!("{}:alive", self.lock())
    }

    /// A plain lock's line of waiters: waiter token -> when its place lapses (its scripts name
    /// it from the lock key; the operator's inspection declares it).
    pub(crate) fn waiters(&self) -> String {
        format!("{}:waiters", self.lock())
    }
}

/// Checks a lock name: not empty, not too long, no braces (they would break the hash tag that
/// keeps a lock's keys in one cluster slot), no control characters.
pub(crate) fn validate_name(name: &str) -> Result<()> {
    if name.is_empty() {
        return Err(Error::invalid(name, "the lock name is empty"));
    }
    if name.len() > MAX_NAME_LEN {
        return Err(Error::invalid(
            name,
            format!(
                "the lock name is {} bytes long; at most {MAX_NAME_LEN} are allowed",
                name.len()
            ),
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| *c == '{' || *c == '}' || c.is_control())
    {
        return Err(Error::invalid(
            name,
            format!("the lock name contains {c:?}; braces and control characters are not allowed"),
        ));
    }
    Ok(())
}

/// Checks a key prefix with the same rules as a name (it may not be empty either), and without
/// a trailing `:`: the colon between the prefix and a lock's name is added (`PREFIX:{NAME}`), so
/// a prefix spelled with it would make keys (`fencelock::{NAME}`) that no other holder uses.
pub(crate) fn validate_prefix(prefix: &str) -> Result<()> {
    validate_name(prefix).map_err(|e| Error::Config {
        reason: format!("bad key prefix {prefix:?}: {e}"),
    })?;
    if let Some(bare) = prefix.strip_suffix(':') {
        return Err(Error::Config {
            reason: format!(
                "bad key prefix {prefix:?}: it ends with ':', which fencelock adds itself \
                 (keys are PREFIX:{{NAME}}); write {bare:?}"
            ),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_share_one_hash_tag() {
        let k = LockKeys::new("fencelock", "jobs/nightly");
        assert_eq!(k.lock(), "fencelock:{jobs/nightly}");
        assert_eq!(k.fence(), "fencelock:{jobs/nightly}:fence");
        assert_eq!(k.channel(), "fencelock:{jobs/nightly}:released");
        assert_eq!(k.queue(), "fencelock:{jobs/nightly}:queue");
        let short = LockKeys::new("p", "n");
        assert_eq!(
            (short.lock(), short.fence(), short.channel()),
            ("p:{n}", "p:{n}:fence", "p:{n}:released")
        );
    }

    #[test]
    fn bad_names_are_refused_with_the_reason() {
        assert!(validate_name("ok-name.1").is_ok());
        let e = validate_name("").unwrap_err().to_string();
        assert!(e.contains("empty"), "{e}");
        let e = validate_name("a{b").unwrap_err().to_string();
        assert!(e.contains("\"a{b\"") && e.contains("braces"), "{e}");
        assert!(validate_name("a\nb").is_err());
        assert!(validate_name(&"x".repeat(MAX_NAME_LEN + 1)).is_err());
        assert!(validate_prefix("").is_err());
    }
}
