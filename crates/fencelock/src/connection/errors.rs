//! Reading a Redis error: a failed TLS handshake, refused credentials, a missing ACL
//! permission, or a server that cannot be reached.

use redis::RedisError;

use super::Server;
use crate::error::Error;

/// The detail of the error a call gets after its client was closed ([`closed`]).
const CLOSED: &str = "the fencelock client was closed";

/// The error of a call made after its client was closed: nothing was sent. [`Server::error`]
/// turns it into [`Error::Closed`].
///
/// [`Server::error`]: super::Server::error
pub(crate) fn closed() -> RedisError {
    RedisError::from((redis::ErrorKind::Client, "closed", CLOSED.to_owned()))
}

/// Whether an error is [`closed`]'s.
pub(crate) fn is_closed(err: &RedisError) -> bool {
    err.kind() == redis::ErrorKind::Client && err.detail() == Some(CLOSED)
}

/// Whether the connection was reset or closed by the peer.
pub(crate) fn is_reset(err: &RedisError) -> bool {
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

/// If Redis refused for lack of an ACL permission, which rule of the ACL section of docs/deployments.md is
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
        "a command fencelock runs (see the ACL rules in docs/deployments.md)"
    })
}

/// Whether an error means the server could not be reached (as opposed to a refusal).
pub(crate) fn is_unreachable(err: &RedisError) -> bool {
    !is_auth_failure(err) && !is_closed(err) && is_unreachable_kind(err)
}

pub(super) fn is_unreachable_kind(err: &RedisError) -> bool {
    err.is_io_error()
        || err.is_timeout()
        || err.is_connection_dropped()
        || err.is_connection_refusal()
        || err.is_unrecoverable_error()
}

/// Whether an error says the server this client follows is no longer (or not yet reachable as)
/// the master: it answered `READONLY` (a demoted master, now a replica), or the connection
/// failed. After such an error a Sentinel client asks the sentinels again.
pub(crate) fn is_master_gone(err: &RedisError) -> bool {
    err.code() == Some("READONLY") || (is_unreachable(err) && !err.is_timeout())
}

impl Server {
    /// Turns a Redis error into fencelock's error for `lock`, naming this server.
    pub(crate) fn error(&self, lock: &str, command: &'static str, err: RedisError) -> Error {
        if is_closed(&err) {
            Error::Closed {
                lock: lock.to_owned(),
            }
        } else if is_tls_failure(&err) {
            Error::Tls {
                lock: lock.to_owned(),
                server: self.addr.to_string(),
                source: err,
            }
        } else if is_auth_failure(&err) {
            Error::AuthFailed {
                lock: lock.to_owned(),
                server: self.addr.to_string(),
                source: err,
            }
        } else if let Some(rule) = missing_permission(&err) {
            Error::PermissionDenied {
                lock: lock.to_owned(),
                server: self.addr.to_string(),
                command,
                rule,
                source: err,
            }
        } else if is_unreachable(&err) {
            let hint = match (self.tls, err.is_timeout()) {
                (true, true) => Some(
                    "over TLS: a port that does not speak TLS leaves the handshake \
                     unanswered; check the port, or use a redis:// URL",
                ),
                // A refused connection is a server that is not there, not a TLS port.
                (false, false)
                    if !err.is_connection_refusal()
                        && (err.is_connection_dropped() || is_reset(&err)) =>
                {
                    Some(
                        "the server closed the connection at once: if this port expects TLS, \
                         use a rediss:// URL",
                    )
                }
                _ => None,
            };
            Error::Unreachable {
                lock: lock.to_owned(),
                server: self.addr.to_string(),
                source: err,
                hint,
            }
        } else {
            Error::Redis {
                lock: lock.to_owned(),
                server: self.addr.to_string(),
                command,
                source: err,
            }
        }
    }
}
