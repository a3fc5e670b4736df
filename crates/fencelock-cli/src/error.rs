//! The errors of the command-line tool, and the exit codes they map to.

/// Exit code: something else went wrong (an I/O error, a process could not be started, ...).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code: a usage error: a bad option or argument (clap uses the same code), an invalid lock
/// name, an invalid Redis URL, `release` without `--force`; and a request that disagrees with how
/// the other users use the name ([`fencelock::Error::Conflict`]: another `--permits`, another kind
/// of lock) or that this deployment cannot offer ([`fencelock::Error::Unsupported`]: a semaphore
/// over Redlock). Either way nothing was written, and retrying the same command does not help:
/// the operator must change it (or the other users' commands).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: the demo ran but did not show what it promises, or an invariant did not hold.
pub const EXIT_DEMO_FAILED: u8 = 3;
/// Exit code (sysexits `EX_UNAVAILABLE`): Redis could not be reached, Redlock found no quorum,
/// Redis refused a command (NOAUTH, NOPERM, READONLY, ...), or a key of the lock holds data
/// fencelock did not put there.
pub const EXIT_REDIS: u8 = 69;
/// Exit code: the lock was not acquired: held by another owner with `--no-wait`, or still held
/// when `--wait` ran out.
pub const EXIT_NOT_ACQUIRED: u8 = 73;
/// Exit code: the lock was lost while the command ran (its lease ran out, or an operator
/// force-released it); the command was stopped if it was still running.
pub const EXIT_LOCK_LOST: u8 = 74;
/// Exit code (sysexits `EX_TEMPFAIL`): `run --once`'s command succeeded, but its run could not
/// be recorded as done (Redis refused or could not be reached, or the replicas asked for did not
/// acknowledge the record): the next run will do the work again.
pub const EXIT_NOT_RECORDED: u8 = 75;
/// Exit code (as `timeout(1)` and `env(1)` use it): `fencelock`'s own part of running a command
/// failed: the launcher between `fencelock run` (or `elect`) and the command could not start or
/// set itself up, or it was killed. (A command may exit with 125 itself; `fencelock`'s own 125
/// always comes with a `fencelock:` line on stderr.)
pub const EXIT_LAUNCHER: u8 = 125;
/// Exit code, as in a shell: the command was found but could not be executed.
pub const EXIT_CANNOT_EXECUTE: u8 = 126;
/// Exit code, as in a shell: the command was not found.
pub const EXIT_NOT_FOUND: u8 = 127;
/// Exit code after SIGHUP (128 + 1).
pub const EXIT_SIGHUP: u8 = 129;
/// Exit code after SIGINT (128 + 2), as shells report it.
pub const EXIT_SIGINT: u8 = 130;
/// SIGQUIT while waiting (128 + 3).
pub const EXIT_SIGQUIT: u8 = 131;
/// Exit code after SIGTERM (128 + 15).
pub const EXIT_SIGTERM: u8 = 143;

/// One line of a command's "Exit status" help: its codes, and what they mean.
#[derive(Debug, Clone, Copy)]
pub struct ExitLine {
    pub codes: &'static [u8],
    /// `codes` are the two ends of a range.
    pub range: bool,
    pub meaning: &'static str,
}

impl ExitLine {
    /// The same codes, with `meaning` (a command's own wording for a shared code).
    pub const fn saying(self, meaning: &'static str) -> Self {
        ExitLine { meaning, ..self }
    }
}

/// What each shared exit code means: every command's help is made from these lines.
pub mod exit {
    use super::ExitLine;

    /// A command's own status, passed on.
    pub const COMMAND: ExitLine = ExitLine {
        range: true,
        codes: &[0, 255],
        meaning: "the command's own exit status (128+N if signal N killed it)",
    };
    pub const SUCCESS: ExitLine = ExitLine {
        range: false,
        codes: &[0],
        meaning: "success",
    };
    pub const USAGE: ExitLine = ExitLine {
        range: false,
        codes: &[super::EXIT_USAGE],
        meaning: "usage error (nothing was done): a bad option, an invalid lock name or Redis URL",
    };
    pub const REDIS: ExitLine = ExitLine {
        range: false,
        codes: &[super::EXIT_REDIS],
        meaning: "Redis unreachable, no quorum (Redlock), Redis refused (authentication, ACL \
                  permissions), or the TLS handshake failed",
    };
    pub const NOT_ACQUIRED: ExitLine = ExitLine {
        range: false,
        codes: &[super::EXIT_NOT_ACQUIRED],
        meaning: "not acquired: held by another owner (--no-wait), or --wait ran out",
    };
    pub const LOST: ExitLine = ExitLine {
        range: false,
        codes: &[super::EXIT_LOCK_LOST],
        meaning: "the lock was lost while the command ran (the command was stopped)",
    };
    pub const NOT_RECORDED: ExitLine = ExitLine {
        range: false,
        codes: &[super::EXIT_NOT_RECORDED],
        meaning: "--once: the command succeeded but was not recorded as done (the next run does \
                  it again)",
    };
    pub const LAUNCHER: ExitLine = ExitLine {
        range: false,
        codes: &[super::EXIT_LAUNCHER],
        meaning: "the launcher between fencelock and the command failed or was killed (what it \
                  had started was stopped before the release)",
    };
    pub const CANNOT_EXECUTE: ExitLine = ExitLine {
        range: false,
        codes: &[super::EXIT_CANNOT_EXECUTE],
        meaning: "the command was found but cannot be executed",
    };
    pub const NOT_FOUND: ExitLine = ExitLine {
        range: false,
        codes: &[super::EXIT_NOT_FOUND],
        meaning: "the command was not found",
    };
    pub const SIGNALLED: ExitLine = ExitLine {
        range: false,
        codes: &[
            super::EXIT_SIGHUP,
            super::EXIT_SIGINT,
            super::EXIT_SIGQUIT,
            super::EXIT_SIGTERM,
        ],
        meaning: "SIGHUP, SIGINT, SIGQUIT, SIGTERM while waiting (nothing was run)",
    };
    pub const INTERRUPTED: ExitLine = ExitLine {
        range: false,
        codes: &[super::EXIT_SIGINT, super::EXIT_SIGTERM],
        meaning: "interrupted (SIGINT, SIGTERM)",
    };
    pub const CHECK_FAILED: ExitLine = ExitLine {
        range: false,
        codes: &[super::EXIT_DEMO_FAILED],
        meaning: "a check failed",
    };
    pub const OTHER: ExitLine = ExitLine {
        range: false,
        codes: &[super::EXIT_FAILURE],
        meaning: "any other error",
    };
}

/// The "Exit status" section of a command's help: `lines`, in order, aligned; then `rest`.
pub fn exit_help(lines: &[ExitLine], rest: &str) -> String {
    let labels: Vec<String> = lines
        .iter()
        .map(|line| {
            let codes: Vec<String> = line.codes.iter().map(u8::to_string).collect();
            codes.join(if line.range { "-" } else { ", " })
        })
        .collect();
    let width = labels.iter().map(String::len).max().unwrap_or(0);
    let mut help = String::from("Exit status:\n");
    // Meanings wrap under themselves, in lines of at most 96 columns.
    let indent = width + 4;
    let room = 96usize.saturating_sub(indent).max(40);
    for (label, line) in labels.iter().zip(lines) {
        let mut current = String::new();
        let mut first = true;
        let flush = |text: &str, first: &mut bool, help: &mut String| {
            if *first {
                help.push_str(&format!("  {label:<width$}  {text}\n"));
                *first = false;
            } else {
                help.push_str(&format!("{:indent$}{text}\n", ""));
            }
        };
        for word in line.meaning.split_whitespace() {
            if !current.is_empty() && current.len() + 1 + word.len() > room {
                flush(&current, &mut first, &mut help);
                current.clear();
            }
            if !current.is_empty() {
                current.push(' ');
            }
            current.push_str(word);
        }
        flush(&current, &mut first, &mut help);
    }
    if !rest.is_empty() {
        help.push('\n');
        help.push_str(rest);
    }
    help
}

/// Everything that ends a subcommand unsuccessfully. Messages never contain a password from a
/// Redis URL: servers are named as `host:port`.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// An error from the lock library; its message names the lock and the server.
    #[error(transparent)]
    Lock(#[from] fencelock::Error),

    /// No `redis-server` to start a throwaway instance with.
    #[error(
        "redis-server not found in PATH. Install it (Debian/Ubuntu: `sudo apt-get install -y redis-server`; \
         macOS: `brew install redis`) or pass --url redis://HOST:PORT"
    )]
    RedisServerNotFound,

    /// The throwaway `redis-server` did not come up.
    #[error("could not start a throwaway redis-server: {0}")]
    RedisServerStart(String),

    /// A Redis URL that does not parse (the message has no password in it).
    #[error("invalid Redis URL: {0}")]
    InvalidUrl(String),

    /// A usage error found after the command line was parsed.
    #[error("{0}")]
    Usage(String),

    /// The Redis server could not be reached, or refused the connection.
    #[error("cannot reach Redis at {server}: {reason}")]
    Unreachable {
        /// `host:port`.
        server: String,
        /// What went wrong, without credentials.
        reason: String,
    },

    /// Redis answered a command with an error.
    #[error("Redis at {server} refused {what}: {reason}")]
    Redis {
        /// `host:port`.
        server: String,
        /// What the tool was doing.
        what: &'static str,
        /// The error, without credentials.
        reason: String,
    },

    /// An operating-system error, with what was being done.
    #[error("{context}: {source}")]
    Io {
        /// What the tool was doing.
        context: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },

    /// The demo did not complete its story, or an invariant did not hold.
    #[error("demo failed: {0}")]
    DemoFailed(String),

    /// A chaos run's checker found violations.
    #[error("the checker found {0} violation(s); see the history lines it names")]
    ChaosViolations(usize),

    /// Stopped by a signal; every process the tool started has been stopped.
    #[error("interrupted by {0}; every process the demo started has been stopped")]
    Interrupted(&'static str),

    /// A failure with its own message and exit code (the message has no password in it).
    #[error("{message}")]
    Failed {
        /// What went wrong.
        message: String,
        /// The exit code.
        code: u8,
    },

    /// Stdout was closed by its reader (`fencelock list | head`): the command stops writing and
    /// exits quietly with status 0, as `grep` or `ls` piped into `head` end without a message.
    #[error("stdout was closed")]
    StdoutClosed,

    /// Already reported to whoever needs to know (a demo worker reports to the demo); exit with
    /// this code without printing anything more.
    #[error("exit code {code}")]
    Reported {
        /// The exit code.
        code: u8,
    },
}

impl CliError {
    /// An I/O error with what was being done.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        CliError::Io {
            context: context.into(),
            source,
        }
    }

    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Lock(err) => lock_error_code(err),
            CliError::InvalidUrl(_) | CliError::Usage(_) => EXIT_USAGE,
            CliError::Unreachable { .. } | CliError::Redis { .. } => EXIT_REDIS,
            CliError::DemoFailed(_) | CliError::ChaosViolations(_) => EXIT_DEMO_FAILED,
            CliError::Interrupted("SIGINT") => EXIT_SIGINT,
            CliError::Interrupted("SIGHUP") => EXIT_SIGHUP,
            CliError::Interrupted(_) => EXIT_SIGTERM,
            CliError::Failed { code, .. } | CliError::Reported { code } => *code,
            // Nobody reads any more: nothing went wrong that anyone could be told about.
            CliError::StdoutClosed => 0,
            CliError::RedisServerNotFound | CliError::RedisServerStart(_) | CliError::Io { .. } => {
                EXIT_FAILURE
            }
        }
    }
}

/// The exit code for an error of the lock library.
pub fn lock_error_code(err: &fencelock::Error) -> u8 {
    use fencelock::Error;
    match err {
        Error::Busy { .. } | Error::TimedOut { .. } => EXIT_NOT_ACQUIRED,
        Error::NotHeld { .. } => EXIT_LOCK_LOST,
        Error::Unreachable { .. }
        | Error::NoQuorum { .. }
        | Error::Redis { .. }
        | Error::AuthFailed { .. }
        | Error::PermissionDenied { .. }
        | Error::Tls { .. }
        | Error::NotReplicated { .. }
        | Error::WrongType { .. } => EXIT_REDIS,
        Error::InvalidArgument { .. }
        | Error::Config { .. }
        | Error::Conflict { .. }
        | Error::Unsupported { .. } => EXIT_USAGE,
        _ => EXIT_FAILURE,
    }
}

impl CliError {
    /// A Redis error from the tool's own connection to `server` (`host:port`) while doing
    /// `what`: "unreachable" for connection problems, "refused" for errors Redis answered with.
    /// The message is cleaned of the credentials in `url`.
    pub fn from_redis(
        server: &str,
        url: &str,
        what: &'static str,
        err: &redis::RedisError,
    ) -> Self {
        let reason = crate::redis_url::redact(&err.to_string(), url);
        if err.is_io_error()
            || err.is_timeout()
            || err.is_connection_refusal()
            || err.is_connection_dropped()
        {
            CliError::Unreachable {
                server: server.to_owned(),
                reason,
            }
        } else {
            CliError::Redis {
                server: server.to_owned(),
                what,
                reason,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelock::{Conflict, Error};

    #[test]
    fn conflicts_and_unsupported_requests_are_usage_errors() {
        let mismatch = Error::Conflict {
            lock: "jobs".into(),
            conflict: Conflict::PermitsMismatch {
                requested: 3,
                held_with: "2".into(),
            },
        };
        let other_kind = Error::Conflict {
            lock: "jobs".into(),
            conflict: Conflict::OtherKind {
                found: fencelock::LockKind::Semaphore,
                requested: fencelock::LockKind::Lock,
            },
        };
        let unsupported = Error::Unsupported {
            lock: "jobs".into(),
            reason: "a semaphore cannot be held over Redlock".into(),
        };
        for err in [mismatch, other_kind, unsupported] {
            assert_eq!(lock_error_code(&err), EXIT_USAGE, "{err}");
            assert_eq!(CliError::Lock(err).exit_code(), EXIT_USAGE);
        }
    }
}
