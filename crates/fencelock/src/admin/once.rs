//! The run-once records kept under a lock's name ([`Client::once_records`]), found with `SCAN`
//! (never `KEYS`) on every instance.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use crate::client::Client;
use crate::connection::Server;
use crate::error::Result;
use crate::keys;

use super::list::escape_glob;

/// Records read per pipeline.
const READ_COUNT: usize = 500;

/// A record of work done once (see [`crate::once`]), from [`Client::once_records`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OnceRecord {
    /// The once key (`migrations/0042`).
    pub key: String,
    /// The Redis key of the record, `PREFIX:once:{NAME}:KEY`: delete it to have the work done
    /// again.
    pub record: String,
    /// The fence of the run that did the work.
    pub fence: u64,
    /// When the run recorded it, by its own clock.
    pub at: SystemTime,
}

impl Client {
    /// The run-once records of the runs that took turns on the lock `name`
    /// ([`Once::lock`](crate::once::Once::lock); by default a run's lock is named as its key),
    /// sorted by key. One `SCAN` of `PREFIX:once:{NAME}:*` per instance (on Redis Cluster, per
    /// master), then the records read; nothing is changed. Over Redlock, where run-once is
    /// refused, there are none to find.
    ///
    /// ```no_run
    /// # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
    /// for done in client.once_records("migrate").await? {
    ///     println!("{} done with fence {} (redis-cli DEL '{}')", done.key, done.fence, done.record);
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    ///
    /// [`Error::InvalidArgument`](crate::Error::InvalidArgument) for a bad name;
    /// [`Error::Unreachable`](crate::Error::Unreachable),
    /// [`Error::AuthFailed`](crate::Error::AuthFailed),
    /// [`Error::PermissionDenied`](crate::Error::PermissionDenied) or
    /// [`Error::Redis`](crate::Error::Redis) when the (single) server fails;
    /// [`Error::NoQuorum`](crate::Error::NoQuorum) when fewer than a majority of the Redlock
    /// instances answer.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads.
    pub async fn once_records(&self, name: impl Into<String>) -> Result<Vec<OnceRecord>> {
        let name = name.into();
        keys::validate_name(&name)?;
        let instances = &self.shared.instances;
        let start = format!("{}:once:{{{name}}}:", self.shared.prefix);
        let matching = format!("{}*", escape_glob(&start));
        let limit = instances.command_timeout();
        let answers = instances
            .on_all(
                None,
                |server| read_records(server.clone(), start.clone(), matching.clone(), limit),
                |_| false,
            )
            .await;
        let answered = answers.iter().filter(|a| matches!(a, Some(Ok(_)))).count();
        if !instances.quorum().reached(answered) {
            return Err(instances.failure(
                &name,
                "read the run-once records",
                answers,
                answered,
                0,
            ));
        }
        let mut found: BTreeMap<String, OnceRecord> = BTreeMap::new();
        for record in answers.into_iter().flatten().flatten().flatten() {
            match found.get(&record.key) {
                Some(kept) if kept.fence >= record.fence => {}
                _ => {
                    found.insert(record.key.clone(), record);
                }
            }
        }
        Ok(found.into_values().collect())
    }
}

/// The records on one server (on Redis Cluster: on every master) whose keys start with `start`.
async fn read_records(
    server: Server,
    start: String,
    matching: String,
    limit: Duration,
) -> redis::RedisResult<Vec<OnceRecord>> {
    let mut names = Vec::new();
    for node in server.key_holders(limit).await? {
        scan_node(&node, &matching, limit, &mut names).await?;
    }
    let mut records = Vec::new();
    for chunk in names.chunks(READ_COUNT) {
        // Every key shares the hash tag `{NAME}`: one slot, one node. `GET`s in one pipeline,
        // not `MGET`, which the documented ACL rules do not allow (docs/deployments.md). A key
        // that is gone answers nil; one that holds no string is skipped; any other refusal (a
        // permission) is the call's error.
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for record in chunk {
            pipe.get(record);
        }
        let values: Vec<redis::RedisResult<Option<String>>> = server.pipeline(&pipe, limit).await?;
        for (record, value) in chunk.iter().zip(values) {
            let value = match value {
                Ok(value) => value,
                Err(e) if e.code() == Some("WRONGTYPE") => None,
                Err(e) => return Err(e),
            };
            if let Some(parsed) = value.as_deref().and_then(|v| parse(&start, record, v)) {
                records.push(parsed);
            }
        }
    }
    Ok(records)
}

/// A record from its key and value (`<fence>:<ms>`); `None` for anything else under the
/// prefix, such as a run's `:started` mark (its fence alone).
fn parse(start: &str, record: &str, value: &str) -> Option<OnceRecord> {
    let key = record.strip_prefix(start).filter(|k| !k.is_empty())?;
    let (fence, ms) = value.split_once(':')?;
    Some(OnceRecord {
        key: key.to_owned(),
        record: record.to_owned(),
        fence: fence.parse().ok()?,
        at: SystemTime::UNIX_EPOCH + Duration::from_millis(ms.parse().ok()?),
    })
}

/// Adds the keys of one node that match `matching` to `names`, each once.
async fn scan_node(
    server: &Server,
    matching: &str,
    limit: Duration,
    names: &mut Vec<String>,
) -> redis::RedisResult<()> {
    super::list::scan_keys(server, matching, limit, |key| names.push(key)).await?;
    names.sort();
    names.dedup();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_are_read_and_started_marks_skipped() {
        let start = "fencelock:once:{migrate}:";
        let done = parse(start, "fencelock:once:{migrate}:v42", "7:1700000000123");
        assert_eq!(
            done,
            Some(OnceRecord {
                key: "v42".into(),
                record: "fencelock:once:{migrate}:v42".into(),
                fence: 7,
                at: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
            })
        );
        assert_eq!(
            parse(start, "fencelock:once:{migrate}:v42:started", "7"),
            None
        );
        assert_eq!(
            parse(start, "fencelock:once:{migrate}:x", "not:a record"),
            None
        );
        assert_eq!(parse(start, "fencelock:once:{migrate}:", "7:1"), None);
    }
}
