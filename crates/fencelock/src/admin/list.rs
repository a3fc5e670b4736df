//! Finding the held locks: `SCAN` (never `KEYS`, which blocks the server) on every instance for
//! the lock keys whose name matches a pattern, then an inspection of each name found.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::client::Client;
use crate::connection::Server;
use crate::error::{Error, Result};

use super::LockInfo;

/// Keys asked for per `SCAN` call.
const SCAN_COUNT: usize = 1000;
/// At most this many `SCAN` calls per server (a bound far above what any keyspace needs).
const MAX_SCAN_CALLS: usize = 1_000_000;

/// What [`Client::list`] found.
#[derive(Debug)]
#[non_exhaustive]
pub struct Listing {
    /// The locks held (over Redlock: by one owner on a majority), sorted by name.
    pub locks: Vec<LockInfo>,
    /// Names whose keys matched but that are not fencelock locks (a key holds something
    /// fencelock did not put there), each with the error that says what was found.
    pub skipped: Vec<Error>,
    /// Over Redlock, the instances that did not answer while a majority did, as
    /// `host:port: reason`; the list comes from the others.
    pub unanswered: Vec<String>,
}

impl Client {
    /// The locks that are held whose name matches `pattern`, a Redis glob on the lock name
    /// (`*` any characters, `?` one, `[abc]` one of them, `\` escapes the next character).
    /// Keys are found with `SCAN` on every instance (never `KEYS`); nothing is changed.
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// for lock in client.list("reports/*").await?.locks {
    ///     println!("{} held, last fence {:?}", lock.name, lock.last_fence);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::Unreachable`], [`Error::AuthFailed`], [`Error::PermissionDenied`] or
    /// [`Error::Redis`] when the (single) server fails, [`Error::NoQuorum`] when fewer than a
    /// majority of the Redlock instances answer; the errors of [`Client::inspect`] for a name
    /// found.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads.
    pub async fn list(&self, pattern: &str) -> Result<Listing> {
        let shared = &self.shared;
        let instances = &shared.instances;
        let key_start = format!("{}:{{", shared.prefix);
        let matching = format!("{}{pattern}}}", escape_glob(&key_start));
        let limit = instances.command_timeout();
        let answers = instances
            .on_all(
                None,
                |server| scan(server.clone(), key_start.clone(), matching.clone(), limit),
                |_| false,
            )
            .await;
        let answered = answers.iter().filter(|a| matches!(a, Some(Ok(_)))).count();
        if !instances.quorum().reached(answered) {
            return Err(instances.failure(pattern, "list", answers, answered, 0));
        }
        let mut names = BTreeSet::new();
        let mut unanswered = Vec::new();
        for (server, answer) in instances.servers().iter().zip(answers) {
            match answer {
                Some(Ok(found)) => names.extend(found),
                Some(Err(err)) => unanswered.push(format!("{}: {err}", server.addr)),
                None => unanswered.push(format!("{}: no answer", server.addr)),
            }
        }
        let mut listing = Listing {
            locks: Vec::new(),
            skipped: Vec::new(),
            unanswered,
        };
        for name in names {
            match self.inspect(&name).await {
                Ok(info) if info.is_held() => listing.locks.push(info),
                Ok(_) => {}
                // Not a fencelock lock, or a name the library refuses: not ours to list.
                Err(err @ (Error::WrongType { .. } | Error::InvalidArgument { .. })) => {
                    listing.skipped.push(err);
                }
                Err(err) => return Err(err),
            }
        }
        Ok(listing)
    }
}

/// The lock names on one server (on Redis Cluster: on every master) whose keys match
/// `matching`, by `SCAN`.
async fn scan(
    server: Server,
    key_start: String,
    matching: String,
    limit: Duration,
) -> redis::RedisResult<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for node in server.key_holders(limit).await? {
        scan_node(&node, &key_start, &matching, limit, &mut names).await?;
    }
    Ok(names)
}

/// Adds the matching lock names of one node to `names`.
async fn scan_node(
    server: &Server,
    key_start: &str,
    matching: &str,
    limit: Duration,
    names: &mut BTreeSet<String>,
) -> redis::RedisResult<()> {
    scan_keys(server, matching, limit, |key| {
        // Lock names are UTF-8 without braces; anything else is not a fencelock lock key.
        if let Some(name) = key
            .strip_prefix(key_start)
            .and_then(|rest| rest.strip_suffix('}'))
            && !name.is_empty()
            && !name.contains(['{', '}'])
        {
            names.insert(name.to_owned());
        }
    })
    .await
}

/// Every key of one node that matches the glob `matching` (UTF-8 keys only), to `each`: `SCAN`
/// to its end, `SCAN_COUNT` at a time (a key may come more than once).
pub(super) async fn scan_keys(
    server: &Server,
    matching: &str,
    limit: Duration,
    mut each: impl FnMut(String),
) -> redis::RedisResult<()> {
    let mut cursor: u64 = 0;
    for _ in 0..MAX_SCAN_CALLS {
        let mut command = redis::cmd("SCAN");
        command
            .arg(cursor)
            .arg("MATCH")
            .arg(matching)
            .arg("COUNT")
            .arg(SCAN_COUNT);
        let (next, keys): (u64, Vec<Vec<u8>>) = server.query(&command, limit).await?;
        for key in keys {
            if let Ok(key) = String::from_utf8(key) {
                each(key);
            }
        }
        if next == 0 {
            return Ok(());
        }
        cursor = next;
    }
    Err(redis::RedisError::from((
        redis::ErrorKind::Client,
        "SCAN did not finish",
        format!("after {MAX_SCAN_CALLS} calls"),
    )))
}

/// `text` with the glob's special characters escaped, so that it matches itself.
pub(super) fn escape_glob(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            escaped.push('\\');
        }
        escaped.push(c);
    }
    escaped
}

#[cfg(test)]
mod tests {
    use super::escape_glob;

    #[test]
    fn glob_characters_in_the_prefix_match_literally() {
        assert_eq!(escape_glob("a*b?[c]\\:{"), "a\\*b\\?\\[c\\]\\\\:{");
    }
}
