//! `fencelock elect NAME --value V -- COMMAND [ARGS...]`: run a command while leading an
//! election, as `fencelock run` runs one under a lock (the same child handling, signals and exit
//! codes), with the term in its environment; resign when it ends.

use crate::error::{exit, exit_help};
use std::ffi::OsString;
use std::future::{Future, IntoFuture};
use std::time::Duration;

use super::flags::{LabelArgs, StopArgs, WaitArgs};
use super::signals::Signals;
use super::{FINISH_LIMIT, Held, Job, acquire, child, env};
use crate::duration::parse_duration;
use crate::error::{CliError, EXIT_USAGE};
use crate::servers::{ServerArgs, Servers};

pub const LONG_ABOUT: &str = "\
Run a command while leading an election: campaign, lead, resign.

fencelock campaigns for the election NAME with --value (what `fencelock leader NAME` shows about \
the leader: an address, a host name), waiting as long as it takes (or up to --wait, or not at \
all with --no-wait). Once it leads, it runs COMMAND (no shell) with FENCELOCK_NAME and \
FENCELOCK_NAMES (NAME), FENCELOCK_TERM, FENCELOCK_FENCE and FENCELOCK_FENCES (the term, the same \
number: larger than every earlier leader's) in its environment (an outer fencelock's \
FENCELOCK_PERMITS and FENCELOCK_TAKEN are not inherited: they would describe another lock). The \
leadership is a lock on NAME with the lease --ttl, renewed \
while the command runs; when the command ends, fencelock resigns (observers are told at once) \
and exits with the command's exit code.

Asked to step down (`fencelock release --ask NAME`, as a rolling deploy does), fencelock passes \
the request on to the command's process group (SIGTERM, or --on-request SIGNAL), gives it \
--grace to end, and resigns when it has.

If the leadership is lost while the command runs (the lease could not be renewed in time, or \
this process was stopped past its lease and another leader took over), the command's process \
tree gets SIGTERM, then SIGKILL after --kill-after-loss (1s), and fencelock exits with 74, \
exactly as `fencelock run` does when its lock is lost; signals and job control (Ctrl-Z) are \
handled as under `fencelock run`. As under `fencelock run`, fencelock resigns only once \
nothing the command started is still running: what it leaves behind when it exits is stopped \
first (SIGTERM, SIGKILL after --kill-after). Pass $FENCELOCK_TERM to what the leader writes to, \
so that a deposed leader's late writes can be refused.

An election needs one Redis server, a cluster or sentinels; several --url (Redlock) are refused \
(exit 2).";

/// The help after the options.
pub fn after_help() -> String {
    exit_help(
        &[
            exit::COMMAND,
            exit::USAGE,
            exit::REDIS,
            exit::NOT_ACQUIRED.saying("not leading with --no-wait, or --wait ran out"),
            exit::LOST.saying("the leadership was lost while the command ran (it was stopped)"),
            exit::LAUNCHER,
            exit::CANNOT_EXECUTE,
            exit::NOT_FOUND,
            exit::SIGNALLED
                .saying("SIGHUP, SIGINT, SIGQUIT, SIGTERM while campaigning (nothing was run)"),
            exit::OTHER,
        ],
        "\
Examples:
  fencelock elect scheduler --value \"$(hostname)\" -- ./scheduler --term-from-env
  fencelock elect --ttl 5s --no-wait primary --value 10.0.0.7:5432 -- ./promote.sh",
    )
}

/// Arguments of `fencelock elect`.
#[derive(Debug, clap::Args)]
pub struct ElectArgs {
    #[command(flatten)]
    servers: ServerArgs,

    /// What the leader announces about itself (shown by `fencelock leader`)
    #[arg(long, value_name = "VALUE")]
    value: String,

    /// The leadership's lease: how long it outlives a fencelock that stops renewing it
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration)]
    ttl: Duration,

    #[command(flatten)]
    wait: WaitArgs,

    #[command(flatten)]
    stop: StopArgs,

    #[command(flatten)]
    label: LabelArgs,

    #[command(flatten)]
    metrics: crate::metrics_file::MetricsFileArgs,

    /// The election's name (no braces, no control characters); also its lock's
    #[arg(value_name = "NAME")]
    name: String,

    /// The command to run while leading, and its arguments, after `--`
    #[arg(value_name = "COMMAND", last = true, required = true, num_args = 1..)]
    command: Vec<OsString>,
}

impl Held for fencelock::election::Leadership {
    fn fence(&self) -> u64 {
        self.term()
    }
    fn lost(&self) -> super::held::Loss {
        Box::pin(fencelock::election::Leadership::lost(self).into_future())
    }
    fn is_held(&self) -> bool {
        self.guard().is_held()
    }
    fn give_back(self) -> impl Future<Output = fencelock::Result<bool>> {
        self.resign()
    }
    fn release_requested(&self) -> impl Future<Output = ()> + 'static {
        // `fencelock release --ask NAME` asks the leadership's lock: the leader steps down when
        // its command has ended.
        self.guard().release_requested()
    }
}

/// Runs `fencelock elect`.
pub async fn elect(args: ElectArgs) -> Result<(), CliError> {
    let servers = args.servers.resolve()?;
    let (program, program_args) = child::split_checked(&args.command)?;
    let mut signals = Signals::new()?;
    let client = servers.client()?;
    let metrics = crate::metrics_file::MetricsFile::start(&args.metrics, &args.name).await?;
    let outcome = async {
        let leadership = campaign(&client, &args, &servers, &mut signals).await?;
        let term = leadership.term();
        tracing::debug!(election = %args.name, term, "leading");
        let job = Job {
            name: &args.name,
            held: format!("leadership of election {:?}", args.name),
            number: "term",
            program,
            program_args,
            kill_after: args.stop.kill_after,
            kill_after_loss: args.stop.kill_after_loss,
            on_request: (args.stop.on_request, args.stop.grace),
            env: vec![
                (env::NAME, args.name.clone()),
                (env::FENCE, term.to_string()),
                (env::NAMES, args.name.clone()),
                (env::FENCES, term.to_string()),
                (env::TERM, term.to_string()),
            ],
        };
        job.run(leadership, &mut signals).await
    }
    .await;
    client.wait_idle(FINISH_LIMIT).await;
    if let Some(metrics) = metrics {
        metrics.finish().await;
    }
    outcome
}

/// Campaigns as `args` asks; a signal ends the wait with nothing held.
async fn campaign(
    client: &fencelock::Client,
    args: &ElectArgs,
    servers: &Servers,
    signals: &mut Signals,
) -> Result<fencelock::election::Leadership, CliError> {
    let mut campaign = client
        .election(args.name.clone())
        .campaign(args.value.clone())
        .ttl(args.ttl)
        .label(args.label.text());
    campaign = campaign.wait(args.wait.policy());
    tokio::select! {
        biased;
        signal = signals.ending() => Err(acquire::interrupted_while_waiting(signal, &args.name)),
        won = campaign.campaign() => won.map_err(|err| match err {
            fencelock::Error::Unsupported { .. } => CliError::Failed {
                message: format!(
                    "{err} (on {}); nothing was sent and nothing was run",
                    servers.describe()
                ),
                code: EXIT_USAGE,
            },
            err => acquire::acquire_error(err, servers, None),
        }),
    }
}
