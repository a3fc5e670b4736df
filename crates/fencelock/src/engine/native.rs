//! Re-arming a lease with the server's own compare-and-set, where the kind and the server allow
//! it: `SET key value IFEQ value PX ttl` (Valkey 8.1 and later, Redis 8.4 and later) re-arms a
//! grant whose value is exactly what it wrote, with no script. Anything else (a value marked
//! since someone waited, a key gone or taken, a server without the command) is left to the
//! kind's extend script, which gives the answer; a server that refuses the syntax is asked by
//! script from then on (`Server::lacks_set_ifeq`). A miss that the script then re-arms was a
//! value marked since the grant (the token and fence are the hold's): the hold remembers it
//! ([`remember_mark`]), and compares with the marked value from then on, so a contended lock's
//! renewals cost one round trip again after the first.
//!
//! Only a lease re-armed alone goes this way (the guard's `extend`, a renewal with no other
//! due on the server): it costs the server a third of the script's CPU. Many renewals at once
//! go by the script's batch form, one call for up to 64 locks, which costs the client half the
//! instructions per lock that a pipeline of `SET`s does (docs/BENCHMARKS.md, lever 1).

use std::sync::atomic::Ordering;
use std::time::Duration;

use redis::{ErrorKind, RedisError, RedisResult, Value};

use crate::connection::Server;
use crate::engine::protocol::Hold;

/// Whether `hold` may be re-armed natively here: its kind writes `<token>:<fence>` and the
/// server may have the command. `fence`: the grant's fence as its value holds it (one server
/// only: over Redlock each instance's value has a fence of its own).
fn natively(server: &Server, hold: &Hold, fence: Option<u64>) -> Option<u64> {
    fence.filter(|_| hold.protocol.renews_by_value() && server.may_set_ifeq())
}

/// `SET key <token>:<fence> IFEQ <token>:<fence> PX ms`: the lease re-armed if the value is
/// still the one the grant wrote.
fn command(hold: &Hold, fence: u64, ttl: Duration) -> redis::Cmd {
    let mark = if hold.marked.load(Ordering::Relaxed) {
        "+"
    } else {
        ""
    };
    let value = format!("{}:{fence}{mark}", hold.token.as_str());
    let mut cmd = redis::cmd("SET");
    cmd.arg(hold.keys.lock())
        .arg(&value)
        .arg("IFEQ")
        .arg(&value)
        .arg("PX")
        .arg(crate::script::lease_millis(hold.on_server(ttl)));
    cmd
}

/// What a native reply settles: `Some(Ok(()))` re-armed, `Some(Err)` the server could not be
/// reached, `None` for the script to decide.
fn settle(server: &Server, reply: RedisResult<Value>) -> Option<RedisResult<()>> {
    match reply {
        Ok(Value::Okay) => Some(Ok(())),
        Ok(Value::ServerError(err)) => {
            refused(server, &RedisError::from(err));
            None
        }
        // Not re-armed: the value is not the one written (marked, gone, another owner's).
        Ok(_) => None,
        // The server answered with an error (a wrong type, a missing permission, a replica).
        Err(err) if matches!(err.kind(), ErrorKind::Server(_) | ErrorKind::Extension) => {
            refused(server, &err);
            None
        }
        Err(err) => Some(Err(err)),
    }
}

/// A server error to a native call: a server that does not know `IFEQ` says so once.
fn refused(server: &Server, err: &RedisError) {
    if err.to_string().contains("syntax error") {
        server.lacks_set_ifeq();
    }
}

/// After the script re-armed a lease that [`extend`] left to it: the value was marked since
/// the grant, if a native re-arm was tried (see the module's documentation).
pub(super) fn remember_mark(server: &Server, hold: &Hold, fence: Option<u64>) {
    if natively(server, hold, fence).is_some() {
        hold.marked.store(true, Ordering::Relaxed);
    }
}

/// Re-arms one lease natively if it can (`None`: left to the script).
pub(super) async fn extend(
    server: &Server,
    hold: &Hold,
    fence: Option<u64>,
    ttl: Duration,
    limit: Duration,
) -> Option<RedisResult<()>> {
    let fence = natively(server, hold, fence)?;
    let cmd = command(hold, fence, ttl);
    settle(server, server.query::<Value>(&cmd, limit).await)
}
