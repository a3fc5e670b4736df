//! One Redis server as fencelock talks to it: a multiplexed, automatically reconnecting
//! connection, a per-command time limit, and the mapping of Redis errors to [`Error`].

use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{FromRedisValue, RedisError, ScriptInvocation};

use crate::error::Error;

/// A Redis server: its connection and its printable address (`host:port`, never credentials).
#[derive(Clone)]
pub(crate) struct Server {
    conn: ConnectionManager,
    pub(crate) addr: String,
    /// Whether the connection is TLS (`rediss://`).
    tls: bool,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server").field("addr", &self.addr).finish()
    }
}

impl Server {
    /// Prepares the connection; nothing is sent until the first command. Must run inside a
    /// Tokio runtime.
    pub(crate) fn new(
        client: redis::Client,
        command_timeout: Duration,
    ) -> redis::RedisResult<Self> {
        let addr = client.get_connection_info().addr().to_string();
        let tls = matches!(
            client.get_connection_info().addr(),
            redis::ConnectionAddr::TcpTls { .. }
        );
        let config = ConnectionManagerConfig::new()
            .set_response_timeout(Some(command_timeout))
            .set_connection_timeout(Some(command_timeout))
            .set_number_of_retries(2)
            .set_max_delay(Duration::from_millis(500));
        let conn = ConnectionManager::new_lazy_with_config(client, config)?;
        Ok(Server { conn, addr, tls })
    }

    /// Runs a script by SHA (loading it on `NOSCRIPT`), within `limit`.
    pub(crate) async fn invoke<T: FromRedisValue>(
        &self,
        invocation: &ScriptInvocation<'_>,
        limit: Duration,
    ) -> redis::RedisResult<T> {
        let mut conn = self.conn.clone();
        within(limit, invocation.invoke_async(&mut conn)).await
    }

    /// Sends a pipeline within `limit`.
    pub(crate) async fn pipeline<T: FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
        limit: Duration,
    ) -> redis::RedisResult<T> {
        let mut conn = self.conn.clone();
        within(limit, async move { pipe.query_async(&mut conn).await }).await
    }

    /// Sends one command within `limit`.
    pub(crate) async fn query<T: FromRedisValue>(
        &self,
        cmd: &redis::Cmd,
        limit: Duration,
    ) -> redis::RedisResult<T> {
        let mut conn = self.conn.clone();
        within(limit, async move { cmd.query_async(&mut conn).await }).await
    }

    /// Turns a Redis error into fencelock's error for `lock`, naming this server.
    pub(crate) fn error(&self, lock: &str, command: &'static str, err: RedisError) -> Error {
        if is_tls_failure(&err) {
            Error::Tls {
                lock: lock.to_owned(),
                server: self.addr.clone(),
                source: err,
            }
        } else if is_auth_failure(&err) {
            Error::AuthFailed {
                lock: lock.to_owned(),
                server: self.addr.clone(),
                source: err,
            }
        } else if let Some(rule) = missing_permission(&err) {
            Error::PermissionDenied {
                lock: lock.to_owned(),
                server: self.addr.clone(),
                command,
                rule,
                source: err,
            }
        } else if is_unreachable(&err) {
            let hint = match (self.tls, err.is_timeout()) {
                (true, true) => {
                    " (over TLS: a port that does not speak TLS leaves the handshake \
                     unanswered; check the port, or use a redis:// URL)"
                }
                // A refused connection is a server that is not there, not a TLS port.
                (false, false)
                    if !err.is_connection_refusal()
                        && (err.is_connection_dropped() || is_reset(&err)) =>
                {
                    " (the server closed the connection at once: if this port expects TLS, \
                     use a rediss:// URL)"
                }
                _ => "",
            };
            Error::Unreachable {
                lock: lock.to_owned(),
                server: self.addr.clone(),
                source: err,
                hint,
            }
        } else {
            Error::Redis {
                lock: lock.to_owned(),
                server: self.addr.clone(),
                command,
                source: err,
            }
        }
    }
}

/// Runs `fut`, failing with a timeout error (an I/O error of kind `TimedOut`) after `limit`.
pub(crate) async fn within<T>(
    limit: Duration,
    fut: impl Future<Output = redis::RedisResult<T>>,
) -> redis::RedisResult<T> {
    match tokio::time::timeout(limit, fut).await {
        Ok(result) => result,
        Err(_) => Err(RedisError::from(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no reply within {limit:?}"),
        ))),
    }
}

/// Whether the connection was reset or closed by the peer.
fn is_reset(err: &RedisError) -> bool {
    let text = err.to_string();
    text.contains("reset by peer") || text.contains("broken pipe") || text.contains("end of file")
}

/// Whether the TLS handshake failed (as opposed to a server that cannot be reached at all).
pub(crate) fn is_tls_failure(err: &RedisError) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if is_tls_error(e) {
            return true;
        }
        source = e.source();
    }
    false
}

/// Whether `e` is a TLS library's error: itself, inside an `io::Error`, or inside the `Arc`
/// the `redis` crate keeps its underlying errors in.
fn is_tls_error(e: &(dyn std::error::Error + 'static)) -> bool {
    type Shared = std::sync::Arc<dyn std::error::Error + Send + Sync>;
    if let Some(shared) = e.downcast_ref::<Shared>() {
        let inner: &(dyn std::error::Error + 'static) = &**shared;
        return is_tls_error(inner);
    }
    if let Some(inner) = e
        .downcast_ref::<std::io::Error>()
        .and_then(|io| io.get_ref())
    {
        let inner: &(dyn std::error::Error + 'static) = inner;
        return is_tls_error(inner);
    }
    #[cfg(feature = "tls-rustls")]
    if e.is::<rustls::Error>() {
        return true;
    }
    #[cfg(feature = "tls-native-tls")]
    if e.to_string().contains("certificate") || e.to_string().contains("handshake") {
        return true;
    }
    false
}

/// Whether Redis refused the client's credentials (a wrong user or password, or none given to
/// a server that requires them).
pub(crate) fn is_auth_failure(err: &RedisError) -> bool {
    err.kind() == redis::ErrorKind::AuthenticationFailed
        || matches!(err.code(), Some("NOAUTH" | "WRONGPASS"))
}

/// If Redis refused for lack of an ACL permission, which rule of the README's ACL section is
/// missing. A refusal outside a script is `NOPERM`; inside a script Redis 7.0 answers a plain
/// `ERR` ("The user executing the script can't ...") and Valkey 8 `ERR` ("ACL failure in
/// script: ...").
pub(crate) fn missing_permission(err: &RedisError) -> Option<&'static str> {
    let in_script = err.detail().is_some_and(|d| {
        d.contains("The user executing the script can't") || d.contains("ACL failure in script")
    });
    if err.code() != Some("NOPERM") && !in_script {
        return None;
    }
    let text = err.to_string();
    Some(if text.contains("channel") {
        "pub/sub channels: &<key prefix>:*"
    } else if text.contains("key") {
        "keys: ~<key prefix>:*"
    } else {
        "a command fencelock runs (see the ACL rules in the README)"
    })
}

/// Whether an error means the server could not be reached (as opposed to a refusal).
pub(crate) fn is_unreachable(err: &RedisError) -> bool {
    !is_auth_failure(err) && is_unreachable_kind(err)
}

fn is_unreachable_kind(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_unrecoverable_error()
}
