//! `fencelock run NAME... -- COMMAND [ARGS...]`: the distributed `flock(1)`.
//!
//! Acquire the lock (waiting as asked), run the command in a process group of its own with the
//! lock's name and fencing token in its environment while the library's watchdog renews the
//! lease, release the lock when the command and everything it started have ended, and exit with
//! the command's exit code. If the lock is lost while the command runs, the command's process
//! tree gets SIGTERM, then SIGKILL after a grace period, and `fencelock` exits with
//! [`EXIT_LOCK_LOST`](crate::error::EXIT_LOCK_LOST).
//!
//! With several names the command runs under all of them (a multi-lock); with `--permits N`
//! under permits of the semaphore NAME (one, or `--take K`); with `--once KEY` only if KEY was
//! not done before, and KEY is recorded as done when it succeeds (NAME, the lock the runs take
//! turns on, is KEY when left out, as in the libraries' `once`).
//!
//! `fencelock` supervises the command's whole process tree: the lock is given back only once
//! nothing the command started is alive, whatever ends the run (the command's exit, a loss, a
//! release request, the launcher's death); `job.rs` says what that covers and what it cannot.
//!
//! The module serves `run` and `elect` alike: what is held (`held.rs`), the command under it
//! (`job.rs`: started through the launcher of `launch.rs`, watched in `child.rs`, its tree
//! (`tree.rs`) stopped by the ladder of `ladder.rs`), the signals, the exit statuses in the
//! command's terms (`status.rs`), and the `FENCELOCK_*` names (`env.rs`). `elect.rs` is a thin
//! command over it.

mod acquire;
mod child;
pub mod elect;
mod env;
mod flags;
mod held;
mod job;
mod ladder;
pub mod launch;
mod signals;
mod status;
mod tick;
mod tree;
mod watch;

use crate::error::{exit, exit_help};
use std::ffi::{OsStr, OsString};
use std::time::Duration;

use crate::duration::parse_duration;
use crate::error::CliError;
use crate::servers::{ServerArgs, Servers};
use flags::{LabelArgs, StopArgs, WaitArgs};
use held::Held;
use job::Job;
use signals::Signals;

/// How long `run` waits, before it exits, for work the library still has under way in the
/// background: the give-back of an abandoned acquisition, and over several servers the release
/// calls to the slowest of them.
const FINISH_LIMIT: Duration = Duration::from_secs(2);

pub const LONG_ABOUT: &str = "\
Run a command while holding a distributed lock: the distributed flock(1).

fencelock acquires the lock NAME (waiting for it as long as it takes, or up to --wait, or not at \
all with --no-wait), then runs COMMAND directly (no shell) with its arguments; stdin, stdout and \
stderr are inherited. The command gets in its environment:
  FENCELOCK_NAME    the lock's name (one NAME only)
  FENCELOCK_FENCE   its fencing token: larger than that of every earlier holder of NAME (one \
NAME only)
  FENCELOCK_NAMES   every NAME held, comma-separated, in the order given
  FENCELOCK_FENCES  each NAME's fence, comma-separated, in the order of FENCELOCK_NAMES
  FENCELOCK_PERMITS the semaphore's N (--permits only)
  FENCELOCK_TAKEN   how many of its permits the command holds, 1 or --take K (--permits only)
A fence belongs to one name: with several names FENCELOCK_NAME and FENCELOCK_FENCE are not set \
at all (never empty), so that a script's ${FENCELOCK_FENCE:?} stops instead of passing no fence; \
take each name's fence from FENCELOCK_FENCES. A variable fencelock does not set is not inherited \
either (an outer fencelock's would describe another lock).

The \
lease (--ttl) is renewed every third of its length while the command runs, and the lock is \
released when the command ends; fencelock then exits with the command's exit code (128+N if a \
signal N killed it).

The lock is released only once nothing the command started is still running. What it leaves \
behind when it exits (a background job, a daemon that left its process group with setsid or a \
double fork: fencelock and its launcher are child subreapers, so such a process stays in their \
tree) gets SIGTERM, then SIGKILL after --kill-after, before the release. The same holds when \
the lock is lost, when a release is requested, and when fencelock's launcher is killed (exit \
125). What the tree cannot hold is work handed to a process outside it (systemd-run --user, a \
service started through D-Bus, at): keep the work inside by running it in the foreground.

A lock on Redis is a lease, not a mutex. If the lock is lost while the command runs (the lease \
could not be renewed in time, or an operator ran `fencelock release --force`), the command's \
process tree gets SIGTERM, then SIGKILL after --kill-after-loss (1s), and fencelock exits with \
74. While the lock is held it outlives every process of the command: one that survives SIGKILL \
is reported, and the lock is kept until it has ended. Pass \
$FENCELOCK_FENCE to the resource the command writes to, so that it can refuse a holder that \
lost the lock without knowing it.

The command runs in a process group of its own, like under timeout(1) (it should not read from \
the terminal: it is not in the terminal's foreground process group). fencelock catches every \
signal it can from its start. SIGHUP, SIGINT, SIGQUIT and SIGTERM end a wait at once (exit \
128+N, nothing held); once the command runs they are passed on to its group, as are ABRT, USR1, \
USR2, ALRM, STKFLT, URG, XCPU, XFSZ, VTALRM, PROF, WINCH, IO and PWR (one that arrives before \
the command runs is passed on once it does). Job control keeps the command inside its lock: \
SIGTSTP (Ctrl-Z), SIGTTIN and SIGTTOU stop the command's tree first, then fencelock (a SIGSTOP \
to fencelock is seen by its launcher, which stops the tree); when fencelock is continued it \
checks its lock before the command: still held, the command goes on; lost meanwhile, the \
command is killed without running again and fencelock exits with 74. docs/command.md has the \
table of every signal in every phase.

Asked to let go (`fencelock release --ask NAME`), fencelock passes the request on to the \
command's process group (SIGTERM, or --on-request SIGNAL), gives it --grace to end, sends SIGKILL \
to what is left of its tree after that, releases the lock and exits with the command's code. \
Signals sent to fencelock meanwhile are still forwarded (a Ctrl-C reaches the command), and a \
loss of the lock meanwhile cuts the grace short (SIGKILL, exit 74).

With --permits N, NAME is a semaphore of N permits instead of a lock: up to N commands run at \
once under it, each holding one permit (a lease of its own, renewed and lost like a lock) with a \
fence of its own, and FENCELOCK_PERMITS=N in its environment. Every user of NAME must pass the \
same --permits while any permit is held (exit 2 otherwise, nothing run); --permits 1 is a \
semaphore of one permit, not the plain lock, and refuses a `fencelock run NAME` without \
--permits (and the other way round). A semaphore needs a single Redis server: over Redlock \
majority voting cannot bound the holders to N, so --permits with several servers is refused \
(exit 2) before anything is sent.";

/// The help after `fencelock run`'s options.
pub fn after_help() -> String {
    exit_help(
        &[
            exit::COMMAND,
            exit::USAGE.saying(
                "usage error (nothing was run): a bad option, an invalid lock name or Redis URL, \
                 --permits with several servers or other than that of NAME's holders, or NAME \
                 in use as another kind of lock",
            ),
            exit::REDIS,
            exit::NOT_ACQUIRED.saying(
                "not acquired: held by another owner or all N permits held (--no-wait), or \
                 --wait ran out",
            ),
            exit::LOST,
            exit::NOT_RECORDED,
            exit::LAUNCHER,
            exit::CANNOT_EXECUTE,
            exit::NOT_FOUND,
            exit::SIGNALLED,
            exit::OTHER,
        ],
        "\
fencelock prints a line starting with \"fencelock:\" on stderr whenever the status is its own.

Servers: --url (repeatable: several mean Redlock), else $FENCELOCK_URL (comma-separated),
else the file named by $FENCELOCK_URL_FILE, else redis://127.0.0.1:6379. Put URLs with a
password in the environment or the file, never on the command line.

Examples:
  fencelock run nightly-report -- ./make-report.sh --date today
  fencelock run --no-wait backup -- rsync -a /data/ backup:/data/
  fencelock run --wait 5m --ttl 10s migrate -- sh -c 'exec ./migrate --fence \"${FENCELOCK_FENCE:?}\"'
  fencelock run --permits 3 transcode -- ./transcode.sh   # at most 3 at once, fleet-wide
  FENCELOCK_URL=redis://r1:6379,redis://r2:6379,redis://r3:6379 fencelock run job -- ./job",
    )
}

/// Arguments of `fencelock run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    #[command(flatten)]
    servers: ServerArgs,

    /// The lease: how long the lock outlives a fencelock that stops renewing it (crashed,
    /// frozen, cut off). Renewed every third of it while the command runs
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    ttl: Duration,

    /// A lock-delay: if this fencelock dies or freezes and its lease runs out without a
    /// release, NAME is not granted again for this long after (time for a resource that cannot
    /// check fences to notice). A release, including the one after the command ends, ends the
    /// delay at once
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    lock_delay: Option<Duration>,

    #[command(flatten)]
    wait: WaitArgs,

    #[command(flatten)]
    stop: StopArgs,

    #[command(flatten)]
    label: LabelArgs,

    /// Take permits of the semaphore NAME with N permits instead of the lock: at most N
    /// permits held at once. Every user of NAME must pass the same N (--permits 1 is not the
    /// plain lock); a single Redis server only (not Redlock)
    #[arg(long, value_name = "N", value_parser = parse_permits)]
    permits: Option<u32>,

    /// With --permits: hold K of the N permits (one lease, one fence), granted when K are free
    /// after what the requests that waited longer take (first come, first served)
    #[arg(long, value_name = "K", value_parser = parse_permits, requires = "permits")]
    take: Option<u32>,

    /// Run COMMAND only if KEY is not done yet, and record KEY as done when COMMAND exits 0 (a
    /// fenced write with the lock's fence). A run that finds KEY done, also after waiting for
    /// the lock, exits 0 without running anything. The runs take turns on the lock NAME, by
    /// default the lock named KEY (the record of the libraries' `once(KEY)`)
    #[arg(long, value_name = "KEY", conflicts_with = "permits")]
    once: Option<String>,

    #[command(flatten)]
    schedule: tick::TickArgs,

    #[command(flatten)]
    metrics: crate::metrics_file::MetricsFileArgs,

    /// The lock's name (no braces, no control characters). Several: all of them are held
    /// (every one or none; never waiting while holding some). With --once: one, or none for the
    /// lock named KEY
    #[arg(value_name = "NAME", required_unless_present = "once", num_args = 1..)]
    names: Vec<String>,

    /// The command to run and its arguments, after `--`
    #[arg(value_name = "COMMAND", last = true, required = true, num_args = 1..)]
    command: Vec<OsString>,
}

impl RunArgs {
    /// The name of the one lock the run takes: the first NAME, or with `--once KEY` and no NAME
    /// the key (as the libraries' `once(KEY)`).
    fn name(&self) -> &str {
        self.names
            .first()
            .or(self.once.as_ref())
            .map_or("", String::as_str)
    }
}

/// Runs `fencelock run`. `Ok(())` means exit 0; the command's non-zero exit code comes back as
/// [`CliError::Reported`].
pub async fn run(args: RunArgs) -> Result<(), CliError> {
    let servers = args.servers.resolve()?;
    let (program, program_args) = child::split_checked(&args.command)?;
    if args.names.len() > 1 && (args.permits.is_some() || args.once.is_some()) {
        return Err(CliError::Usage(
            "several names hold several plain locks: --permits and --once take one name".into(),
        ));
    }
    // A lock-delay is a property of one lock's lease: the requests of several names and of a
    // run-once take none, and silently running without the delay would leave the resource
    // unprotected.
    if args.lock_delay.is_some() && (args.names.len() > 1 || args.once.is_some()) {
        return Err(CliError::Usage(
            "--lock-delay applies to one name (a lock or permits): it cannot be given with \
             several names or with --once"
                .into(),
        ));
    }
    if let (Some(permits), Some(take)) = (args.permits, args.take)
        && take > permits
    {
        return Err(CliError::Usage(format!(
            "--take {take} asks for more than the semaphore's {permits} permits"
        )));
    }
    let mut signals = Signals::new()?;
    let client = servers.client()?;
    let metrics = crate::metrics_file::MetricsFile::start(&args.metrics, args.name()).await?;
    let under_lock = UnderLock {
        args: &args,
        servers: &servers,
        program,
        program_args,
    };
    let outcome = under_lock.run(&client, &mut signals).await;
    // Let what the library still has under way in the background (a cancelled acquisition's
    // give-back; over several servers, releases to the slowest) finish before the process ends.
    client.wait_idle(FINISH_LIMIT).await;
    if let Some(metrics) = metrics {
        metrics.finish().await;
    }
    outcome
}

/// One run of the command under the lock.
struct UnderLock<'a> {
    args: &'a RunArgs,
    servers: &'a Servers,
    program: &'a OsStr,
    program_args: &'a [OsString],
}

impl UnderLock<'_> {
    async fn run(&self, client: &fencelock::Client, signals: &mut Signals) -> Result<(), CliError> {
        let args = self.args;
        let names = &args.names;
        if let Some(key) = &args.once {
            return self.once(client, key, signals).await;
        }
        if names.len() > 1 {
            let guard = acquire::acquire_all(client, args, self.servers, signals).await?;
            let fences: Vec<String> = guard.fences().map(|(_, f)| f.to_string()).collect();
            let job = self.job(
                format!("locks {}", names.join(", ")),
                vec![
                    (env::NAMES, names.join(",")),
                    (env::FENCES, fences.join(",")),
                ],
            );
            return job.run(guard, signals).await;
        }
        let guard = acquire::acquire(client, args, self.servers, signals).await?;
        let fence = guard.fence();
        tracing::debug!(lock = %guard.name(), fence, "acquired");
        let held = match (args.permits, args.take) {
            (Some(n), Some(k)) if k > 1 => {
                format!("{k} permits of semaphore {:?} ({n} permits)", guard.name())
            }
            (Some(n), _) => format!("permit of semaphore {:?} ({n} permits)", guard.name()),
            (None, _) => format!("lock {:?}", guard.name()),
        };
        let mut env = single_env(guard.name(), fence);
        if let Some(permits) = args.permits {
            env.push((env::PERMITS, permits.to_string()));
            env.push((env::TAKEN, args.take.unwrap_or(1).to_string()));
        }
        self.job(held, env).run(guard, signals).await
    }

    /// `--once KEY`: the command runs only if KEY is not done, and KEY is recorded when it
    /// succeeds.
    async fn once(
        &self,
        client: &fencelock::Client,
        key: &str,
        signals: &mut Signals,
    ) -> Result<(), CliError> {
        use fencelock::once::Begun;
        let skipped =
            match acquire::begin_once(client, self.args, key, self.servers, signals).await? {
                Begun::Run(run) => {
                    let run = *run;
                    let name = run.guard().name().to_owned();
                    let mut env = single_env(&name, run.fence());
                    let mut held = format!("lock {name:?} (once {key:?}");
                    if let Some(at) = run.tick() {
                        held.push_str(&format!(", tick {})", tick::text(at)));
                        env.push((env::TICK, tick::text(at)));
                    } else {
                        held.push(')');
                    }
                    return self.job(held, env).run(run, signals).await;
                }
                Begun::AlreadyDone(done) => {
                    let what = tick::described(key, done.tick);
                    format!(
                        "{what} was done before (fence {}); nothing was run",
                        done.fence
                    )
                }
                Begun::GaveUp(gave_up) => {
                    let what = tick::described(key, gave_up.tick);
                    return Err(CliError::Failed {
                        message: format!(
                            "{what}: {} runs failed, as many as --attempts allows; nothing was run \
                         (the count is the key PREFIX:once-failed:{{NAME}}:KEY; delete it to \
                         try again)",
                            gave_up.failures
                        ),
                        code: crate::error::EXIT_FAILURE,
                    });
                }
                Begun::TooLate(late) => format!(
                    "{key:?}: this start is {} after its tick {} began, later than --late allows; \
                 nothing was run",
                    crate::duration::format_rounded(late.late),
                    tick::text(late.tick)
                ),
            };
        eprintln!("fencelock: {skipped}");
        match self.args.schedule.done_exit {
            0 => Ok(()),
            code => Err(CliError::Reported { code }),
        }
    }

    fn job(&self, held: String, env: Vec<(&'static str, String)>) -> Job<'_> {
        let args = self.args;
        Job {
            name: args.name(),
            held,
            number: "fence",
            program: self.program,
            program_args: self.program_args,
            kill_after: args.stop.kill_after,
            kill_after_loss: args.stop.kill_after_loss,
            on_request: (args.stop.on_request, args.stop.grace),
            env,
        }
    }
}

/// The environment of a command under one name.
fn single_env(name: &str, fence: u64) -> Vec<(&'static str, String)> {
    vec![
        (env::NAME, name.to_owned()),
        (env::FENCE, fence.to_string()),
        (env::NAMES, name.to_owned()),
        (env::FENCES, fence.to_string()),
    ]
}

/// `--permits`: a number of permits, at least 1.
fn parse_permits(text: &str) -> Result<u32, String> {
    match text.trim().parse::<u32>() {
        Ok(0) => Err("a semaphore needs at least 1 permit; --permits 0 would let no one in".into()),
        Ok(permits) => Ok(permits),
        Err(_) => Err(format!(
            "{text:?} is not a number of permits: write a whole number from 1 to {}",
            u32::MAX
        )),
    }
}

#[cfg(test)]
mod tests {
    use crate::error::{
        EXIT_CANNOT_EXECUTE, EXIT_FAILURE, EXIT_LAUNCHER, EXIT_LOCK_LOST, EXIT_NOT_ACQUIRED,
        EXIT_NOT_FOUND, EXIT_REDIS, EXIT_SIGHUP, EXIT_SIGINT, EXIT_SIGTERM, EXIT_USAGE,
    };

    /// The codes at the start of each line of the help's "Exit status" section.
    fn listed(help: &str) -> Vec<String> {
        help.lines()
            .skip_while(|l| *l != "Exit status:")
            .skip(1)
            .take_while(|l| !l.is_empty())
            .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
            .flat_map(|l| {
                let label = l.trim_start().split("  ").next().unwrap_or_default();
                label.split(", ").map(str::to_owned).collect::<Vec<_>>()
            })
            .collect()
    }

    /// Whether `help` names the variable `name` as a whole word (`FENCELOCK_NAME` is not in
    /// `FENCELOCK_NAMES`).
    fn names(help: &str, name: &str) -> bool {
        help.match_indices(name).any(|(at, _)| {
            !help[at + name.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        })
    }

    #[test]
    fn run_and_elect_name_every_variable_their_command_gets() {
        use super::env;
        for name in [
            env::NAME,
            env::FENCE,
            env::NAMES,
            env::FENCES,
            env::PERMITS,
            env::TAKEN,
        ] {
            assert!(names(super::LONG_ABOUT, name), "run --help lacks {name}");
        }
        for name in [env::NAME, env::FENCE, env::NAMES, env::FENCES, env::TERM] {
            assert!(
                names(super::elect::LONG_ABOUT, name),
                "elect --help lacks {name}"
            );
        }
        assert!(
            super::LONG_ABOUT.contains("FENCELOCK_NAME and FENCELOCK_FENCE are not set"),
            "run --help must say what several names leave out"
        );
    }

    #[test]
    fn run_and_elect_list_every_status_of_their_own() {
        for help in [super::after_help(), super::elect::after_help()] {
            let listed = listed(&help);
            for code in [
                EXIT_USAGE,
                EXIT_REDIS,
                EXIT_NOT_ACQUIRED,
                EXIT_LOCK_LOST,
                EXIT_LAUNCHER,
                EXIT_CANNOT_EXECUTE,
                EXIT_NOT_FOUND,
                EXIT_SIGHUP,
                EXIT_SIGINT,
                EXIT_SIGTERM,
                EXIT_FAILURE,
            ] {
                assert!(
                    listed.contains(&code.to_string()),
                    "{code} missing from:\n{help}"
                );
            }
            assert!(listed.contains(&"0-255".to_owned()), "{help}");
        }
    }
}
