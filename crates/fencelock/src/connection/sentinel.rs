//! Sentinel: the master that a set of sentinels names, followed across failovers.
//!
//! The `redis` crate resolves the master once and stays on that connection. fencelock asks the
//! sentinels again whenever the master it follows answers `READONLY` (it was demoted) or cannot
//! be reached, and when its release-notification connection drops (Sentinel closes the normal
//! and pub/sub clients of a demoted master for this reason). An operation that failed that way
//! is sent once more, to the master found. Every fencelock operation is safe to repeat: an
//! acquire by the same owner token is granted once, and a release or renewal checks the token.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::ConnectionManager;
use redis::{IntoConnectionInfo, RedisError, RedisResult};
use tokio::sync::watch;

use super::errors::{closed, is_master_gone, missing_permission};
use super::{manager_config, within};

/// The sentinels of one master, and how to reach the master and its replicas (credentials,
/// TLS), which may differ from how the sentinels are reached.
pub(crate) struct SentinelSet {
    pub(crate) sentinels: Vec<redis::Client>,
    pub(crate) master: String,
    /// Credentials, database and protocol for the data nodes.
    pub(crate) node: redis::RedisConnectionInfo,
    pub(crate) tls: bool,
    pub(crate) certs: Option<super::Certificates>,
}

impl SentinelSet {
    /// `master NAME (sentinels a:1, b:2)`.
    pub(crate) fn describe(&self) -> String {
        let sentinels: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| s.get_connection_info().addr().to_string())
            .collect();
        format!(
            "master {} (sentinels {})",
            self.master,
            sentinels.join(", ")
        )
    }

    /// Asks each sentinel in turn for the master's address, and checks that the server there
    /// says it is a master (a sentinel may not have seen a failover yet).
    async fn resolve(&self, limit: Duration) -> RedisResult<(redis::Client, String)> {
        let mut last = None;
        for sentinel in &self.sentinels {
            let asked = within(limit, async {
                let mut conn = sentinel.get_multiplexed_async_connection().await?;
                redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&self.master)
                    .query_async::<Option<(String, u16)>>(&mut conn)
                    .await
            })
            .await;
            let (host, port) = match asked {
                Ok(Some(found)) => found,
                Ok(None) => {
                    last = Some(RedisError::from((
                        redis::ErrorKind::Client,
                        "unknown master",
                        format!(
                            "{} does not monitor a master named {:?}",
                            sentinel.get_connection_info().addr(),
                            self.master
                        ),
                    )));
                    continue;
                }
                Err(err) => {
                    last = Some(err);
                    continue;
                }
            };
            let addr = format!("{host}:{port}");
            let client = self.node_client(host, port)?;
            match within(limit, says_master(&client)).await {
                Ok(true) => return Ok((client, addr)),
                Ok(false) => {
                    last = Some(RedisError::from((
                        redis::ErrorKind::Client,
                        "not a master",
                        format!("the sentinels name {addr}, which is not a master (yet)"),
                    )));
                }
                Err(err) => last = Some(err),
            }
        }
        Err(last.unwrap_or_else(|| {
            RedisError::from((redis::ErrorKind::Client, "no sentinel was given"))
        }))
    }

    fn node_client(&self, host: String, port: u16) -> RedisResult<redis::Client> {
        let addr = if self.tls {
            redis::ConnectionAddr::TcpTls {
                host,
                port,
                insecure: false,
                tls_params: None,
            }
        } else {
            redis::ConnectionAddr::Tcp(host, port)
        };
        let info = addr
            .into_connection_info()?
            .set_redis_settings(self.node.clone());
        match &self.certs {
            #[cfg(any(feature = "tls-rustls", feature = "tls-native-tls"))]
            Some(certs) => redis::Client::build_with_tls(info, certs.clone()),
            #[cfg(not(any(feature = "tls-rustls", feature = "tls-native-tls")))]
            Some(never) => match *never {},
            None => redis::Client::open(info),
        }
    }
}

/// Whether the server says it is a master (`ROLE`). A user without the permission to ask is
/// taken at the sentinels' word.
async fn says_master(client: &redis::Client) -> RedisResult<bool> {
    let mut conn = client.get_multiplexed_async_connection().await?;
    match redis::cmd("ROLE")
        .query_async::<redis::Value>(&mut conn)
        .await
    {
        Ok(redis::Value::Array(parts)) => Ok(matches!(
            parts.first(),
            Some(redis::Value::BulkString(role)) if role.as_slice() == b"master"
        ) || matches!(
            parts.first(),
            Some(redis::Value::SimpleString(role)) if role == "master"
        )),
        Ok(_) => Ok(false),
        Err(err) if missing_permission(&err).is_some() => Ok(true),
        Err(err) => Err(err),
    }
}

/// The master a client follows now.
pub(crate) struct Master {
    pub(crate) client: redis::Client,
    conn: ConnectionManager,
    pub(crate) addr: String,
}

/// A master followed through its sentinels.
pub(crate) struct Followed {
    set: SentinelSet,
    command_timeout: Duration,
    current: Mutex<Option<Arc<Master>>>,
    resolving: tokio::sync::Mutex<()>,
    /// Bumped each time the client moves to another master, so that the release listener
    /// moves too.
    switched: watch::Sender<u64>,
    /// Set by [`Self::close`] (under `current`'s lock): no master is followed any more.
    closed: AtomicBool,
    /// True once closed: the task that listens to the sentinels ends.
    closing: watch::Sender<bool>,
    /// That task, for [`Self::close`] to wait for its end.
    watcher: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Followed {
    /// Starts following: the master is asked for at the first operation, and a task listens
    /// to the sentinels' `+promoted-slave` and `+switch-master` announcements (one sentinel at
    /// a time, the next one when it fails), so that the client leaves a demoted master as soon
    /// as the sentinels promote another one — not only when the old one refuses a write,
    /// which a master that has not heard of its demotion yet does not. Must run inside a Tokio
    /// runtime.
    pub(crate) fn start(set: SentinelSet, command_timeout: Duration) -> Arc<Self> {
        let followed = Arc::new(Followed {
            set,
            command_timeout,
            current: Mutex::new(None),
            resolving: tokio::sync::Mutex::new(()),
            switched: watch::channel(0).0,
            closed: AtomicBool::new(false),
            closing: watch::channel(false).0,
            watcher: Mutex::new(None),
        });
        let watcher = tokio::spawn(watch_switches(
            Arc::downgrade(&followed),
            followed.closing.subscribe(),
        ));
        *followed
            .watcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(watcher);
        followed
    }

    /// Stops following: the master's connection is dropped (a call on its way keeps its own
    /// handle until it ends), the task that listens to the sentinels ends (its connection
    /// with it: waited for), and every later operation fails at once with [`closed`].
    pub(crate) async fn close(&self) {
        let master = {
            let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            self.closed.store(true, Ordering::Release);
            current.take()
        };
        drop(master);
        self.closing.send_replace(true);
        let watcher = self
            .watcher
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(watcher) = watcher {
            // It ends at once (it selects on `closing` wherever it waits); a panic in it has
            // nothing left to close.
            let _ = watcher.await;
        }
    }

    /// The [`closed`] error once [`Self::close`] ran.
    fn check_open(&self) -> RedisResult<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(closed());
        }
        Ok(())
    }

    /// Changes each time the client moves to another master.
    pub(crate) fn switches(&self) -> watch::Receiver<u64> {
        self.switched.subscribe()
    }

    /// How many times the client has moved to another master so far.
    pub(crate) fn epoch(&self) -> u64 {
        *self.switched.borrow()
    }

    pub(crate) fn describe(&self) -> String {
        self.set.describe()
    }

    pub(crate) fn tls(&self) -> bool {
        self.set.tls
    }

    fn current(&self) -> Option<Arc<Master>> {
        self.current
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The master followed now, asking the sentinels first if none is known (one question at a
    /// time, however many operations need the answer).
    pub(crate) async fn master(&self) -> RedisResult<Arc<Master>> {
        if let Some(master) = self.current() {
            return Ok(master);
        }
        self.check_open()?;
        let _resolving = self.resolving.lock().await;
        if let Some(master) = self.current() {
            return Ok(master);
        }
        let (client, addr) = self.set.resolve(self.command_timeout).await?;
        self.follow(client, addr)
    }

    fn follow(&self, client: redis::Client, addr: String) -> RedisResult<Arc<Master>> {
        let conn = ConnectionManager::new_lazy_with_config(
            client.clone(),
            manager_config(self.command_timeout),
        )?;
        let master = Arc::new(Master { client, conn, addr });
        let previous = {
            let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
            // Checked under the lock that `close` sets it under: a master found by a call on
            // its way when the client closed is not followed.
            self.check_open()?;
            current.replace(master.clone())
        };
        tracing::info!(master = %master.addr, name = %self.set.master, "following the master the sentinels name");
        if previous.is_some_and(|p| p.addr != master.addr) {
            self.switched.send_modify(|g| *g = g.wrapping_add(1));
        }
        Ok(master)
    }

    /// Stops following `stale` (if it is still the one followed): the next operation asks the
    /// sentinels.
    fn forget(&self, stale: &Arc<Master>) {
        let mut current = self.current.lock().unwrap_or_else(PoisonError::into_inner);
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, stale)) {
            *current = None;
        }
    }

    /// Asks the sentinels again, and follows the master they name if it changed.
    pub(crate) async fn refresh(&self) -> RedisResult<Arc<Master>> {
        self.check_open()?;
        let _resolving = self.resolving.lock().await;
        let (client, addr) = self.set.resolve(self.command_timeout).await?;
        match self.current() {
            Some(master) if master.addr == addr => Ok(master),
            _ => self.follow(client, addr),
        }
    }

    /// Runs `op` on the master's connection; when it fails because that server is no longer
    /// the master or cannot be reached, asks the sentinels and runs it once more on the master
    /// they name.
    pub(crate) async fn on_master<T, F, Fut>(&self, op: F) -> RedisResult<T>
    where
        F: Fn(ConnectionManager) -> Fut,
        Fut: Future<Output = RedisResult<T>>,
    {
        let master = self.master().await?;
        match op(master.conn.clone()).await {
            Err(err) if is_master_gone(&err) => {
                self.forget(&master);
                match self.master().await {
                    Ok(next) => op(next.conn.clone()).await,
                    Err(_) => Err(err),
                }
            }
            other => other,
        }
    }
}

/// Whether a sentinel's announcement is about a new master for `name`: `+promoted-slave`
/// (`slave <ip>:<port> <ip> <port> @ <name> <old ip> <old port>`, as soon as a replica is
/// promoted, while the failover goes on) or `+switch-master` (`<name> <old ip> <old port>
/// <new ip> <new port>`, when it ends).
fn announces_new_master(payload: &str, name: &str) -> bool {
    let promoted = payload.starts_with("slave ")
        && payload
            .split_once(" @ ")
            .and_then(|(_, master)| master.split(' ').next())
            == Some(name);
    promoted || payload.split(' ').next() == Some(name)
}

/// Listens to `+switch-master` and `+promoted-slave` on the sentinels (one at a time, rotating
/// on failure) until the client is gone or closed, and follows the new master of ours when one is
/// announced.
async fn watch_switches(followed: std::sync::Weak<Followed>, mut closing: watch::Receiver<bool>) {
    tokio::select! {
        // Closed (or the sender is gone with the client): the listening, and its connection
        // to a sentinel, end here.
        _ = closing.wait_for(|closed| *closed) => {}
        () = follow_announcements(followed) => {}
    }
}

/// The body of [`watch_switches`]: runs until the client is gone.
async fn follow_announcements(followed: std::sync::Weak<Followed>) {
    let mut retry = crate::backoff::SENTINEL;
    let mut next = 0usize;
    loop {
        let (sentinel, name, limit) = {
            let Some(followed) = followed.upgrade() else {
                return;
            };
            let count = followed.set.sentinels.len().max(1);
            let Some(sentinel) = followed.set.sentinels.get(next % count).cloned() else {
                return;
            };
            (
                sentinel,
                followed.set.master.clone(),
                followed.command_timeout,
            )
        };
        next = next.wrapping_add(1);
        let subscribed = within(limit, async {
            let mut pubsub = sentinel.get_async_pubsub().await?;
            pubsub
                .subscribe(&["+switch-master", "+promoted-slave"])
                .await?;
            Ok(pubsub)
        })
        .await;
        let mut pubsub = match subscribed {
            Ok(pubsub) => pubsub,
            Err(err) => {
                tracing::debug!(%err, "cannot listen to a sentinel's announcements");
                tokio::time::sleep(retry.next_delay()).await;
                continue;
            }
        };
        let mut messages = pubsub.on_message();
        loop {
            // Wake up now and then to notice a dropped client.
            let message = tokio::time::timeout(Duration::from_secs(1), messages.next()).await;
            let Some(followed) = followed.upgrade() else {
                return;
            };
            match message {
                Err(_) => continue,
                Ok(None) => break,
                Ok(Some(message)) => {
                    let payload = String::from_utf8_lossy(message.get_payload_bytes()).into_owned();
                    if announces_new_master(&payload, &name) {
                        tracing::info!(%payload, "the sentinels announced a new master");
                        if let Err(err) = followed.refresh().await {
                            tracing::warn!(%err, "cannot reach the new master yet");
                        }
                    }
                }
            }
        }
        tokio::time::sleep(retry.next_delay()).await;
    }
}

#[cfg(test)]
mod tests {
    use super::announces_new_master;

    #[test]
    fn announcements_of_a_new_master_are_recognised_by_name() {
        assert!(announces_new_master("m 127.0.0.1 1 127.0.0.1 2", "m"));
        assert!(announces_new_master(
            "slave 127.0.0.1:2 127.0.0.1 2 @ m 127.0.0.1 1",
            "m"
        ));
        assert!(!announces_new_master(
            "slave 127.0.0.1:2 127.0.0.1 2 @ other 127.0.0.1 1",
            "m"
        ));
        assert!(!announces_new_master("other 127.0.0.1 1 127.0.0.1 2", "m"));
    }
}
