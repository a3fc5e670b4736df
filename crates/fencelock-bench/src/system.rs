//! What the benchmark measures outside itself: the process's CPU time (its CPU clock) and
//! resident memory (`/proc/self`), and a Redis server's `INFO` counters.

use std::collections::HashMap;

use redis::aio::MultiplexedConnection;

use crate::error::{BenchError, Result};

/// User + system CPU time of this whole process (all threads, those that ended included), in
/// seconds, to the nanosecond: `CLOCK_PROCESS_CPUTIME_ID`. (`/proc/self/stat` counts in 10 ms
/// ticks, too coarse for the CPU a W5 turn uses.)
pub(crate) fn process_cpu_seconds() -> Result<f64> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID)
        .map_err(|e| BenchError::io("reading the process CPU clock", e.into()))?;
    Ok(t.tv_sec() as f64 + t.tv_nsec() as f64 / 1e9)
}

/// The resident set size of this process, in bytes (`VmRSS` of `/proc/self/status`).
pub(crate) fn resident_bytes() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| BenchError::io("reading /proc/self/status", e))?;
    parse_vm_rss(&status)
        .ok_or_else(|| BenchError::Bench("no VmRSS line in /proc/self/status".into()))
}

fn parse_vm_rss(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The 1-minute load average, if `/proc/loadavg` can be read.
pub(crate) fn load_average() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The CPU model name, if `/proc/cpuinfo` says.
pub(crate) fn cpu_model() -> Option<String> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("model name"))?;
    Some(line.split_once(':')?.1.trim().to_owned())
}

/// `INFO <section>` as `field -> value`.
pub(crate) async fn info(
    conn: &mut MultiplexedConnection,
    section: &str,
) -> Result<HashMap<String, String>> {
    let text: String = redis::cmd("INFO")
        .arg(section)
        .query_async(conn)
        .await
        .map_err(|e| BenchError::redis(format!("INFO {section}"), e))?;
    Ok(parse_info(&text))
}

fn parse_info(text: &str) -> HashMap<String, String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_owned(), v.trim().to_owned()))
        .collect()
}

/// `CONFIG RESETSTAT`: zero the command statistics and counters.
pub(crate) async fn reset_stats(conn: &mut MultiplexedConnection) -> Result<()> {
    redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query_async::<()>(conn)
        .await
        .map_err(|e| BenchError::redis("CONFIG RESETSTAT", e))
}

/// The server's CPU time (user + system, all its threads), in seconds (`INFO cpu`).
pub(crate) async fn server_cpu_seconds(conn: &mut MultiplexedConnection) -> Result<f64> {
    let cpu = info(conn, "cpu").await?;
    let get = |k: &str| {
        cpu.get(k)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    Ok(get("used_cpu_user") + get("used_cpu_sys"))
}

/// The server's client connections now (`connected_clients` of `INFO clients`).
pub(crate) async fn connected_clients(conn: &mut MultiplexedConnection) -> Result<u64> {
    let clients = info(conn, "clients").await?;
    Ok(clients
        .get("connected_clients")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0))
}

/// Calls per command since the last `CONFIG RESETSTAT` (commands run inside scripts included),
/// without the `INFO`/`CONFIG` commands of the benchmark itself.
/// Each command's `(calls, usec)`.
pub(crate) async fn command_mix(
    conn: &mut MultiplexedConnection,
) -> Result<std::collections::BTreeMap<String, (u64, u64)>> {
    let cmds = info(conn, "commandstats").await?;
    Ok(cmds
        .keys()
        .filter_map(|k| {
            let name = k.strip_prefix("cmdstat_")?;
            (!name.starts_with("info") && !name.starts_with("config"))
                .then(|| (name.to_owned(), (calls(&cmds, k), stat(&cmds, k, "usec"))))
        })
        .collect())
}

/// The commands that run a script: `EVALSHA`, and `EVAL` (a script sent in full after
/// `NOSCRIPT`).
const SCRIPT_COMMANDS: [&str; 2] = ["evalsha", "eval"];

/// Script calls and the server's time in them (µs), summed over [`SCRIPT_COMMANDS`], from a
/// [`command_mix`].
pub(crate) fn script_totals(mix: &std::collections::BTreeMap<String, (u64, u64)>) -> (u64, u64) {
    SCRIPT_COMMANDS
        .iter()
        .filter_map(|c| mix.get(*c))
        .fold((0, 0), |(calls, usec), (c, u)| (calls + c, usec + u))
}

/// The counters the benchmark reads after a measured window.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ServerCounters {
    /// `total_commands_processed` of `INFO stats`.
    pub(crate) commands: u64,
    /// `total_reads_processed` of `INFO stats`: read events on client sockets, an upper bound
    /// of the number of request batches (round trips) the server saw.
    pub(crate) reads: u64,
    /// `calls` of `cmdstat_evalsha`.
    pub(crate) evalsha: u64,
    /// `calls` of `cmdstat_eval` (scripts sent in full, after `NOSCRIPT`).
    pub(crate) eval: u64,
    /// `failed_calls` of `cmdstat_evalsha`: mostly `NOSCRIPT` replies.
    pub(crate) evalsha_failed: u64,
    /// `calls` of `cmdstat_pexpire` and `cmdstat_set` (calls from scripts count): in W5's
    /// window, a renewal each.
    pub(crate) renewals: u64,
}

/// Reads [`ServerCounters`].
pub(crate) async fn counters(conn: &mut MultiplexedConnection) -> Result<ServerCounters> {
    let stats = info(conn, "stats").await?;
    let cmds = info(conn, "commandstats").await?;
    let num = |m: &HashMap<String, String>, k: &str| -> u64 {
        m.get(k).and_then(|v| v.parse().ok()).unwrap_or(0)
    };
    Ok(ServerCounters {
        commands: num(&stats, "total_commands_processed"),
        reads: num(&stats, "total_reads_processed"),
        evalsha: calls(&cmds, "cmdstat_evalsha"),
        eval: calls(&cmds, "cmdstat_eval"),
        evalsha_failed: stat(&cmds, "cmdstat_evalsha", "failed_calls"),
        renewals: calls(&cmds, "cmdstat_pexpire") + calls(&cmds, "cmdstat_set"),
    })
}

/// The `calls=N` part of a `cmdstat_*` line.
fn calls(cmds: &HashMap<String, String>, key: &str) -> u64 {
    stat(cmds, key, "calls")
}

/// The `field=N` part of a `cmdstat_*` line.
fn stat(cmds: &HashMap<String, String>, key: &str, field: &str) -> u64 {
    cmds.get(key)
        .and_then(|v| {
            v.split(',')
                .find_map(|kv| kv.split_once('=').filter(|(k, _)| *k == field))
        })
        .and_then(|(_, n)| n.parse().ok())
        .unwrap_or(0)
}

/// The server's version (`redis_version` of `INFO server`).
pub(crate) async fn redis_version(conn: &mut MultiplexedConnection) -> Result<String> {
    let server = info(conn, "server").await?;
    Ok(server
        .get("redis_version")
        .cloned()
        .unwrap_or_else(|| "unknown".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_vm_rss() {
        let status = "Name:\tx\nVmPeak:\t 10 kB\nVmRSS:\t    2048 kB\n";
        assert_eq!(parse_vm_rss(status), Some(2048 * 1024));
    }

    #[test]
    fn parses_commandstats() {
        let info =
            parse_info("# Commandstats\r\ncmdstat_evalsha:calls=42,usec=10,usec_per_call=0.2\r\n");
        assert_eq!(calls(&info, "cmdstat_evalsha"), 42);
        assert_eq!(stat(&info, "cmdstat_evalsha", "usec"), 10);
        assert_eq!(stat(&info, "cmdstat_evalsha", "failed_calls"), 0);
        assert_eq!(calls(&info, "cmdstat_set"), 0);
    }

    #[test]
    fn script_totals_add_evalsha_and_eval() {
        let mix: std::collections::BTreeMap<String, (u64, u64)> = [
            ("evalsha".to_owned(), (40, 100)),
            ("eval".to_owned(), (2, 30)),
            ("get".to_owned(), (500, 50)),
        ]
        .into_iter()
        .collect();
        assert_eq!(script_totals(&mix), (42, 130));
        assert_eq!(script_totals(&Default::default()), (0, 0));
    }

    #[test]
    fn reads_this_process() {
        assert!(process_cpu_seconds().unwrap() >= 0.0);
        assert!(resident_bytes().unwrap() > 0);
    }
}
