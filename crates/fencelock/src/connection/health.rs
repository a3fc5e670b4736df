//! How long a server may take to answer ([`within`]), and whether a server of a Redlock set
//! answers: one that let its last call run out of time is
//! *suspect*, and is asked for new holds by one acquisition at a time (a probe) until it
//! answers again. The other acquisitions count it as unanswered at once, instead of each
//! leaving a call, a timer and a task behind it for as long as it is away. Renewals and
//! releases still go to it, in order (they are about holds it was asked for).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// The error of a call that got no answer in time: an I/O error of kind `TimedOut` (which
/// `RedisError::is_timeout` and [`Health::record`] recognise).
pub(crate) fn timed_out(message: String) -> redis::RedisError {
    redis::RedisError::from(std::io::Error::new(std::io::ErrorKind::TimedOut, message))
}

/// Runs `fut`, failing with [`timed_out`] after `limit`.
///
/// Not an `async fn`: one would keep `fut` twice in its state (the argument, and the timeout
/// that holds it), and every call's future, and every future that awaits one, that much larger
/// (and copied whole each time it is moved).
pub(crate) fn within<T>(
    limit: Duration,
    fut: impl Future<Output = redis::RedisResult<T>>,
) -> impl Future<Output = redis::RedisResult<T>> {
    use futures_util::FutureExt;
    tokio::time::timeout(limit, fut).map(move |result| match result {
        Ok(result) => result,
        Err(_) => Err(timed_out(format!("no reply within {limit:?}"))),
    })
}

/// One server's recent answers.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// Its last call timed out, and no call has been answered since.
    suspect: AtomicBool,
    /// A call to the suspect server is on its way.
    probing: AtomicBool,
}

/// Leave to send a call to a server; for a probe, given back when the call ends.
#[derive(Debug)]
pub(crate) struct Admission {
    probe: Option<Arc<Health>>,
}

impl Admission {
    /// Leave that is not a probe (a call that goes whatever the server's health).
    pub(crate) fn always() -> Self {
        Admission { probe: None }
    }
}

impl Drop for Admission {
    fn drop(&mut self) {
        if let Some(health) = self.probe.take() {
            health.probing.store(false, Ordering::Release);
        }
    }
}

impl Health {
    /// Takes note of a call's outcome: a timeout makes the server suspect, any answer (also
    /// an error reply, or a refused connection) clears it.
    pub(crate) fn record<T>(&self, result: &redis::RedisResult<T>) {
        let timed_out = matches!(result, Err(e) if e.is_timeout());
        if self.suspect.load(Ordering::Relaxed) != timed_out {
            self.suspect.store(timed_out, Ordering::Release);
        }
    }

    /// Whether a call may go to this server now: always while it answers; while it is suspect,
    /// only when no other call to it is on its way (that call is the probe).
    pub(crate) fn admit(self: &Arc<Self>) -> Option<Admission> {
        if !self.suspect.load(Ordering::Acquire) {
            return Some(Admission::always());
        }
        self.probing
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .ok()
            .map(|_| Admission {
                probe: Some(self.clone()),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timeout() -> redis::RedisResult<()> {
        Err(timed_out("no reply".to_owned()))
    }

    #[test]
    fn a_timeout_lets_one_probe_through_until_an_answer() {
        let health = Arc::new(Health::default());
        assert!(health.admit().is_some() && health.admit().is_some());
        health.record(&timeout());
        let probe = health.admit();
        assert!(probe.is_some());
        assert!(
            health.admit().is_none(),
            "a second call while the probe is out"
        );
        drop(probe);
        let probe = health.admit();
        assert!(probe.is_some(), "the next call is the next probe");
        health.record(&Ok(()));
        drop(probe);
        assert!(health.admit().is_some() && health.admit().is_some());
    }
}
