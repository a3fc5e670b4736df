//! A stream of the library's (an election's observations, a lock's releases) followed one item
//! at a time, each wait a call of its own.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use tokio::sync::Mutex;

/// A stream shared by the calls that wait for its next item.
pub struct Follow<S>(Arc<Mutex<S>>);

impl<S> Clone for Follow<S> {
    fn clone(&self) -> Self {
        Follow(self.0.clone())
    }
}

impl<S> Follow<S>
where
    S: Stream + Unpin + Send + 'static,
    S::Item: Send,
{
    pub fn new(stream: S) -> Self {
        Follow(Arc::new(Mutex::new(stream)))
    }

    /// The next item, waiting at most `limit` (`None`: as long as it takes), the wait for the
    /// calls before it included; `None` when the time ran out or the stream ended.
    pub fn next(&self, limit: Option<Duration>) -> impl Future<Output = Option<S::Item>> + use<S> {
        let stream = self.0.clone();
        // From now: a call queued behind another (an untimed one, say) runs out all the same.
        let deadline = limit.map(|limit| tokio::time::Instant::now() + limit);
        async move {
            let next = async {
                let mut stream = stream.lock().await;
                stream.next().await
            };
            match deadline {
                Some(deadline) => tokio::time::timeout_at(deadline, next).await.ok().flatten(),
                None => next.await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_timed_next_behind_an_untimed_one_runs_out_on_time() {
        let follow = Follow::new(futures_util::stream::pending::<u32>());
        let untimed = tokio::spawn(follow.next(None));
        // The untimed call holds the stream.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let timed = tokio::time::timeout(
            Duration::from_secs(10),
            follow.next(Some(Duration::from_millis(50))),
        )
        .await;
        assert_eq!(timed, Ok(None), "the timed call waited past its limit");
        untimed.abort();
    }
}
