//! The flags `run` and `elect` share, as flattened groups (as `ServerArgs` is).

use std::time::Duration;

use nix::sys::signal::Signal;

use crate::duration::parse_duration;

/// How long to wait for what is asked for.
#[derive(Debug, Clone, clap::Args)]
pub struct WaitArgs {
    /// Wait at most this long, then exit with 73 [default: as long as it takes]
    #[arg(long, value_name = "DURATION", value_parser = parse_duration, conflicts_with = "no_wait")]
    pub wait: Option<Duration>,

    /// Do not wait: exit with 73 at once if it is held
    #[arg(long)]
    pub no_wait: bool,
}

impl WaitArgs {
    /// As the library's wait policy.
    pub fn policy(&self) -> fencelock::WaitPolicy {
        match (self.no_wait, self.wait) {
            (true, _) => fencelock::WaitPolicy::NoWait,
            (false, Some(limit)) => fencelock::WaitPolicy::UpTo(limit),
            (false, None) => fencelock::WaitPolicy::Forever,
        }
    }
}

/// Who holds it, as `fencelock status` and `list` show it.
#[derive(Debug, Clone, clap::Args)]
pub struct LabelArgs {
    /// The hold's label, shown by `fencelock status`, `list` and `watch` beside the holder's
    /// token (at most 128 bytes, no control characters) [default: HOST:PID, this fencelock's
    /// host name and process id]
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
}

impl LabelArgs {
    /// The label to hold with: `--label`, else `HOST:PID`.
    pub fn text(&self) -> String {
        match &self.label {
            Some(label) => label.clone(),
            None => format!("{}:{}", host_name(), std::process::id()),
        }
    }
}

/// This machine's host name (`/proc/sys/kernel/hostname`; `localhost` if it cannot be read).
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

/// How the command is stopped: asked to let go, or after a loss.
#[derive(Debug, Clone, clap::Args)]
pub struct StopArgs {
    /// When someone asks for it (`fencelock release --ask NAME`): the signal passed on to the
    /// command's process group (any but KILL, STOP, ILL, FPE and SEGV: for an immediate SIGKILL,
    /// pass --grace 0). It is given back when the command and what it started have ended
    #[arg(long, value_name = "SIGNAL", default_value = "TERM", value_parser = parse_signal)]
    pub on_request: Signal,

    /// When someone asks for it: how long the command (and what it started) has to end after
    /// --on-request's signal before what is left gets SIGKILL and it is given back
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub grace: Duration,

    /// How long what is left of the command's tree has between SIGTERM and SIGKILL while it is
    /// still held: when the command exits leaving processes behind, and when the launcher is
    /// killed
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_duration)]
    pub kill_after: Duration,

    /// How long the command's tree has between SIGTERM and SIGKILL once it is lost (the
    /// command then already runs without it: keep this short)
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration)]
    pub kill_after_loss: Duration,
}

/// `--on-request`: a signal by name (`TERM`, `SIGTERM`, `usr1`) or number, one the launcher
/// catches (it is sent to the whole process group, the launcher with it).
pub fn parse_signal(text: &str) -> Result<Signal, String> {
    let signal = any_signal(text)?;
    if super::launch::catches(signal) {
        Ok(signal)
    } else {
        Err(format!(
            "{} cannot be passed on to the command (it would end or stop fencelock's launcher, \
             which must outlive the command); for a SIGKILL at once pass --grace 0",
            signal.as_str()
        ))
    }
}

/// A signal by name or number.
fn any_signal(text: &str) -> Result<Signal, String> {
    let upper = text.trim().to_ascii_uppercase();
    let named = if upper.starts_with("SIG") {
        upper
    } else {
        format!("SIG{upper}")
    };
    if let Ok(signal) = named.parse::<Signal>() {
        return Ok(signal);
    }
    text.trim()
        .parse::<i32>()
        .ok()
        .and_then(|n| Signal::try_from(n).ok())
        .ok_or_else(|| {
            format!("{text:?} is not a signal: write a name such as TERM or USR1, or a number")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn on_request_takes_every_signal_the_launcher_catches_and_no_other() {
        assert_eq!(parse_signal("alrm"), Ok(Signal::SIGALRM));
        assert_eq!(parse_signal("SIGUSR1"), Ok(Signal::SIGUSR1));
        assert_eq!(parse_signal("15"), Ok(Signal::SIGTERM));
        for refused in ["KILL", "9", "STOP", "SEGV", "ILL", "FPE"] {
            assert!(parse_signal(refused).is_err(), "{refused}");
        }
        assert!(parse_signal("NOPE").is_err());
    }
}
