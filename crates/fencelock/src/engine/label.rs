//! A hold's label ([`LockRequest::label`](crate::LockRequest::label)): who holds the lock, in the
//! holder's own words, for the operator's view. It lives beside the lock, in
//! `PREFIX:{NAME}:label:<hold token>` (the lock's hash tag: its slot), written with the hold's
//! time on the server after a grant, re-armed with each renewal and deleted with the release, so
//! that a holder that stops renewing leaves it to lapse with its lease. An unlabelled hold sends
//! none of these commands. A label is information, not state: a failure to write, re-arm or
//! delete one is logged and changes nothing about the hold.

use std::time::Duration;

use crate::connection::Server;
use crate::engine::protocol::Hold;
use crate::error::{Error, Result};
use crate::quorum::Instances;

/// The longest label accepted, in bytes.
pub const MAX_LABEL_LEN: usize = 128;

/// Checks a label: at most [`MAX_LABEL_LEN`] bytes, no control characters.
pub(crate) fn validate(lock: &str, label: &str) -> Result<()> {
    if label.len() > MAX_LABEL_LEN {
        return Err(Error::invalid(
            lock,
            format!(
                "the label is {} bytes long; at most {MAX_LABEL_LEN} are allowed",
                label.len()
            ),
        ));
    }
    if let Some(c) = label.chars().find(|c| c.is_control()) {
        return Err(Error::invalid(
            lock,
            format!("the label contains {c:?}; control characters are not allowed"),
        ));
    }
    Ok(())
}

/// The key of `hold`'s label: `PREFIX:{NAME}:label:<hold token>`.
pub(crate) fn key(hold: &Hold) -> String {
    format!("{}:label:{}", hold.keys.lock(), hold.token.as_str())
}

/// Whole milliseconds of `ttl`, at least 1 (`PX` refuses 0).
fn millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

/// `SET key label PX <lease and lock-delay>`: writes `hold`'s label for a hold of lease `ttl`
/// (`None`: the hold has no label).
pub(crate) fn write(hold: &Hold, ttl: Duration) -> Option<redis::Cmd> {
    let label = hold.holder_label.as_deref()?;
    let mut cmd = redis::cmd("SET");
    cmd.arg(key(hold))
        .arg(label)
        .arg("PX")
        .arg(millis(hold.on_server(ttl)));
    Some(cmd)
}

/// `PEXPIRE key <lease and lock-delay>`: re-arms `hold`'s label with a renewal of lease `ttl`.
pub(crate) fn rearm(hold: &Hold, ttl: Duration) -> Option<redis::Cmd> {
    hold.holder_label.as_ref()?;
    let mut cmd = redis::cmd("PEXPIRE");
    cmd.arg(key(hold)).arg(millis(hold.on_server(ttl)));
    Some(cmd)
}

/// `DEL key`: deletes `hold`'s label with its release.
pub(crate) fn delete(hold: &Hold) -> Option<redis::Cmd> {
    hold.holder_label.as_ref()?;
    let mut cmd = redis::cmd("DEL");
    cmd.arg(key(hold));
    Some(cmd)
}

/// Sends one of the commands above to `server`; a failure is logged (the hold is unaffected: a
/// label not written is not shown, one not deleted lapses with the lease).
pub(crate) async fn send(server: Server, cmd: redis::Cmd, lock: &str, limit: Duration) {
    if let Err(err) = server.query::<redis::Value>(&cmd, limit).await {
        tracing::warn!(lock, server = %server.addr, %err, "could not write the hold's label; the hold is unaffected");
    }
}

/// Writes the label of `hold`, just granted with lease `ttl`, on every instance; returns once
/// a majority answered (over Redlock the others' writes run on in the background, so that an
/// instance that does not answer delays the grant no more than it delayed the grant itself).
pub(crate) async fn write_on_all(instances: &Instances, hold: &Hold, ttl: Duration) {
    let Some(cmd) = write(hold, ttl) else {
        return;
    };
    let limit = instances.limit(ttl);
    let lock = hold.name.clone();
    let quorum = instances.quorum();
    instances
        .on_all(
            None,
            |server| {
                let (server, cmd, lock) = (server.clone(), cmd.clone(), lock.clone());
                async move {
                    send(server, cmd, &lock, limit).await;
                    Ok(())
                }
            },
            |answers| quorum.reached(answers.iter().filter(|a| a.is_some()).count()),
        )
        .await;
}
