//! The story the demo tells, driven by the workers' events: contention, a holder frozen with
//! SIGSTOP for longer than its lease, its stale write refused when it wakes up, and the record
//! the summary checks.

use std::collections::HashMap;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::LOCK_NAME;
use super::events::Event;
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

    async fn on_event(&mut self, worker: u32, event: Event) -> Result<(), CliError> {
        match event {
            Event::Ready => {}
            Event::Acquired { fence } => self.on_acquired(worker, fence)?,
            Event::Wrote {
                fence,
                step,
                accepted,
                current,
                by,
                held,
            } => {
                let index = self.grant_index(worker, fence)?;
                let grant = &mut self.record.grants[index];
                if accepted {
                    grant.accepted += 1;
                } else {
                    grant.refused += 1;
                    if held {
                        grant.refused_while_held += 1;
                    }
                }
                let show = grant.paused || grant.took_over || self.settings.verbose;
                let paused = grant.paused;
                let who = self.out.worker(worker);
                if accepted && show {
                    let late = match self.phase {
                        Phase::Resumed { grant } if grant == index => {
                            " (it reached Redis before the freeze; its reply is read only now)"
                        }
                        _ => "",
                    };
                    let text =
                        format!("   {who} wrote with fence {fence} (part {step}): accepted{late}");
                    self.out.line(&text)?;
                } else if !accepted {
                    let refused = self.out.paint(Tone::Bad, "REFUSED");
                    let old = if paused { "its old " } else { "" };
                    let text = format!(
                        "   {who} wrote with {old}fence {fence} (part {step}): {refused}, the resource already has fence {current} from {}",
                        self.out.worker(by)
                    );
                    self.out.line(&text)?;
                    let guard = if held {
                        self.out
                            .paint(Tone::Bad, "is_held() = true: two holders overlapped!")
                    } else {
                        self.out
                            .paint(Tone::Good, "is_held() = false, it knows the lock is lost")
                    };
                    self.out
                        .line(&format!("   {who}'s guard, asked after the write: {guard}"))?;
                }
                let newest = index + 1 == self.record.grants.len();
                if matches!(self.phase, Phase::Choosing) && newest && step == 1 && accepted {
                    self.try_pause(index).await?;
                }
            }
            Event::Lost { fence, reason } => {
                let index = self.grant_index(worker, fence)?;
                let grant = &mut self.record.grants[index];
                grant.lost = Some(reason.clone());
                let text = format!(
                    "   {}'s lost() signal has fired: {reason}",
                    self.out.worker(worker)
                );
                self.out.line(&text)?;
            }
            Event::Released { fence, held } => {
                let index = self.grant_index(worker, fence)?;
                self.record.grants[index].released = Some(held);
                if self.settings.verbose || !held {
                    let state = if held {
                        "it still held the lock"
                    } else {
                        "the lock was no longer its own, so nothing was deleted"
                    };
                    let text = format!(
                        "   {} released fence {fence}: {state}",
                        self.out.worker(worker)
                    );
                    self.out.line(&text)?;
                }
                if matches!(self.phase, Phase::Resumed { grant } if grant == index) {
                    self.after_paused_round(index)?;
                }
            }
            Event::Failed { message } => {
                return Err(CliError::DemoFailed(format!(
                    "worker {worker} failed: {message}"
                )));
            }
        }
        Ok(())
    }

    fn on_acquired(&mut self, worker: u32, fence: u64) -> Result<(), CliError> {
        let index = self.record.grants.len();
        self.record.grants.push(Grant {
            worker,
            fence,
            ..Grant::default()
        });
        self.by_fence.insert((worker, fence), index);
        let arrived_late = fence <= self.newest_fence;
        self.newest_fence = self.newest_fence.max(fence);
        let took_over = match self.phase {
            Phase::Paused {
                grant,
                taken_over: false,
                ..
            } => fence > self.record.grants[grant].fence,
            _ => false,
        };
        let back = matches!(self.phase, Phase::Epilogue { worker: w, .. } if w == worker);
        let visible = self.settings.verbose
            || took_over
            || back
            || matches!(self.phase, Phase::Contention | Phase::Choosing);
        if visible {
            if back {
                self.mention_quiet_grants()?;
            }
            let mark = if arrived_late {
                // Lines of different workers can reach the demo out of order; the summary
                // checks the order that matters (each worker's, and the resource's).
                self.out
                    .paint(Tone::Dim, "(this line reached the demo late)")
            } else {
                self.out.paint(Tone::Good, "(larger than all before)")
            };
            let text = format!(
                "   {} acquired the lock: fence {fence} {mark}",
                self.out.worker(worker)
            );
            self.out.line(&text)?;
        } else {
            self.quiet_grants += 1;
        }

        match self.phase {
            Phase::Contention if self.record.grants.len() > self.settings.rounds as usize => {
                self.phase = Phase::Choosing;
            }
            Phase::Paused {
                grant, resume_at, ..
            } if took_over => {
                self.record.grants[index].took_over = true;
                let frozen = self.record.grants[grant].clone();
                let text = format!(
                    "   -> {}'s lease ran out while it was frozen, and {} took the lock with a larger fence.\n      {} still believes it holds fence {}.",
                    self.out.worker(frozen.worker),
                    self.out.worker(worker),
                    self.out.worker(frozen.worker),
                    frozen.fence
                );
                self.out.line(&self.out.paint(Tone::Note, &text))?;
                self.phase = Phase::Paused {
                    grant,
                    resume_at,
                    taken_over: true,
                };
            }
            Phase::Epilogue { .. } if back => {
                let text = format!(
                    "   {} is back in line: it waited its turn and holds the lock again, with a new fence",
                    self.out.worker(worker)
                );
                self.out.line(&text)?;
                self.start_draining();
            }
            _ => {}
        }
        Ok(())
    }

    /// Freezes the holder of grant `index`, if it still holds the lock once frozen.
    async fn try_pause(&mut self, index: usize) -> Result<(), CliError> {
        let Grant { worker, fence, .. } = self.record.grants[index];
        self.fleet.signal(worker, Signal::SIGSTOP)?;
        // Frozen now: if Redis still has its fence as the holder's, it is frozen while holding.
        let holder = match self.client.inspect(LOCK_NAME).await {
            Ok(info) => info.holder.and_then(|h| h.fence),
            Err(err) => {
                let _ = self.fleet.signal(worker, Signal::SIGCONT);
                return Err(err.into());
            }
        };
        if holder != Some(fence) {
            self.fleet.signal(worker, Signal::SIGCONT)?;
            return self.pause_missed(worker, "had already let go of the lock when it was frozen");
        }
        self.record.grants[index].paused = true;
        self.heading("2. A holder freezes")?;
        let who = self.out.worker(worker);
        let text = format!(
            "   {who} holds the lock (fence {fence}) and has written part 1 of its report (accepted).\n   SIGSTOP: {who} freezes in the middle of its work for {}, longer than its {} lease,\n   as in a long GC pause or a stopped VM.",
            format_duration(self.settings.pause),
            format_duration(self.settings.ttl)
        );
        self.out.line(&text)?;
        self.phase = Phase::Paused {
            grant: index,
            resume_at: Instant::now() + self.settings.pause,
            taken_over: false,
        };
        Ok(())
    }

    /// The frozen holder finished its round: did its stale write get refused?
    fn after_paused_round(&mut self, index: usize) -> Result<(), CliError> {
        let grant = &self.record.grants[index];
        let worker = grant.worker;
        if grant.refused > 0 {
            self.record.fenced_off = Some(index);
            self.phase = Phase::Epilogue {
                worker,
                until: Instant::now() + EPILOGUE_LIMIT,
            };
            return Ok(());
        }
        self.record.grants[index].paused = false;
        self.pause_missed(worker, "wrote nothing that another holder had overtaken")
    }

    fn pause_missed(&mut self, worker: u32, what: &str) -> Result<(), CliError> {
        self.pause_attempts += 1;
        if self.pause_attempts >= MAX_PAUSE_ATTEMPTS {
            return Err(CliError::DemoFailed(format!(
                "could not catch a holder in the middle of its work in {MAX_PAUSE_ATTEMPTS} attempts"
            )));
        }
        let text = format!(
            "   ({} {what}; trying again with the next holder)",
            self.out.worker(worker)
        );
        self.out.line(&self.out.paint(Tone::Dim, &text))?;
        self.phase = Phase::Choosing;
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
