//! A process and its status, in the command's terms: how a program is named in messages and
//! the exit status a shell would report. The supervisor (`child.rs`, `job.rs`) and the launcher
//! (`launch.rs`) both speak it.

use std::ffi::OsStr;
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;

use crate::error::EXIT_FAILURE;

/// The exit status as a shell reports it: the code, or 128 + the signal that killed it.
pub(super) fn exit_code_of(status: ExitStatus) -> u8 {
    if let Some(code) = status.code() {
        return u8::try_from(code).unwrap_or(EXIT_FAILURE);
    }
    status
        .signal()
        .and_then(|signal| u8::try_from(128 + signal).ok())
        .unwrap_or(EXIT_FAILURE)
}

/// A program's name, quoted, for messages.
pub(super) fn show(program: &OsStr) -> String {
    format!("{:?}", program.to_string_lossy())
}
