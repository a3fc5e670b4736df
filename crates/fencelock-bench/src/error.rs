//! The benchmark's error type: every variant says what the benchmark was doing.

/// Why a benchmark could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BenchError {
    /// A `redis-server` could not be started or controlled, or `/proc` could not be read.
    #[error("{context}: {source}")]
    Io {
        /// What the benchmark was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A Redis command of the benchmark itself (or of the raw baseline) failed.
    #[error("{context}: {source}")]
    Redis {
        /// What the benchmark was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: redis::RedisError,
    },
    /// fencelock returned an error.
    #[error("{context}: {source}")]
    Fencelock {
        /// What the benchmark was doing.
        context: String,
        /// The underlying error (boxed: it is large, and errors are rare here).
        #[source]
        source: Box<fencelock::Error>,
    },
    /// A peer library (rslock, redlock) returned an error.
    #[error("{library}: {context}: {message}")]
    Peer {
        /// The library.
        library: &'static str,
        /// What the benchmark was doing.
        context: String,
        /// The library's error, as text.
        message: String,
    },
    /// The benchmark itself went wrong (a task panicked, a lock was not granted when it had to
    /// be, an option is out of range).
    #[error("{0}")]
    Bench(String),
    /// Writing or reading the report failed.
    #[error("{context}: {source}")]
    Json {
        /// What the benchmark was doing.
        context: String,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
}

impl BenchError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        BenchError::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn redis(context: impl Into<String>, source: redis::RedisError) -> Self {
        BenchError::Redis {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn fencelock(context: impl Into<String>, source: fencelock::Error) -> Self {
        BenchError::Fencelock {
            context: context.into(),
            source: Box::new(source),
        }
    }

    #[cfg(feature = "peers")]
    pub(crate) fn peer(
        library: &'static str,
        context: impl Into<String>,
        message: impl std::fmt::Display,
    ) -> Self {
        BenchError::Peer {
            library,
            context: context.into(),
            message: message.to_string(),
        }
    }

    pub(crate) fn join(context: &str, err: tokio::task::JoinError) -> Self {
        BenchError::Bench(format!("{context}: a benchmark task failed: {err}"))
    }
}

/// The benchmark's result type.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;
