//! The command's process tree, read from `/proc`: every process in the command's process group,
//! and every descendant of a root process (the supervisor, or the launcher). Both are child
//! subreapers, so a process that leaves the group (`setsid`, a double fork) stays a descendant
//! of the launcher while it lives, and of the supervisor after that: it cannot leave the tree.
//!
//! A process is *alive* here unless it is a zombie: a zombie runs nothing and holds nothing, it
//! only waits for its parent to collect its status. Counting zombies would take a command that
//! ended on SIGTERM for one that ignored it.

use std::collections::HashMap;

use nix::errno::Errno;
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;

/// One process, as `/proc/PID/stat` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    pid: i32,
    ppid: i32,
    group: i32,
    /// A zombie (`Z`) or dead (`X`): it runs nothing any more.
    ended: bool,
    /// Stopped (`T`) or stopped by a tracer (`t`).
    stopped: bool,
    /// When it started, in clock ticks after boot: with the PID, it names one process (a PID
    /// freed and given to a new process comes back with another start).
    start: u64,
}

/// The processes of the command: its process group, and the descendants of `root`.
#[derive(Debug, Clone, Copy)]
pub(super) struct Tree {
    root: Pid,
    group: Pid,
}

/// The tree at one moment.
#[derive(Debug, Default)]
pub(super) struct Members {
    /// The live processes (not `root` itself).
    pub(super) alive: Vec<Pid>,
    /// How many of `alive` are stopped.
    pub(super) stopped: usize,
    /// The zombies whose parent is `root`: `root` collects them.
    root_zombies: Vec<Pid>,
    /// The live processes, as found.
    alive_entries: Vec<Entry>,
    /// Those of `alive` outside the process group (a `killpg` misses them).
    outside_group: Vec<Entry>,
}

impl Tree {
    /// The tree of process group `group` and of `root`'s descendants.
    pub(super) fn new(root: Pid, group: Pid) -> Tree {
        Tree { root, group }
    }

    /// The process group.
    pub(super) fn group(&self) -> Pid {
        self.group
    }

    /// Who is in the tree now.
    pub(super) fn members(&self) -> Members {
        members_of(&scan(), self.root.as_raw(), self.group.as_raw())
    }

    /// Sends `signal` to the process group and to every live member outside it. Returns the
    /// members that were alive when it was sent.
    ///
    /// The group is signalled by its number: its leader, the launcher, is the supervisor's
    /// child and is not collected until the tree is stopped (a zombie keeps its number, so no
    /// new group can take it). A member outside the group is signalled through a pidfd checked
    /// against what was found ([`signal_process`]), never by a number that may be reused.
    pub(super) fn signal(&self, signal: Signal) -> Members {
        send_to_group(self.group, signal);
        let members = self.members();
        for entry in &members.outside_group {
            signal_process(entry, signal);
        }
        members
    }

    /// Sends `signal` to every live member, one by one, each through a checked pidfd (not to
    /// the group: `root` may lead it). Returns the members that were alive when it was sent.
    pub(super) fn signal_each(&self, signal: Signal) -> Members {
        let members = self.members();
        for entry in &members.alive_entries {
            signal_process(entry, signal);
        }
        members
    }

    /// Collects the zombies among `root`'s own children, except `keep` (a child whose status
    /// someone else waits for). Never blocks.
    pub(super) fn reap(&self, members: &Members, keep: Option<Pid>) {
        for &pid in &members.root_zombies {
            if Some(pid) != keep {
                let _ = waitpid(pid, Some(WaitPidFlag::WNOHANG));
            }
        }
    }
}

/// Sends `signal` to process group `group` (it may already be gone).
pub(super) fn send_to_group(group: Pid, signal: Signal) {
    if let Err(err) = killpg(group, signal)
        && err != Errno::ESRCH
    {
        tracing::debug!(%err, signal = signal.as_str(), "could not signal the process group");
    }
}

/// Sends `signal` to the process `entry` describes, if that very process still runs: a pidfd is
/// opened on its number, then the number is checked to still name a process of the same start
/// (a process that ended and was collected in between may have given its number to a new one;
/// the pidfd would then name the new one, and nothing is sent). Without pidfds (Linux before
/// 5.3) the same check comes just before a `kill`.
fn signal_process(entry: &Entry, signal: Signal) {
    let same = || read_entry(entry.pid).is_some_and(|now| now.start == entry.start && !now.ended);
    let sent = match rustix::process::Pid::from_raw(entry.pid)
        .map(|pid| rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::empty()))
    {
        None => return,
        Some(Ok(pidfd)) => {
            if !same() {
                return;
            }
            match rustix::process::Signal::from_named_raw(signal as i32) {
                Some(number) => rustix::process::pidfd_send_signal(&pidfd, number)
                    .map_err(|e| Errno::from_raw(e.raw_os_error())),
                None => return,
            }
        }
        Some(Err(err)) if err == rustix::io::Errno::NOSYS => {
            if !same() {
                return;
            }
            kill(Pid::from_raw(entry.pid), signal)
        }
        // ESRCH: it has ended.
        Some(Err(_)) => return,
    };
    if let Err(err) = sent
        && err != Errno::ESRCH
    {
        tracing::debug!(pid = entry.pid, %err, signal = signal.as_str(), "could not signal");
    }
}

/// One process's entry now, if it exists.
fn read_entry(pid: i32) -> Option<Entry> {
    parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// Every process this user can see in `/proc` (those that end while it is read are left out).
fn scan() -> Vec<Entry> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(Result::ok)
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter_map(|text| parse_stat(&text))
        .collect()
}

/// `PID (COMM) STATE PPID PGRP ...`: the name may hold spaces and parentheses, so the fields
/// after it are found from its last `)`.
fn parse_stat(text: &str) -> Option<Entry> {
    let (head, tail) = text.rsplit_once(')')?;
    let pid = head.split_once(" (")?.0.trim().parse().ok()?;
    let mut fields = tail.split_whitespace();
    let state = fields.next()?;
    let ppid = fields.next()?.parse().ok()?;
    let group = fields.next()?.parse().ok()?;
    // The 22nd field: the 19th after the group.
    let start = fields.nth(16)?.parse().ok()?;
    Some(Entry {
        pid,
        ppid,
        group,
        ended: matches!(state, "Z" | "X" | "x"),
        stopped: matches!(state, "T" | "t"),
        start,
    })
}

/// The members of the tree of `group` and of `root`'s descendants among `entries`.
fn members_of(entries: &[Entry], root: i32, group: i32) -> Members {
    let mut children: HashMap<i32, Vec<&Entry>> = HashMap::new();
    for entry in entries {
        children.entry(entry.ppid).or_default().push(entry);
    }
    let mut descendants = Vec::new();
    let mut next = vec![root];
    while let Some(parent) = next.pop() {
        for child in children.get(&parent).into_iter().flatten() {
            // A pid is its own ancestor only in a torn read; never loop on it.
            if child.pid != root && !descendants.iter().any(|d: &&Entry| d.pid == child.pid) {
                descendants.push(child);
                next.push(child.pid);
            }
        }
    }
    let mut members = Members::default();
    for entry in entries {
        if entry.pid == root {
            continue;
        }
        let in_group = entry.group == group;
        if !in_group && !descendants.iter().any(|d| d.pid == entry.pid) {
            continue;
        }
        let pid = Pid::from_raw(entry.pid);
        if entry.ended {
            if entry.ppid == root {
                members.root_zombies.push(pid);
            }
        } else {
            members.alive.push(pid);
            members.alive_entries.push(*entry);
            members.stopped += usize::from(entry.stopped);
            if !in_group {
                members.outside_group.push(*entry);
            }
        }
    }
    members
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_parse_even_with_parentheses_in_the_name() {
        let entry = parse_stat(
            "4242 (a) b (c)) S 17 4240 4240 0 -1 4194560 96 0 0 0 0 0 0 0 20 0 1 0 987654 ...",
        )
        .unwrap();
        assert_eq!(
            entry,
            Entry {
                pid: 4242,
                ppid: 17,
                group: 4240,
                ended: false,
                stopped: false,
                start: 987_654,
            }
        );
        let zombie = "12 (sh) Z 1 12 12 0 -1 4194560 96 0 0 0 0 0 0 0 20 0 1 0 5 ...";
        assert!(parse_stat(zombie).is_some_and(|e| e.ended));
        let stopped = "12 (sh) T 1 12 12 0 -1 4194560 96 0 0 0 0 0 0 0 20 0 1 0 5 ...";
        assert!(parse_stat(stopped).is_some_and(|e| e.stopped && !e.ended));
        assert!(parse_stat("12 (sh) S 1 12 12").is_none(), "no start time");
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn the_tree_is_the_group_and_the_roots_descendants_without_zombies() {
        let e = |pid, ppid, group, ended| Entry {
            pid,
            ppid,
            group,
            ended,
            stopped: false,
            start: 1,
        };
        let entries = [
            e(1, 0, 1, false),
            e(10, 1, 10, false),  // the supervisor (root)
            e(11, 10, 11, false), // the launcher, leading the group
            e(12, 11, 11, false), // the command
            e(13, 12, 13, false), // setsid by the command
            e(14, 13, 14, false), // and its child in another group
            e(15, 11, 15, true),  // a zombie of the launcher's, out of the group
            e(16, 10, 16, true),  // a zombie of the root's
            e(17, 1, 11, false),  // in the group, parented elsewhere
            e(18, 1, 18, false),  // unrelated
        ];
        let members = members_of(&entries, 10, 11);
        let mut alive: Vec<i32> = members.alive.iter().map(|p| p.as_raw()).collect();
        alive.sort_unstable();
        assert_eq!(alive, [11, 12, 13, 14, 17]);
        let mut outside: Vec<i32> = members.outside_group.iter().map(|e| e.pid).collect();
        outside.sort_unstable();
        assert_eq!(outside, [13, 14]);
        assert_eq!(members.root_zombies, [Pid::from_raw(16)]);
    }
}
