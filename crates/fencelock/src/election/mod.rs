//! Leader election on the lock machinery: one leader at a time per election, with a term that
//! is its lock's fence.
//!
//! The leadership of election `NAME` is the plain lock `NAME` ([`Client::lock`]): the same
//! value, lease, renewal, lost signal and safety model. Its **term** is that lock's fence,
//! strictly larger than every earlier leader's, so a resource written by the leader can refuse
//! a deposed one ([`crate::fenced`], `postgres`). The leader's value, term and the time its term
//! began are written beside the lock (`PREFIX:{NAME}:leader`) in the same script as the grant,
//! and afterwards (a proclaim) only while the lock is held with that term, so a deposed leader
//! cannot overwrite a newer one; they are announced on `PREFIX:{NAME}:announce`. A resignation
//! is one script too: the announcement, the record deleted, the lock released (docs/PROTOCOL.md
//! has the layout).
//!
//! ```no_run
//! # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
//! let election = client.election("scheduler");
//! let mut leadership = election.campaign("node-a:8080").await?; // waits to become leader
//! println!("leading with term {}", leadership.term());
//! tokio::select! {
//!     reason = leadership.lost() => eprintln!("deposed: {reason}"),
//!     () = lead(leadership.term()) => {}
//! }
//! leadership.resign().await?;
//! # Ok(()) }
//! # async fn lead(_term: u64) {}
//! ```
//!
//! Deployments: one server, Redis Cluster (the keys and the channel share the name's hash tag;
//! announcements are sharded messages) and Sentinel. Not over Redlock: there every instance
//! would hold a record of its own, and deciding the leader and the order of its changes over a
//! majority is not implemented; every call then fails with [`Error::Unsupported`] before
//! anything is sent.
//!
//! - `mod.rs`: [`Election`], [`Leader`], reading the leader and the scripts' calls;
//! - `protocol.rs`: the election's lock as the engine runs it (`campaign.lua`, `step_down.lua`);
//! - `campaign.rs`: [`Campaign`] and [`Leadership`];
//! - `observe.rs`: [`Observe`], the stream of [`Observation`]s;
//! - `blocking.rs`: the blocking twins (`crate::blocking::Election`, ...).

pub(crate) mod blocking;
mod campaign;
mod observe;
pub(crate) mod protocol;

use std::sync::{Arc, LazyLock};
use std::time::{Duration, SystemTime};

use redis::Value;

pub use campaign::{Campaign, Leadership};
pub use observe::{Observation, Observe};

use crate::client::Client;
use crate::connection::Server;
use crate::error::{Error, Result};
use crate::keys;
use crate::script::reply::{as_string, as_u64, describe_type, unexpected};
use crate::script::{Arg, Args, Call, Lua, lua};

pub(crate) static ANNOUNCE: LazyLock<Lua> = lua!("leadership.lua", "record.lua", "announce.lua");
pub(crate) static LEADER: LazyLock<Lua> = lua!("leadership.lua", "leader.lua");

/// One election (see [`Client::election`]): campaign for it, read or follow its leader. Cheap
/// to clone; it sends nothing until asked.
#[derive(Debug, Clone)]
pub struct Election {
    client: Client,
    name: Arc<str>,
    /// `PREFIX:{NAME}`, `PREFIX:{NAME}:leader` and the channel `PREFIX:{NAME}:announce`.
    lock_key: String,
    record_key: String,
    channel: String,
}

/// The leader of an election, as its record says (see [`Election::leader`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Leader {
    /// What the leader announced about itself (an address, a node name), as given to
    /// [`Election::campaign`] or [`Leadership::proclaim`].
    pub value: String,
    /// The leader's term: its lock's fence, strictly larger than every earlier leader's.
    pub term: u64,
    /// When the term began, by the server's clock (a proclaim does not move it).
    pub since: SystemTime,
}

impl Client {
    /// The election `name`. Its leadership is the plain lock `name` (see [`crate::election`]):
    /// do not use the name as a lock of another kind, nor as a plain lock outside the
    /// election. Like every entry point it sends nothing and cannot fail: a bad name is
    /// reported by the first call.
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// if let Some(leader) = client.election("scheduler").leader().await? {
    ///     println!("{} leads with term {}", leader.value, leader.term);
    /// }
    /// # Ok(()) }
    /// ```
    pub fn election(&self, name: impl Into<String>) -> Election {
        let name: String = name.into();
        let lock_key = self.shared.keys(&name).lock().to_owned();
        Election {
            client: self.clone(),
            record_key: format!("{lock_key}:leader"),
            channel: format!("{lock_key}:announce"),
            lock_key,
            name: Arc::from(name),
        }
    }
}

impl Election {
    /// The election's name (also its lock's).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A campaign to lead this election with `value` (what [`leader`](Self::leader) and the
    /// observers get to see). Set its options, then await it (or call
    /// [`Campaign::campaign`]).
    pub fn campaign(&self, value: impl Into<String>) -> Campaign {
        Campaign::new(self.clone(), value.into())
    }

    /// The current leader: the record beside the election's lock, if the lock is held with the
    /// record's term. `None` when nobody leads, also for a leader whose lease ran out without
    /// resigning. A campaign writes the record in the same step as its grant: while a leader
    /// holds its term, this never says `None`.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] over Redlock, [`Error::InvalidArgument`] (a bad name),
    /// [`Error::WrongType`] (a key of the election holds something else, e.g. the name is used
    /// as another kind of lock), [`Error::Unreachable`], [`Error::AuthFailed`],
    /// [`Error::PermissionDenied`], [`Error::Redis`].
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads.
    pub async fn leader(&self) -> Result<Option<Leader>> {
        Ok(self.read().await?.map(|(leader, _)| leader))
    }

    /// The current leader and what is left of its lease (`None` for a lock without expiry).
    async fn read(&self) -> Result<Option<(Leader, Option<Duration>)>> {
        let server = self.server()?;
        let call = Call::new(&LEADER, &[&self.lock_key, &self.record_key], Args::new());
        let reply: Vec<Value> = self.run(&server, &call, "leader").await?;
        match reply.as_slice() {
            [Value::Int(0)] => Ok(None),
            [Value::Int(1), term, since, value, rest @ ..] => {
                let leader = (|| {
                    Ok::<_, redis::RedisError>(Leader {
                        term: as_u64(term)?,
                        since: since_of(as_u64(since)?),
                        value: as_string(value)?,
                    })
                })();
                // (A record read by an earlier revision's script has no lease: none is known.)
                let lease = match rest {
                    [Value::Int(ms)] => u64::try_from(*ms).ok().map(Duration::from_millis),
                    _ => None,
                };
                leader
                    .map(|leader| Some((leader, lease)))
                    .map_err(|e| server.error(&self.name, "leader", e))
            }
            _ => Err(self.refused(&server, "leader", &reply)),
        }
    }

    /// The one server (or cluster, or Sentinel master) the election lives on, after checking
    /// the name.
    fn server(&self) -> Result<Server> {
        keys::validate_name(&self.name)?;
        match self.client.shared.instances.servers() {
            [server] => Ok(server.clone()),
            _ => Err(Error::Unsupported {
                lock: self.name.to_string(),
                reason: format!(
                    "election {:?}: leader election needs one Redis server, a Redis Cluster or \
                     a Sentinel master; over Redlock's independent instances each would keep a \
                     leader record of its own, and deciding the leader over a majority is not \
                     implemented",
                    self.name
                ),
            }),
        }
    }

    /// The time limit of one call.
    fn timeout(&self) -> Duration {
        self.client.shared.instances.command_timeout()
    }

    async fn run(
        &self,
        server: &Server,
        call: &Call<'_>,
        command: &'static str,
    ) -> Result<Vec<Value>> {
        server
            .run_script(call, self.timeout())
            .await
            .map_err(|e| server.error(&self.name, command, e))
    }

    /// Writes and announces the leader `value` of `term`, if the lock is held with that term.
    /// Returns when the term began.
    async fn announce(&self, term: u64, value: &str) -> Result<SystemTime> {
        let server = self.server()?;
        let mut args = Args::new();
        args.push(Arg::Int(term));
        args.push(Arg::Str(value));
        let call = Call::new(&ANNOUNCE, &[&self.lock_key, &self.record_key], args);
        let reply = self.run(&server, &call, "announce").await?;
        match reply.as_slice() {
            [Value::Int(1), since] => as_u64(since)
                .map(since_of)
                .map_err(|e| server.error(&self.name, "announce", e)),
            [Value::Int(0), current] => Err(self.not_leader(term, current)),
            _ => Err(self.refused(&server, "announce", &reply)),
        }
    }

    fn not_leader(&self, term: u64, current: &Value) -> Error {
        Error::NotLeader {
            election: self.name.to_string(),
            term,
            current: as_u64(current).ok(),
        }
    }

    /// The error for a foreign key (`{-1, key, type}`) or a reply no script gives.
    fn refused(&self, server: &Server, command: &'static str, reply: &[Value]) -> Error {
        if let [Value::Int(-1), key, found] = reply
            && let (Ok(key), Ok(found)) = (as_string(key), as_string(found))
        {
            return Error::WrongType {
                lock: self.name.to_string(),
                key,
                found: describe_type(&found),
            };
        }
        server.error(&self.name, command, unexpected(command, reply))
    }
}

/// A server millisecond as a time.
fn since_of(ms: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_millis(ms)
}

/// What an announcement on the election's channel says (docs/PROTOCOL.md): a leader (elected,
/// or proclaiming a new value), or the resignation of a term.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Announcement {
    Leader(Leader),
    Resigned(u64),
}

impl Announcement {
    /// `leader:<term>:<since ms>:<value>` or `resigned:<term>`; `None` for anything else.
    fn parse(payload: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(payload).ok()?;
        if let Some(term) = text.strip_prefix("resigned:") {
            return term.parse().ok().map(Announcement::Resigned);
        }
        let mut parts = text.strip_prefix("leader:")?.splitn(3, ':');
        let term = parts.next()?.parse().ok()?;
        let since = since_of(parts.next()?.parse().ok()?);
        let value = parts.next()?.to_owned();
        Some(Announcement::Leader(Leader { value, term, since }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn announcements_parse_and_anything_else_is_ignored() {
        let leader = Announcement::parse(b"leader:17:1764000000123:node:a:1");
        assert_eq!(
            leader,
            Some(Announcement::Leader(Leader {
                value: "node:a:1".into(),
                term: 17,
                since: since_of(1_764_000_000_123),
            }))
        );
        assert_eq!(
            Announcement::parse(b"leader:17:5:"),
            Some(Announcement::Leader(Leader {
                value: String::new(),
                term: 17,
                since: since_of(5),
            }))
        );
        assert_eq!(
            Announcement::parse(b"resigned:17"),
            Some(Announcement::Resigned(17))
        );
        for junk in [
            &b"one"[..],
            b"leader:x:5:v",
            b"leader:17",
            b"resigned:",
            b"\xff",
        ] {
            assert_eq!(Announcement::parse(junk), None);
        }
    }
}
