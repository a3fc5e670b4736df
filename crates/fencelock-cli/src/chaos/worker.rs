//! One worker process of a chaos run (the hidden `chaos-worker` subcommand): it takes one of
//! the run's locks, does a fenced write and a read-modify-write of an unfenced counter, holds
//! for a moment, says whether it was told the lock was lost, releases — and reports every step
//! as a history line on stdout, until its stdin closes.

use std::io::Write as _;
use std::time::Duration;

use fencelock::fenced::Writes;

use super::history::{Entry, What, instant_ns, mono_ns};
use super::{Kind, Mutation, Rng, Topology, counter_key, log_key};
use crate::error::{CliError, EXIT_FAILURE};
use crate::process::stop_on_stdin_eof;

/// Arguments of `fencelock chaos-worker` (started by `fencelock chaos`, not by people).
#[derive(Debug, clap::Args)]
pub struct ChaosWorkerArgs {
    /// The lock servers, comma-separated (in the environment, never on the command line)
    #[arg(long, env = "FENCELOCK_URL", hide_env_values = true)]
    url: String,
    /// The server of the fenced store and the unfenced counter
    #[arg(long, env = "FENCELOCK_CHAOS_STORE_URL", hide_env_values = true)]
    store_url: String,
    /// This worker's number
    #[arg(long)]
    id: u32,
    /// How the lock servers are deployed
    #[arg(long, value_enum)]
    topology: Topology,
    /// The kind of lock
    #[arg(long, value_enum)]
    kind: Kind,
    /// The semaphore's permits
    #[arg(long, default_value_t = 1)]
    permits: u32,
    /// The lock names, comma-separated
    #[arg(long)]
    locks: String,
    /// The lease, in milliseconds
    #[arg(long)]
    ttl_ms: u64,
    /// The seed of this worker's choices
    #[arg(long)]
    seed: u64,
    /// Deliberate bugs, for the checker's own test (comma-separated)
    #[arg(long, default_value = "")]
    mutate: String,
}

/// Runs the worker; an error is reported on stderr and as the exit status.
pub async fn run(args: ChaosWorkerArgs) -> Result<(), CliError> {
    match work(&args).await {
        Ok(()) => Ok(()),
        Err(err) => {
            eprintln!("fencelock chaos-worker {}: {err}", args.id);
            Err(CliError::Reported { code: EXIT_FAILURE })
        }
    }
}

fn emit(entry: &Entry) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    entry
        .write_to(&mut stdout)
        .and_then(|()| stdout.flush())
        .map_err(|e| CliError::io("cannot report to the chaos run (stdout)", e))
}

async fn work(args: &ChaosWorkerArgs) -> Result<(), CliError> {
    exit_with_parent();
    let mut worker = Worker::connect(args).await?;
    let locks: Vec<&str> = args.locks.split(',').filter(|l| !l.is_empty()).collect();
    let mut rng = Rng::new(args.seed ^ u64::from(args.id).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    let stop = stop_on_stdin_eof();
    while !*stop.borrow() {
        let Some(&lock) = locks.get(rng.below(locks.len() as u64) as usize) else {
            break;
        };
        worker.round(lock, &mut rng).await?;
    }
    Ok(())
}

/// A worker's connections and settings.
struct Worker<'a> {
    args: &'a ChaosWorkerArgs,
    /// The lock servers' client.
    client: fencelock::Client,
    /// The store's server: through the library (fenced writes) and directly.
    store_client: fencelock::Client,
    raw: redis::aio::MultiplexedConnection,
    mutations: Vec<Mutation>,
    ttl: Duration,
}

impl<'a> Worker<'a> {
    async fn connect(args: &'a ChaosWorkerArgs) -> Result<Worker<'a>, CliError> {
        let urls: Vec<&str> = args.url.split(',').filter(|u| !u.is_empty()).collect();
        let ttl = Duration::from_millis(args.ttl_ms);
        let client = match args.topology {
            Topology::Single => fencelock::Client::builder(&args.url),
            Topology::Redlock => fencelock::Client::redlock(&urls),
            Topology::Cluster => fencelock::Client::cluster(&urls),
            Topology::Sentinel => {
                fencelock::Client::sentinel(&urls, fencelock_testkit::SENTINEL_MASTER)
            }
        }
        .command_timeout(ttl / 2)
        .build()?;
        let store_client = fencelock::Client::builder(&args.store_url)
            .command_timeout(Duration::from_secs(2))
            .build()?;
        let raw = redis::Client::open(args.store_url.as_str())
            .map_err(|e| CliError::InvalidUrl(e.to_string()))?;
        let raw = raw
            .get_multiplexed_async_connection()
            .await
            .map_err(|e| CliError::Redis {
                server: "store".into(),
                what: "the connection",
                reason: e.to_string(),
            })?;
        let mutations = Mutation::parse_list(&args.mutate).map_err(CliError::Usage)?;
        Ok(Worker {
            args,
            client,
            store_client,
            raw,
            mutations,
            ttl,
        })
    }

    /// Reports `what` about `lock` as this worker's history line.
    fn emit(&self, lock: &str, what: What) -> Result<(), CliError> {
        emit(&Entry::now(Some(self.args.id), Some(lock), what))
    }

    /// One round: take `lock`, work under it, say whether it was lost, release.
    async fn round(&mut self, lock: &str, rng: &mut Rng) -> Result<(), CliError> {
        self.emit(lock, What::Acquire)?;
        let guard = match self.acquire(lock).await? {
            Ok(guard) => guard,
            Err(err) => {
                let outcome = match &err {
                    fencelock::Error::Busy { .. } | fencelock::Error::TimedOut { .. } => err.code(),
                    _ => "error",
                };
                let error = (outcome == "error").then(|| err.to_string());
                let outcome = outcome.into();
                self.emit(lock, What::NotGranted { outcome, error })?;
                tokio::time::sleep(Duration::from_millis(rng.between(5, 50))).await;
                return Ok(());
            }
        };
        let fence = guard.fence();
        self.emit(lock, What::Granted { fence })?;
        self.hold(lock, fence, rng).await?;
        if !guard.is_held() && !self.mutations.contains(&Mutation::NeverLost) {
            let reason = tokio::time::timeout(Duration::from_millis(200), guard.lost())
                .await
                .map_or_else(|_| "deadline passed".to_owned(), |r| r.to_string());
            let deadline_ns = Some(instant_ns(guard.deadline().into_std()));
            self.emit(
                lock,
                What::Lost {
                    fence,
                    reason,
                    deadline_ns,
                },
            )?;
        }
        self.emit(lock, What::Release { fence })?;
        if self.mutations.contains(&Mutation::ReleaseAny) {
            // Deletes whoever holds the lock now, token or not, and wakes the waiters.
            let _ = self.client.force_release(lock).await;
        }
        let (held, error) = match guard.release().await {
            Ok(held) => (Some(held), None),
            Err(e) => (None, Some(e.to_string())),
        };
        self.emit(lock, What::Released { fence, held, error })?;
        tokio::time::sleep(Duration::from_millis(rng.between(0, 5))).await;
        Ok(())
    }

    /// Asks for `lock` (the kind of the run), waiting up to three leases. The outer error ends
    /// the worker; the inner one is a refusal to report.
    async fn acquire(
        &self,
        lock: &str,
    ) -> Result<Result<fencelock::LockGuard, fencelock::Error>, CliError> {
        let client = &self.client;
        let request = match self.args.kind {
            Kind::Lock => client.lock(lock),
            Kind::Reentrant => client.reentrant_lock(lock).request(),
            Kind::Write => client.read_write_lock(lock).write(),
            Kind::Semaphore => client.semaphore(lock, self.args.permits),
            Kind::Fair => client.fair_lock(lock),
        };
        Ok(request
            .ttl(self.ttl)
            .wait_up_to(self.ttl * 3)
            .acquire()
            .await)
    }

    /// The work under the lock: a fenced write, a read-modify-write of the unfenced counter, a
    /// moment's hold, another fenced write (a pause in between makes it stale).
    async fn hold(&mut self, lock: &str, fence: u64, rng: &mut Rng) -> Result<(), CliError> {
        // Permits are held together: a semaphore's holders do not write to the store.
        let fenced = self.args.kind != Kind::Semaphore;
        if fenced {
            self.fenced_write(lock, fence).await?;
        }
        let read: redis::RedisResult<Option<u64>> = redis::cmd("GET")
            .arg(counter_key(lock))
            .query_async(&mut self.raw)
            .await;
        if let Ok(read) = read {
            let read = read.unwrap_or(0);
            tokio::time::sleep(Duration::from_millis(1)).await;
            let wrote: redis::RedisResult<()> = redis::cmd("SET")
                .arg(counter_key(lock))
                .arg(read + 1)
                .query_async(&mut self.raw)
                .await;
            if wrote.is_ok() {
                self.emit(lock, What::Counter { read })?;
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.between(5, 25))).await;
        if fenced {
            self.fenced_write(lock, fence).await?;
        }
        Ok(())
    }

    /// One fenced write (an entry in the store's log), and its history line.
    async fn fenced_write(&mut self, lock: &str, fence: u64) -> Result<(), CliError> {
        let started_ns = mono_ns();
        let entry = format!("{fence}:{}", self.args.id);
        let (accepted, store_fence, error) = if self.mutations.contains(&Mutation::UnfencedStore) {
            let pushed: redis::RedisResult<i64> = redis::cmd("RPUSH")
                .arg(log_key(lock))
                .arg(&entry)
                .query_async(&mut self.raw)
                .await;
            match pushed {
                Ok(_) => (Some(true), Some(fence), None),
                Err(e) => (None, None, Some(e.to_string())),
            }
        } else {
            let store = self.store_client.fenced_store(lock)?;
            match store
                .apply(fence, &Writes::new().rpush(&log_key(lock), &entry))
                .await
            {
                Ok(accepted) => (Some(true), Some(accepted), None),
                Err(fencelock::Error::Fenced { accepted, .. }) => {
                    (Some(false), Some(accepted), None)
                }
                Err(e) => (None, None, Some(e.to_string())),
            }
        };
        let write = What::Write {
            fence,
            started_ns,
            accepted,
            store_fence,
            error,
        };
        self.emit(lock, write)
    }
}

/// Exits when the run that started this worker is gone (a worker stopped with SIGSTOP at that
/// moment gets SIGHUP and SIGCONT from the kernel, its process group being orphaned).
fn exit_with_parent() {
    let parent = nix::unistd::getppid();
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_millis(500)).await;
            if nix::unistd::getppid() != parent {
                std::process::exit(i32::from(EXIT_FAILURE));
            }
        }
    });
}
