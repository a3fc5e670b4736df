//! Talking to the server: one command, its keys, its log.

use std::io;
use std::time::Duration;

use super::{CMD_TIMEOUT, LOG_FILE, OUT_FILE, RedisServer};

impl RedisServer {
    fn connect(&self, timeout: Duration) -> redis::RedisResult<redis::Connection> {
        let client = redis::Client::open(self.url())?;
        let con = client.get_connection_with_timeout(timeout)?;
        con.set_read_timeout(Some(timeout))?;
        con.set_write_timeout(Some(timeout))?;
        Ok(con)
    }

    /// Run one command on a fresh synchronous connection (5 s connect, read
    /// and write timeouts) and return the reply. `args[0]` is the command
    /// name. Redis error replies are returned as `Err`.
    pub fn cmd(&self, args: &[&str]) -> redis::RedisResult<redis::Value> {
        let (name, rest) = args.split_first().ok_or_else(|| {
            redis::RedisError::from(io::Error::new(
                io::ErrorKind::InvalidInput,
                "cmd: empty command",
            ))
        })?;
        let mut con = self.connect(CMD_TIMEOUT)?;
        redis::cmd(name).arg(rest).query(&mut con)
    }

    /// Every key in the server (all of database 0, via `SCAN`), sorted and
    /// deduplicated; non-UTF-8 bytes are replaced. Meant for "nothing of ours
    /// is left" assertions.
    pub fn keys(&self) -> redis::RedisResult<Vec<String>> {
        let mut con = self.connect(CMD_TIMEOUT)?;
        let mut cursor: u64 = 0;
        let mut keys = Vec::new();
        loop {
            let (next, batch): (u64, Vec<Vec<u8>>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("COUNT")
                .arg(1000)
                .query(&mut con)?;
            keys.extend(
                batch
                    .iter()
                    .map(|k| String::from_utf8_lossy(k).into_owned()),
            );
            if next == 0 {
                break;
            }
            cursor = next;
        }
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// The last `lines` lines of the server log (across restarts), preceded by
    /// anything the process printed to stdout/stderr (e.g. command-line
    /// errors). Never fails: unreadable files yield a note instead.
    pub fn log_tail(&self, lines: usize) -> String {
        let mut out = String::new();
        if let Ok(early) = std::fs::read_to_string(self.dir.path().join(OUT_FILE))
            && !early.trim().is_empty()
        {
            out.push_str("[stdout/stderr]\n");
            out.push_str(early.trim_end());
            out.push('\n');
        }
        match std::fs::read(self.dir.path().join(LOG_FILE)) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                let all: Vec<&str> = text.lines().collect();
                let start = all.len().saturating_sub(lines);
                for line in &all[start..] {
                    out.push_str(line);
                    out.push('\n');
                }
            }
            Err(e) => out.push_str(&format!("(no redis log: {e})\n")),
        }
        out
    }
}
