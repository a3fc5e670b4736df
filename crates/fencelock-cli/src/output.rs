//! Line-oriented output that reads well in a terminal and in a pipe.
//!
//! In a terminal (stdout is a TTY, `TERM` is not `dumb`) lines may be colored (unless `NO_COLOR`
//! is set) and a one-line live status is redrawn under them. In a pipe or a file there is no
//! escape code at all: plain lines, one event per line.

use std::io::{IsTerminal, Write};

use crate::error::CliError;

/// Writes `text` and a newline to stdout, at once. A reader that is gone (`fencelock list |
/// head`) is [`CliError::StdoutClosed`]: the command ends quietly, as other Unix tools do.
pub fn print_line(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.write_all(b"\n"))
        .and_then(|()| stdout.flush())
        .map_err(stdout_error)
}

/// Writes `text` as it is to stdout (see [`print_line`]).
pub fn print_text(text: &str) -> Result<(), CliError> {
    let mut stdout = std::io::stdout().lock();
    stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
        .map_err(stdout_error)
}

/// The error of a write to stdout: [`CliError::StdoutClosed`] when the reader is gone.
pub fn stdout_error(err: std::io::Error) -> CliError {
    if err.kind() == std::io::ErrorKind::BrokenPipe {
        CliError::StdoutClosed
    } else {
        CliError::io("cannot write to stdout", err)
    }
}

/// How a piece of text is emphasized in a terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// Headings.
    Strong,
    /// Secondary details.
    Dim,
    /// Things that went as they should.
    Good,
    /// Failures, refusals.
    Bad,
    /// Things to notice.
    Note,
}

/// Where the demo's story goes (stdout).
#[derive(Debug)]
pub struct Output {
    /// Escape codes are allowed at all (a terminal).
    terminal: bool,
    /// Colors are wanted.
    color: bool,
    /// A live status line is currently drawn and must be erased before the next line.
    status_shown: bool,
    /// The text of the live status line last drawn.
    last_status: String,
}

impl Output {
    /// Output to stdout, with escape codes only if stdout is a terminal that understands them.
    pub fn stdout() -> Self {
        let terminal = std::io::stdout().is_terminal()
            && std::env::var_os("TERM").is_none_or(|term| term != "dumb");
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Output {
            terminal,
            color: terminal && !no_color,
            status_shown: false,
            last_status: String::new(),
        }
    }

    /// `text` in `tone` (unchanged without color).
    pub fn paint(&self, tone: Tone, text: &str) -> String {
        if !self.color {
            return text.to_owned();
        }
        let code = match tone {
            Tone::Strong => "1",
            Tone::Dim => "2",
            Tone::Good => "32",
            Tone::Bad => "1;31",
            Tone::Note => "33",
        };
        format!("\x1b[{code}m{text}\x1b[0m")
    }

    /// `worker N`, colored per worker in a terminal.
    pub fn worker(&self, id: u32) -> String {
        let text = format!("worker {id}");
        if !self.color {
            return text;
        }
        const COLORS: [&str; 6] = ["36", "35", "34", "33", "32", "96"];
        let index = usize::try_from(id).unwrap_or(0) % COLORS.len();
        format!("\x1b[{}m{text}\x1b[0m", COLORS[index])
    }

    /// Prints one line (erasing the live status line first, if one is shown).
    pub fn line(&mut self, text: &str) -> Result<(), CliError> {
        let mut stdout = std::io::stdout().lock();
        let result = (|| {
            if self.status_shown {
                stdout.write_all(b"\r\x1b[2K")?;
            }
            stdout.write_all(text.as_bytes())?;
            stdout.write_all(b"\n")?;
            stdout.flush()
        })();
        self.status_shown = false;
        result.map_err(stdout_error)
    }

    /// Draws the live status line (terminal only; nothing in a pipe).
    pub fn status(&mut self, text: &str) -> Result<(), CliError> {
        if !self.terminal || (self.status_shown && self.last_status == text) {
            return Ok(());
        }
        self.last_status = text.to_owned();
        let mut stdout = std::io::stdout().lock();
        let painted = self.paint(Tone::Dim, text);
        let result = write!(stdout, "\r\x1b[2K{painted}").and_then(|()| stdout.flush());
        self.status_shown = true;
        result.map_err(stdout_error)
    }

    /// Erases the live status line, if one is shown.
    pub fn clear_status(&mut self) {
        if self.status_shown {
            let mut stdout = std::io::stdout().lock();
            let _ = stdout.write_all(b"\r\x1b[2K").and_then(|()| stdout.flush());
            self.status_shown = false;
        }
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        self.clear_status();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_terminal_there_are_no_escape_codes() {
        let out = Output {
            terminal: false,
            color: false,
            status_shown: false,
            last_status: String::new(),
        };
        for tone in [Tone::Strong, Tone::Dim, Tone::Good, Tone::Bad, Tone::Note] {
            assert_eq!(out.paint(tone, "x"), "x");
        }
        assert_eq!(out.worker(3), "worker 3");
    }
}
