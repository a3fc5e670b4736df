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

    /// The next item, waiting at most `limit` (`None`: as long as it takes); `None` when the
    /// time ran out or the stream ended.
    pub fn next(&self, limit: Option<Duration>) -> impl Future<Output = Option<S::Item>> + use<S> {
        let stream = self.0.clone();
        async move {
            let mut stream = stream.lock().await;
            match limit {
                Some(limit) => tokio::time::timeout(limit, stream.next())
                    .await
                    .ok()
                    .flatten(),
                None => stream.next().await,
            }
        }
    }
}
