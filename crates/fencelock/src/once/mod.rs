//! Run once: work that must be done once across a fleet (a migration every replica starts on
//! boot), however many processes start it, at once or later.
//!
//! The first run that takes the lock and succeeds records the key as done, with its fence, as a
//! fenced write; every later run finds the record and does nothing, also a run that was
//! waiting for the lock meanwhile. A run that fails records nothing, so the next one tries
//! again. A holder paused past its lease cannot record: a run begins the work with one script
//! that raises the fence the lock's resource accepts to its own and reads the record, so a
//! stale holder either recorded before (the newer run finds the record and does nothing) or is
//! refused when it records ([`Error::Fenced`]: its run is told, and nothing is counted as done).
//!
//! The record is `PREFIX:once:{NAME}:KEY` (NAME: the lock's name, the key by default), holding
//! `<fence>:<ms>` (the run's fence, and when it recorded, by the server's clock); the fence
//! floor is the fenced store `NAME`'s. With
//! [`wait_for_replicas`](crate::ClientBuilder::wait_for_replicas), recording waits for the
//! replicas as a grant does. The record never expires unless [`Once::keep`] says how long to
//! keep it: delete it to run the work again (`redis-cli DEL 'fencelock:once:{NAME}:KEY'`).
//!
//! A scheduled job that several workers fire at once runs once per tick with
//! [`Once::tick`]: the record is then that of the job and its [`Tick`] (`KEY@TICK`, the tick's
//! beginning in UTC, `nightly-report@2026-11-29T00:00:00.000Z`), kept 7 days by default.
//!
//! ```no_run
//! # async fn example(client: fencelock::Client) -> fencelock::Result<()> {
//! use std::time::Duration;
//! use fencelock::once::{Outcome, Tick};
//!
//! // Fired by cron at midnight on every host: runs on one, once per day by Redis's clock.
//! let outcome = client
//!     .once("nightly-report")
//!     .tick(Tick::every(Duration::from_secs(86_400)).late(Duration::from_secs(6 * 3600)))
//!     .run(|fence| async move { Ok::<_, std::io::Error>(()) })
//!     .await?;
//! if let Outcome::TooLate(late) = outcome {
//!     eprintln!("started {:?} after the tick: not run", late.late);
//! }
//! # Ok(()) }
//! ```
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
use std::sync::LazyLock;
use std::time::{Duration, SystemTime};

use crate::client::Client;
use crate::engine::{LockRequest, WaitPolicy};
use crate::error::{Error, Result};
use crate::fenced::FencedStore;
use crate::script::reply::{as_string, as_u64};
use crate::script::{Lua, lua};

pub(crate) mod guard;
mod outcome;
mod tick;

pub use guard::OnceGuard;
pub use outcome::{Begun, Done, GaveUp, Late, Outcome};
pub use tick::Tick;

/// Raises the resource's fence floor to the run's fence and reads the record (and its failed
/// runs), in one step.
pub(crate) static BEGIN: LazyLock<Lua> = lua!("../fenced/check.lua", "begin.lua");

/// Work to do once (see the [module docs](self)): made by [`Client::once`].
#[derive(Debug)]
#[must_use = "nothing runs until `run` or `begin`"]
pub struct Once {
    client: Client,
    key: String,
    request: LockRequest,
    tick: Option<Tick>,
    keep: Option<Duration>,
    attempts: Option<u32>,
}

/// Where a run's record is, and the tick it belongs to.
struct Record {
    key: String,
    /// The count of its failed runs.
    failures: String,
    tick: Option<tick::Placed>,
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
            tick: None,
            keep: None,
            attempts: None,
        }
    }
}

impl Once {
    /// The lock the runs take turns on (default: the plain lock named as the key).
    pub fn lock(mut self, name: impl Into<String>) -> Self {
        let request = std::mem::replace(&mut self.request, self.client.lock(name));
        self.request = self.request.ttl(request.ttl).wait(request.wait);
        self.request.label = request.label;
        self
    }

    /// A label for the lock's hold while the work runs (see [`LockRequest::label`]).
    pub fn label(mut self, label: impl Into<String>) -> Self {
        self.request = self.request.label(label);
        self
    }

    /// The lock's lease (default 30 s), renewed while the work runs.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.request = self.request.ttl(ttl);
        self
    }

    /// Runs once per tick of a scheduled job (see [`Tick`]): the record is that of the key
    /// and the tick a run belongs to (`KEY@TICK`), kept [`Tick::KEEP`] unless
    /// [`keep`](Self::keep) says otherwise.
    pub fn tick(mut self, tick: Tick) -> Self {
        self.tick = Some(tick);
        self
    }

    /// How long the record is kept after the run that did the work recorded it (default: for
    /// ever; with a [`tick`](Self::tick), [`Tick::KEEP`]). Once it expires the work may run
    /// again: "never twice" holds within it. With a [`Tick::every`], at least twice the
    /// period (a shorter one is refused).
    pub fn keep(mut self, keep: Duration) -> Self {
        self.keep = Some(keep);
        self
    }

    /// How many runs may fail (their work returned `Err`, or the command exited non-zero)
    /// before a start gives up: [`Outcome::GaveUp`], nothing runs. Default: any number; with a
    /// [`tick`](Self::tick), [`Tick::ATTEMPTS`]. The count is kept as long as the record would
    /// be, and a run that succeeds clears it. Runs still go one at a time: a failed run's lock
    /// passes to the next start that waits for it.
    pub fn attempts(mut self, attempts: u32) -> Self {
        self.attempts = Some(attempts);
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
        let store = self.store()?;
        let record = self.record(&store).await?;
        read(&store, &record).await
    }

    /// The tick a start now would belong to (see [`tick`](Self::tick); by the server's clock
    /// for [`Tick::every`]), without taking or writing anything: what a scheduler that sends
    /// the runs stamps on them, so that a run that waits in a queue still does its own tick
    /// ([`Tick::planned`] on the receiving side). `None` without a tick.
    ///
    /// # Errors
    ///
    /// As [`done`](Self::done).
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: it only reads the server's clock.
    pub async fn current_tick(&self) -> Result<Option<SystemTime>> {
        let store = self.store()?;
        let record = self.record(&store).await?;
        Ok(record.tick.map(|placed| placed.at))
    }

    /// Takes the lock unless the work was done, and says which: the record (before or after
    /// the wait), or the lock to do the work under.
    ///
    /// # Errors
    ///
    /// As [`LockRequest::acquire`] ([`Error::TimedOut`], ...), and as [`done`](Self::done);
    /// [`Error::Fenced`] if the resource accepted a newer fence than this run's lock has (a
    /// write under the same name by something else), [`Error::FencedWrongType`] if the record's
    /// key holds something that is not a record. The lock is released on every error.
    ///
    /// # Cancel safety
    ///
    /// As [`LockRequest::acquire`].
    pub async fn begin(self) -> Result<Begun> {
        let job = self.key.clone();
        let begun = self.begin_inner(job.clone()).await;
        let outcome = match &begun {
            Ok(Begun::AlreadyDone(_)) => "already_done",
            Ok(Begun::TooLate(_)) => "too_late",
            Ok(Begun::GaveUp(_)) => "gave_up",
            Ok(Begun::Run(_)) | Err(_) => return begun,
        };
        crate::observe::once(&job, outcome);
        begun
    }

    async fn begin_inner(self, job: String) -> Result<Begun> {
        let store = self.store()?;
        let found = self.record(&store).await?;
        if let Some(placed) = &found.tick
            && placed.too_late
        {
            return Ok(Begun::TooLate(Late {
                tick: placed.at,
                late: placed.late,
            }));
        }
        let limit = self.attempts_for();
        // The record, and with a limit its failures, in one read.
        let (done, failures) = read_with_failures(&store, &found, limit.is_some()).await?;
        if let Some(done) = done {
            return Ok(Begun::AlreadyDone(done));
        }
        let tick = found.tick.as_ref().map(|placed| placed.at);
        if let (Some(limit), Some(failures)) = (limit, failures)
            && failures >= u64::from(limit)
        {
            return Ok(Begun::GaveUp(GaveUp { failures, tick }));
        }
        let Record {
            key: record,
            failures,
            ..
        } = found;
        let keep = self.keep_for();
        let guard = self.request.acquire().await?;
        // One step: this run's fence becomes the floor (a run before it, paused past its lease,
        // cannot record any more), and the record of a run this one waited for is read (and
        // the failures of runs it waited for).
        let found = store
            .run_checked(
                &BEGIN,
                guard.fence(),
                &[&record, &failures],
                &[limit.map_or(0, u64::from)],
                "begin run-once",
            )
            .await;
        match found {
            Ok(rest) if rest.len() == 2 => {
                let failures = rest.get(1).and_then(|v| as_u64(v).ok());
                let failures = failures.unwrap_or(u64::MAX);
                guard.release().await?;
                Ok(Begun::GaveUp(GaveUp { failures, tick }))
            }
            Ok(rest) => match rest.first() {
                None => {
                    // The floor, like the grant and the record, on the replicas asked for: a
                    // failover that lost it would let a stale run record after this one began.
                    if let Some(ack) = self.client.shared.replica_ack
                        && let Err(e) = store
                            .confirm_replicas(ack, guard.name(), &record, "run-once's fence floor")
                            .await
                    {
                        let _ = guard.release().await;
                        return Err(e);
                    }
                    Ok(Begun::Run(Box::new(OnceGuard {
                        guard,
                        store,
                        record,
                        failures,
                        replicas: self.client.shared.replica_ack,
                        keep,
                        tick,
                        job,
                    })))
                }
                Some(value) => {
                    let done = as_string(value).ok().and_then(|v| parse(&v, tick));
                    guard.release().await?;
                    done.map(Begun::AlreadyDone)
                        .ok_or_else(|| Error::FencedWrongType {
                            resource: store.resource().to_owned(),
                            key: record,
                            found: "a string that is not a run-once record".into(),
                        })
                }
            },
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
            Begun::TooLate(late) => return Ok(Outcome::TooLate(late)),
            Begun::GaveUp(gave_up) => return Ok(Outcome::GaveUp(gave_up)),
            Begun::Run(run) => run,
        };
        match work(run.fence()).await {
            Ok(value) => {
                run.done().await?;
                Ok(Outcome::Ran(value))
            }
            Err(e) => {
                run.failed().await?;
                Ok(Outcome::Failed(e))
            }
        }
    }

    /// The fenced store of the lock's resource, once the key and the tick's settings are
    /// checked.
    fn store(&self) -> Result<FencedStore> {
        let name = self.request.name.as_str();
        crate::keys::validate_name(&self.key).map_err(|_| {
            Error::invalid(
                name,
                format!("the once key {:?} is not a valid name", self.key),
            )
        })?;
        if let Some(tick) = &self.tick {
            tick.validate(name)?;
            if let Some(keep) = self.keep
                && keep < tick.keep_at_least()
            {
                return Err(Error::invalid(
                    name,
                    format!(
                        "a tick's record kept {keep:?} could let a start of the tick run it \
                         again: keep it at least {:?}",
                        tick.keep_at_least()
                    ),
                ));
            }
        }
        if self.attempts == Some(0) {
            return Err(Error::invalid(name, "no attempt allowed (attempts 0)"));
        }
        if self
            .keep
            .is_some_and(|keep| keep < Duration::from_millis(1))
        {
            return Err(Error::invalid(name, "a record kept for no time"));
        }
        self.client.fenced_store(name)
    }

    /// The record's key, with the tick a run starting now belongs to (by the server's clock,
    /// for [`Tick::every`]).
    async fn record(&self, store: &FencedStore) -> Result<Record> {
        let placed = match &self.tick {
            Some(tick) if tick.needs_clock() => Some(tick.place(store.server_clock().await?)),
            Some(tick) => Some(tick.place(SystemTime::UNIX_EPOCH)),
            None => None,
        };
        let key = match &placed {
            Some(placed) => format!("{}@{}", self.key, tick::text(placed.at)),
            None => self.key.clone(),
        };
        let (prefix, name) = (&self.client.shared.prefix, self.request.name.as_str());
        Ok(Record {
            key: format!("{prefix}:once:{{{name}}}:{key}"),
            failures: format!("{prefix}:once-failed:{{{name}}}:{key}"),
            tick: placed,
        })
    }

    /// How many runs may fail (`None`: any number).
    fn attempts_for(&self) -> Option<u32> {
        match (self.attempts, &self.tick) {
            (Some(attempts), _) => Some(attempts),
            (None, Some(_)) => Some(Tick::ATTEMPTS),
            (None, None) => None,
        }
    }

    /// How long the record is kept (`None`: for ever).
    fn keep_for(&self) -> Option<Duration> {
        match (self.keep, &self.tick) {
            (Some(keep), _) => Some(keep),
            (None, Some(tick)) => Some(Tick::KEEP.max(tick.keep_at_least())),
            (None, None) => None,
        }
    }
}

async fn read(store: &FencedStore, record: &Record) -> Result<Option<Done>> {
    let value = store.get(&record.key).await?;
    let tick = record.tick.as_ref().map(|placed| placed.at);
    Ok(value.and_then(|value| parse(&value, tick)))
}

/// The record, and (`with_failures`) how many of its runs failed, if any did: one read.
async fn read_with_failures(
    store: &FencedStore,
    record: &Record,
    with_failures: bool,
) -> Result<(Option<Done>, Option<u64>)> {
    if !with_failures {
        return Ok((read(store, record).await?, None));
    }
    let mut values = store
        .get_many(&[&record.key, &record.failures])
        .await?
        .into_iter();
    let tick = record.tick.as_ref().map(|placed| placed.at);
    let done = values.next().flatten().and_then(|v| parse(&v, tick));
    let failures = values.next().flatten().and_then(|v| v.parse().ok());
    Ok((done, failures))
}

/// A record's `<fence>:<ms>`, of the tick `tick`.
fn parse(value: &str, tick: Option<SystemTime>) -> Option<Done> {
    let (fence, at) = value.split_once(':')?;
    Some(Done {
        fence: fence.parse().ok()?,
        at: SystemTime::UNIX_EPOCH + Duration::from_millis(at.parse().ok()?),
        tick,
    })
}
