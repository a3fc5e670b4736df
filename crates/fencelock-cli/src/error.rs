//! The errors of the command-line tool, and the exit codes they map to.

/// Exit code: something went wrong (Redis unreachable, a process could not be started, ...).
pub const EXIT_FAILURE: u8 = 1;
/// Exit code: the demo ran but did not show what it promises, or an invariant did not hold.
pub const EXIT_DEMO_FAILED: u8 = 3;
/// Exit code after SIGINT (128 + 2), as shells report it.
pub const EXIT_SIGINT: u8 = 130;
/// Exit code after SIGTERM (128 + 15).
pub const EXIT_SIGTERM: u8 = 143;

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

    /// Stopped by a signal; every process the tool started has been stopped.
    #[error("interrupted by {0}; every process the demo started has been stopped")]
    Interrupted(&'static str),

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
            CliError::DemoFailed(_) => EXIT_DEMO_FAILED,
            CliError::Interrupted("SIGINT") => EXIT_SIGINT,
            CliError::Interrupted(_) => EXIT_SIGTERM,
            CliError::Reported { code } => *code,
            _ => EXIT_FAILURE,
        }
    }
}
