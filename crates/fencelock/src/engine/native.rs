//! Re-arming a lease with the server's own compare-and-set, where the kind and the server allow
//! it: `SET key value IFEQ value PX ttl` (Valkey 8.1 and later, Redis 8.4 and later) re-arms a
//! grant whose value is exactly what it wrote, with no script. Anything else (a value marked
//! since someone waited, a key gone or taken, a server without the command) is left to the
//! kind's extend script, which gives the answer; a server that refuses the syntax is asked by
//! script from then on (`Server::lacks_set_ifeq`).

use std::time::Duration;

use redis::{ErrorKind, RedisError, RedisResult, Value};

use crate::connection::Server;
use crate::engine::protocol::Hold;

/// The native re-arm of `hold`'s lease to `ttl`, if its kind writes `<token>:<fence>` and the
/// server may have the command. `fence`: the grant's fence as its value holds it (one server
/// only: over Redlock each instance's value has a fence of its own).
pub(super) fn command(
    server: &Server,
    hold: &Hold,
    fence: Option<u64>,
    ttl: Duration,
) -> Option<redis::Cmd> {
    let fence = fence?;
    if !hold.protocol.renews_by_value() || !server.may_set_ifeq() {
        return None;
    }
    let value = format!("{}:{fence}", hold.token.as_str());
    let mut cmd = redis::cmd("SET");
    cmd.arg(hold.keys.lock())
        .arg(&value)
        .arg("IFEQ")
        .arg(&value)
        .arg("PX")
        .arg(crate::script::lease_millis(hold.on_server(ttl)));
    Some(cmd)
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

/// Re-arms one lease natively if it can (`None`: left to the script).
pub(super) async fn extend(
    server: &Server,
    hold: &Hold,
    fence: Option<u64>,
    ttl: Duration,
    limit: Duration,
) -> Option<RedisResult<()>> {
    let cmd = command(server, hold, fence, ttl)?;
    settle(server, server.query::<Value>(&cmd, limit).await)
}

/// Sends `commands` in one pipeline: an answer for each that settled, `None` for the others
/// (not sent, or left to the script). Fails as a whole when the pipeline does (the server is
/// unreachable).
pub(super) async fn send(
    server: &Server,
    commands: &[Option<redis::Cmd>],
    limit: Duration,
) -> RedisResult<Vec<Option<RedisResult<()>>>> {
    let mut answers: Vec<Option<RedisResult<()>>> = commands.iter().map(|_| None).collect();
    let mut pipe = redis::pipe();
    let mut sent = Vec::new();
    for (at, cmd) in commands.iter().enumerate() {
        if let Some(cmd) = cmd {
            pipe.add_command(cmd.clone());
            sent.push(at);
        }
    }
    if sent.is_empty() {
        return Ok(answers);
    }
    pipe.ignore_errors();
    let replies: Vec<Value> = server.pipeline(&pipe, limit).await?;
    for (at, reply) in sent.into_iter().zip(replies) {
        if let Some(answer) = answers.get_mut(at) {
            *answer = settle(server, Ok(reply));
        }
    }
    Ok(answers)
}
