//! The story the demo tells, driven by the workers' events: contention, a holder frozen with
//! SIGSTOP for longer than its lease, its stale write refused when it wakes up, and the record
//! the summary checks.
//!
//! - this file: the story's phases and its loop (reports, timers, the time limit);
//! - [`grants`]: what each event of a worker adds to the record and to the story;
//! - [`freeze`]: freezing a holder in the middle of its work, and what its round then shows.

mod freeze;
mod grants;

use std::collections::HashMap;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::fleet::{Fleet, Report};
use crate::duration::format_duration;
use crate::error::CliError;
use crate::output::{Output, Tone};

/// How many holders the demo may pick before one is caught in the middle of its work.
const MAX_PAUSE_ATTEMPTS: u32 = 5;
/// How long, after the stale write, to wait for the paused worker to take the lock again.
const EPILOGUE_LIMIT: Duration = Duration::from_secs(5);
/// How long the workers get to finish their round once asked to.
const DRAIN_LIMIT: Duration = Duration::from_secs(5);
/// The whole story must be told within this (plus the pause).
const STORY_LIMIT: Duration = Duration::from_secs(45);

/// What the story needs to know.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Number of workers.
    pub workers: u32,
    /// Grants to show before a holder is paused.
    pub rounds: u32,
    /// The lease.
    pub ttl: Duration,
    /// How long the holder is frozen.
    pub pause: Duration,
    /// Show every event, not only the interesting ones.
    pub verbose: bool,
}

/// One grant of the lock, as its worker reported it.
#[derive(Debug, Clone, Default)]
pub struct Grant {
    /// The worker.
    pub worker: u32,
    /// Its fence.
    pub fence: u64,
    /// Writes the resource accepted.
    pub accepted: u32,
    /// Writes the resource refused.
    pub refused: u32,
    /// Writes refused while the writer's guard still said it held the lock (must never happen:
    /// it would mean two holders with live leases).
    pub refused_while_held: u32,
    /// Why the guard reported the lock lost, if it did before the release.
    pub lost: Option<String>,
    /// Whether the lock was still held at release, once released.
    pub released: Option<bool>,
    /// The demo froze this holder.
    pub paused: bool,
    /// The first grant that took the lock over from the frozen holder.
    pub took_over: bool,
}

/// What happened, for the summary.
#[derive(Debug, Default)]
pub struct Record {
    /// Every grant, in the order the demo heard of them.
    pub grants: Vec<Grant>,
    /// The grant that was frozen and fenced off (index into `grants`).
    pub fenced_off: Option<usize>,
}

#[derive(Debug, Clone, Copy)]
enum Phase {
    /// Showing the first grants.
    Contention,
    /// The holder of the next grant will be frozen once it has written for the first time
    /// (during its work, between its two writes).
    Choosing,
    /// The holder is frozen until `resume_at`.
    Paused {
        grant: usize,
        resume_at: Instant,
        taken_over: bool,
    },
    /// The holder runs again; waiting for the end of its round.
    Resumed {
        grant: usize,
    },
    /// Waiting for the fenced-off worker to take the lock again.
    Epilogue {
        worker: u32,
        until: Instant,
    },
    /// The workers were asked to finish.
    Draining {
        until: Instant,
    },
    Finished,
}

/// The story in progress.
pub struct Story<'a> {
    settings: Settings,
    out: &'a mut Output,
    client: &'a fencelock::Client,
    fleet: &'a mut Fleet,
    record: Record,
    by_fence: HashMap<(u32, u64), usize>,
    newest_fence: u64,
    pause_attempts: u32,
    /// Grants not shown one by one (to keep the story short), not yet mentioned.
    quiet_grants: u32,
    closed: u32,
    phase: Phase,
}

impl<'a> Story<'a> {
    /// A story over `fleet`, checked with `client`.
    pub fn new(
        settings: Settings,
        out: &'a mut Output,
        client: &'a fencelock::Client,
        fleet: &'a mut Fleet,
    ) -> Self {
        Story {
            settings,
            out,
            client,
            fleet,
            record: Record::default(),
            by_fence: HashMap::new(),
            newest_fence: 0,
            pause_attempts: 0,
            quiet_grants: 0,
            closed: 0,
            phase: Phase::Contention,
        }
    }

    /// Tells the story until the workers have finished; returns what happened.
    pub async fn tell(
        mut self,
        mut reports: mpsc::UnboundedReceiver<Report>,
    ) -> Result<Record, CliError> {
        let heading = format!(
            "1. Contention: {} workers take turns; each grant carries a fence larger than all before",
            self.settings.workers
        );
        self.heading(&heading)?;
        let give_up = Instant::now() + STORY_LIMIT + self.settings.pause;
        while !matches!(self.phase, Phase::Finished) {
            let wake = self.wake_at();
            tokio::select! {
                report = reports.recv() => match report {
                    Some(report) => self.on_report(report).await?,
                    None => self.on_all_closed()?,
                },
                () = sleep_until(wake) => self.on_timer()?,
                () = tokio::time::sleep_until(give_up) => {
                    return Err(CliError::DemoFailed(format!(
                        "the story did not complete within {}",
                        format_duration(STORY_LIMIT + self.settings.pause)
                    )));
                }
            }
        }
        self.mention_quiet_grants()?;
        self.out.clear_status();
        Ok(self.record)
    }

    fn wake_at(&self) -> Option<Instant> {
        match self.phase {
            Phase::Paused { resume_at, .. } => Some(resume_at),
            Phase::Epilogue { until, .. } | Phase::Draining { until } => Some(until),
            _ => None,
        }
    }

    async fn on_report(&mut self, report: Report) -> Result<(), CliError> {
        match report {
            Report::Event { worker, event } => self.on_event(worker, event).await?,
            Report::Garbled { worker, line } => {
                return Err(CliError::DemoFailed(format!(
                    "worker {worker} said something that is not an event: {line:?}"
                )));
            }
            Report::Closed { worker } => {
                self.closed += 1;
                if !matches!(self.phase, Phase::Draining { .. }) {
                    return Err(CliError::DemoFailed(format!(
                        "worker {worker} exited before the demo was over"
                    )));
                }
                if self.closed >= self.settings.workers {
                    self.phase = Phase::Finished;
                }
            }
        }
        self.show_status()
    }

    fn on_all_closed(&mut self) -> Result<(), CliError> {
        if matches!(self.phase, Phase::Draining { .. }) {
            self.phase = Phase::Finished;
            Ok(())
        } else {
            Err(CliError::DemoFailed(
                "every worker exited before the demo was over".into(),
            ))
        }
    }

    fn on_timer(&mut self) -> Result<(), CliError> {
        match self.phase {
            Phase::Paused {
                grant, taken_over, ..
            } => {
                let worker = self.record.grants[grant].worker;
                self.fleet.signal(worker, Signal::SIGCONT)?;
                self.heading("3. The frozen holder wakes up")?;
                let text = format!(
                    "   SIGCONT: {} resumes after {} and carries on with its work, unaware that it was stopped",
                    self.out.worker(worker),
                    format_duration(self.settings.pause)
                );
                self.out.line(&text)?;
                if !taken_over {
                    let note = "   (nobody took the lock during the pause: there is nothing to fence off this time)";
                    self.out.line(&self.out.paint(Tone::Dim, note))?;
                }
                self.phase = Phase::Resumed { grant };
            }
            Phase::Epilogue { worker, .. } => {
                let note = format!(
                    "   ({} did not get the lock again before the end; that is fine)",
                    self.out.worker(worker)
                );
                self.out.line(&self.out.paint(Tone::Dim, &note))?;
                self.start_draining();
            }
            Phase::Draining { .. } => self.phase = Phase::Finished,
            _ => {}
        }
        Ok(())
    }

    fn start_draining(&mut self) {
        self.fleet.ask_to_finish();
        self.phase = Phase::Draining {
            until: Instant::now() + DRAIN_LIMIT,
        };
    }

    fn grant_index(&self, worker: u32, fence: u64) -> Result<usize, CliError> {
        self.by_fence.get(&(worker, fence)).copied().ok_or_else(|| {
            CliError::DemoFailed(format!(
                "worker {worker} reported on fence {fence}, which it never acquired"
            ))
        })
    }

    fn heading(&mut self, text: &str) -> Result<(), CliError> {
        self.mention_quiet_grants()?;
        let text = self.out.paint(Tone::Strong, text);
        self.out.line(&text)
    }

    /// Says how many grants went by without a line of their own, if any did.
    fn mention_quiet_grants(&mut self) -> Result<(), CliError> {
        if self.quiet_grants == 0 {
            return Ok(());
        }
        let n = self.quiet_grants;
        self.quiet_grants = 0;
        let text = if n == 1 {
            "   ... and 1 more grant, with a larger fence".to_owned()
        } else {
            format!("   ... and {n} more grants, each with a larger fence")
        };
        self.out.line(&self.out.paint(Tone::Dim, &text))
    }

    /// The live status line (terminal only).
    fn show_status(&mut self) -> Result<(), CliError> {
        let state = match self.phase {
            Phase::Contention | Phase::Choosing => "contending",
            Phase::Paused { .. } => "a holder is frozen",
            Phase::Resumed { .. } => "the frozen holder runs again",
            Phase::Epilogue { .. } => "back to normal",
            Phase::Draining { .. } | Phase::Finished => "finishing",
        };
        let text = match self.record.grants.len() {
            0 => "   [waiting for the first grant]".to_owned(),
            n => format!(
                "   [{n} grants, newest fence {}: {state}]",
                self.newest_fence
            ),
        };
        self.out.status(&text)
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
