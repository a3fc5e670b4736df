//! The freeze: a holder caught between its two writes is stopped (SIGSTOP) for longer than its
//! lease; once it has run its round, its stale write must have been refused, else the demo tries
//! again with another holder.

use nix::sys::signal::Signal;
use tokio::time::Instant;

use super::{EPILOGUE_LIMIT, Grant, MAX_PAUSE_ATTEMPTS, Phase, Story};
use crate::demo::LOCK_NAME;
use crate::duration::format_duration;
use crate::error::CliError;
use crate::output::Tone;

impl Story<'_> {
    /// Freezes the holder of grant `index`, if it still holds the lock once frozen.
    pub(super) async fn try_pause(&mut self, index: usize) -> Result<(), CliError> {
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
    pub(super) fn after_paused_round(&mut self, index: usize) -> Result<(), CliError> {
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
}
