//! The workers' events as the story hears them: each grant, write, loss and release goes into
//! the record, and the interesting ones are told.

use super::{Grant, Phase, Story};
use crate::demo::events::Event;
use crate::error::CliError;
use crate::output::Tone;

impl Story<'_> {
    /// What `event` from `worker` adds to the record and to the story.
    pub(super) async fn on_event(&mut self, worker: u32, event: Event) -> Result<(), CliError> {
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
            Event::Lost { fence, reason } => self.on_lost(worker, fence, &reason)?,
            Event::Released { fence, held } => self.on_released(worker, fence, held)?,
            Event::Failed { message } => {
                return Err(CliError::DemoFailed(format!(
                    "worker {worker} failed: {message}"
                )));
            }
        }
        Ok(())
    }

    fn on_lost(&mut self, worker: u32, fence: u64, reason: &str) -> Result<(), CliError> {
        let index = self.grant_index(worker, fence)?;
        let grant = &mut self.record.grants[index];
        grant.lost = Some(reason.to_owned());
        let text = format!(
            "   {}'s lost() signal has fired: {reason}",
            self.out.worker(worker)
        );
        self.out.line(&text)
    }

    fn on_released(&mut self, worker: u32, fence: u64, held: bool) -> Result<(), CliError> {
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
}
