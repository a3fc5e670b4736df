//! Run once: work that must be done once across a fleet (a migration every replica starts on
//! boot), however many processes start it, at once or later.
//!
//! The first run that takes the lock and succeeds records the key as done, with its fence, as a
//! fenced write; every later run finds the record and does nothing, also a run that was
//! waiting for the lock meanwhile. A run that fails records nothing, so the next one tries
//! again. A holder paused past its lease cannot record: every run that begins the work first
//! raises the fence the lock's resource accepts to its own, so the stale holder's record, a
//! [`FencedStore`] write with an older fence, is refused.
//!
//! The record is `PREFIX:once:{NAME}:KEY` (NAME: the lock's name, the key by default), holding
//! `<fence>:<ms>` (the run's fence, and when it recorded by its own clock); the fence floor is
//! the fenced store `NAME`'s. The record never expires: delete it to run the work again
//! (`redis-cli DEL 'fencelock:once:{NAME}:KEY'`).
//!
//! ```no_run
//! # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
//! use fencelock::once::Outcome;
//!
//! let outcome = client
//!     .once("schema/v42")
//!     .run(|fence| async move {
//!         // ... the migration, passing `fence` to what it writes ...
//!         Ok::<_, std::io::Error>(())
//!     })
//!     .await?;
//! match outcome {
//!     Outcome::Ran(()) => println!("migrated"),
//!     Outcome::Failed(e) => eprintln!("failed, nothing recorded: {e}"),
//!     Outcome::AlreadyDone(done) => println!("done before, with fence {}", done.fence),
//!     _ => {}
//! }
//! # Ok(()) }
//! ```

use std::future::Future;
use std::time::{Duration, SystemTime};

use crate::client::Client;
use crate::engine::{LockGuard, LockRequest, WaitPolicy};
use crate::error::{Error, Result};
use crate::fenced::{FencedStore, Writes};

/// The record of work done once (see [`Once`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Done {
    /// The fence of the run that did it.
    pub fence: u64,
    /// When it was recorded, by the server's clock.
    pub at: SystemTime,
}

/// What [`Once::run`] came to.
#[derive(Debug)]
#[non_exhaustive]
pub enum Outcome<T, E> {
    /// This run did the work, and recorded it.
    Ran(T),
    /// This run's work failed: nothing was recorded (the next run tries again).
    Failed(E),
    /// The work was done before (also by a run this one waited for): nothing ran.
    AlreadyDone(Done),
}

/// Work to do once (see the [module docs](self)): made by [`Client::once`].
#[derive(Debug)]
#[must_use = "nothing runs until `run` or `begin`"]
pub struct Once {
    client: Client,
    key: String,
    request: LockRequest,
}

/// What [`Once::begin`] found.
#[derive(Debug)]
#[must_use = "dropping a run releases its lock without recording anything"]
pub enum Begun {
    /// Not done yet, and this process holds the lock: do the work, then
    /// [`done`](OnceGuard::done) (or drop the guard if the work failed).
    Run(Box<OnceGuard>),
    /// Done before: nothing to do.
    AlreadyDone(Done),
}

/// The lock of a run that has the work to do (see [`Once::begin`]).
#[derive(Debug)]
pub struct OnceGuard {
    guard: LockGuard,
    store: FencedStore,
    record: String,
}

impl Client {
    /// Work to be done once, recorded under `key` (see [`crate::once`]); runs take turns on
    /// the plain lock named `key` (see [`Once::lock`] for another name). Over Redlock it is
    /// refused ([`Error::Unsupported`]): the record is a fenced write, which lives on one
    /// server.
    pub fn once(&self, key: impl Into<String>) -> Once {
        let key = key.into();
        Once {
            request: self.lock(key.clone()),
            client: self.clone(),
            key,
        }
    }
}

impl Once {
    /// The lock the runs take turns on (default: the plain lock named as the key).
    pub fn lock(mut self, name: impl Into<String>) -> Self {
        let request = std::mem::replace(&mut self.request, self.client.lock(name));
        self.request = self.request.ttl(request.ttl).wait(request.wait);
        self
    }

    /// The lock's lease (default 30 s), renewed while the work runs.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.request = self.request.ttl(ttl);
        self
    }

    /// How long to wait for the lock while another run holds it (default: as long as it takes;
    /// a run that waited finds the record of the one it waited for, and does nothing).
    pub fn wait(mut self, wait: WaitPolicy) -> Self {
        self.request = self.request.wait(wait);
        self
    }

    /// The record, if the work was done: read without taking the lock.
    ///
    /// # Errors
    ///
    /// [`Error::Unsupported`] over Redlock, [`Error::InvalidArgument`] for a bad name or key,
    /// connection errors.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads.
    pub async fn done(&self) -> Result<Option<Done>> {
        let (store, record) = self.store()?;
        read(&store, &record).await
    }

    /// Takes the lock unless the work was done, and says which: the record (before or after
    /// the wait), or the lock to do the work under.
    ///
    /// # Errors
    ///
    /// As [`LockRequest::acquire`] ([`Error::TimedOut`], ...), and as [`done`](Self::done).
    ///
    /// # Cancel safety
    ///
    /// As [`LockRequest::acquire`].
    pub async fn begin(self) -> Result<Begun> {
        let (store, record) = self.store()?;
        if let Some(done) = read(&store, &record).await? {
            return Ok(Begun::AlreadyDone(done));
        }
        let guard = self.request.acquire().await?;
        // A run this one waited for may have done it meanwhile.
        match read(&store, &record).await {
            Ok(Some(done)) => {
                guard.release().await?;
                Ok(Begun::AlreadyDone(done))
            }
            Ok(None) => {
                // This run's fence becomes the floor: a run before it, paused past its lease
                // and not told, cannot record any more.
                let started =
                    Writes::new().set(&format!("{record}:started"), guard.fence().to_string());
                if let Err(e) = store.apply(guard.fence(), &started).await {
                    let _ = guard.release().await;
                    return Err(e);
                }
                Ok(Begun::Run(Box::new(OnceGuard {
                    guard,
                    store,
                    record,
                })))
            }
            Err(e) => {
                let _ = guard.release().await;
                Err(e)
            }
        }
    }

    /// Does `work` (given the lock's fence, for what it writes) unless it was done: records it
    /// if it succeeds (`Ok`), records nothing if it fails (`Err`).
    ///
    /// # Errors
    ///
    /// As [`begin`](Self::begin); [`Error::Fenced`] if the work succeeded but could not be
    /// recorded because the lock was lost meanwhile and a newer run has its fence accepted (the
    /// work may then have run twice: check fences where it writes).
    ///
    /// # Cancel safety
    ///
    /// Cancelled while the work runs, nothing is recorded and the lock is released in the
    /// background.
    pub async fn run<F, Fut, T, E>(self, work: F) -> Result<Outcome<T, E>>
    where
        F: FnOnce(u64) -> Fut,
        Fut: Future<Output = std::result::Result<T, E>>,
    {
        let run = match self.begin().await? {
            Begun::AlreadyDone(done) => return Ok(Outcome::AlreadyDone(done)),
            Begun::Run(run) => run,
        };
        match work(run.fence()).await {
            Ok(value) => {
                run.done().await?;
                Ok(Outcome::Ran(value))
            }
            Err(e) => {
                run.give_up().await?;
                Ok(Outcome::Failed(e))
            }
        }
    }

    /// The fenced store of the lock's resource and the record's key.
    fn store(&self) -> Result<(FencedStore, String)> {
        let name = self.request.name.as_str();
        crate::keys::validate_name(&self.key).map_err(|_| {
            Error::invalid(
                name,
                format!("the once key {:?} is not a valid name", self.key),
            )
        })?;
        let store = self.client.fenced_store(name)?;
        let record = format!("{}:once:{{{name}}}:{}", self.client.shared.prefix, self.key);
        Ok((store, record))
    }
}

impl OnceGuard {
    /// The lock's fence: hand it to what the work writes.
    pub fn fence(&self) -> u64 {
        self.guard.fence()
    }

    /// The lock's guard (its deadline, its lost signal).
    pub fn guard(&self) -> &LockGuard {
        &self.guard
    }

    /// Records the work as done (a fenced write with the lock's fence) and releases the lock.
    ///
    /// # Errors
    ///
    /// [`Error::Fenced`] if a newer holder's fence was accepted (this run lost its lock: nothing
    /// was recorded); connection errors. The lock is released in any case.
    pub async fn done(self) -> Result<()> {
        let at = format!("{}:{}", self.guard.fence(), now_ms());
        let recorded = self
            .store
            .apply(self.guard.fence(), &Writes::new().set(&self.record, at))
            .await;
        let released = self.guard.release().await;
        recorded?;
        released.map(|_| ())
    }

    /// Releases the lock without recording anything: the next run tries again.
    ///
    /// # Errors
    ///
    /// As [`LockGuard::release`].
    pub async fn give_up(self) -> Result<()> {
        self.guard.release().await.map(|_| ())
    }
}

/// This process's clock in milliseconds, for the record (the fence orders runs; this is for
/// people).
fn now_ms() -> u128 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis())
}

async fn read(store: &FencedStore, record: &str) -> Result<Option<Done>> {
    let value = store.get(record).await?;
    Ok(value.and_then(|value| {
        let (fence, at) = value.split_once(':')?;
        Some(Done {
            fence: fence.parse().ok()?,
            at: SystemTime::UNIX_EPOCH + Duration::from_millis(at.parse().ok()?),
        })
    }))
}
