//! The contenders' names: which exist, which this build can run, how the report and the
//! command line spell them.

use serde::{Deserialize, Serialize};

/// A contender in the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Library {
    /// This project's library, with its default options (only the lease is set).
    Fencelock,
    /// No library: `SET k tok NX PX` and a compare-and-delete script by `EVALSHA` over one
    /// multiplexed connection. Two round trips per cycle: the physical limit.
    Raw,
    /// No library, but fenced: one `EVALSHA` of `SET k tok NX PX ttl` + `INCR` of a fence key,
    /// and the same compare-and-delete. The least any fenced Redis lock can do (its fences do
    /// not survive a lost counter, and it checks no types).
    #[serde(rename = "raw-fenced")]
    RawFenced,
    /// The `rslock` crate (async, Redlock algorithm, default retry settings).
    Rslock,
    /// The `redlock` crate (synchronous, run on Tokio's blocking pool).
    Redlock,
    /// node-redlock (the `redlock` npm package on ioredis), run by `node` in a child process:
    /// W4 only (it is the Redlock client the W4 goal names; see `node_redlock.rs`).
    #[serde(rename = "node-redlock")]
    NodeRedlock,
}

impl Library {
    /// Every contender, in report order. The peers are present only with the `peers` feature.
    pub fn all() -> Vec<Library> {
        let mut all = vec![Library::Fencelock, Library::Raw, Library::RawFenced];
        if cfg!(feature = "peers") {
            all.extend([Library::Rslock, Library::Redlock]);
        }
        if Library::NodeRedlock.available() {
            all.push(Library::NodeRedlock);
        }
        all
    }

    /// The lower-case name used in the report and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Library::Fencelock => "fencelock",
            Library::Raw => "raw",
            Library::RawFenced => "raw-fenced",
            Library::Rslock => "rslock",
            Library::Redlock => "redlock",
            Library::NodeRedlock => "node-redlock",
        }
    }

    /// Whether this build can run the contender.
    pub fn available(self) -> bool {
        match self {
            Library::Fencelock | Library::Raw | Library::RawFenced => true,
            Library::Rslock | Library::Redlock => cfg!(feature = "peers"),
            Library::NodeRedlock => crate::node_redlock::installed().is_ok(),
        }
    }

    /// Whether the contender is measured on one server (W1–W3, W5): all but node-redlock,
    /// which is here for W4.
    pub fn single_server(self) -> bool {
        self != Library::NodeRedlock
    }
}

impl std::fmt::Display for Library {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Library {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "fencelock" => Ok(Library::Fencelock),
            "raw" => Ok(Library::Raw),
            "raw-fenced" => Ok(Library::RawFenced),
            "rslock" => Ok(Library::Rslock),
            "redlock" => Ok(Library::Redlock),
            "node-redlock" => Ok(Library::NodeRedlock),
            other => Err(format!(
                "unknown library {other:?} (expected fencelock, raw, raw-fenced, rslock, redlock or node-redlock)"
            )),
        }
    }
}
