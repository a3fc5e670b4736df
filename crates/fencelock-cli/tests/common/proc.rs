//! Processes as `/proc` shows them: their state, parent and process group.

use nix::unistd::Pid;

/// Field `n` of `/proc/PID/stat` counted after the command's name (0: the state, 1: the parent,
/// 2: the process group); the name may hold spaces and parentheses, so the fields are found
/// from its last `)`.
pub fn stat_field(pid: Pid, n: usize) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(n).map(str::to_owned)
}

/// The state letter of `pid` (`S`, `R`, `T`, `Z`, ...).
pub fn state(pid: Pid) -> Option<String> {
    stat_field(pid, 0)
}

/// Whether `pid` runs: it exists and is not a zombie (which runs nothing).
pub fn alive(pid: Pid) -> bool {
    !matches!(state(pid).as_deref(), None | Some("Z" | "X" | "x"))
}

/// Whether `pid` is stopped (`T`, or `t` by a tracer).
pub fn stopped(pid: Pid) -> bool {
    matches!(state(pid).as_deref(), Some("T" | "t"))
}

/// The process group of `pid`.
pub fn group(pid: Pid) -> Option<String> {
    stat_field(pid, 2)
}

/// The processes whose parent is `parent`.
pub fn children_of(parent: Pid) -> Vec<Pid> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .map(Pid::from_raw)
        .filter(|&pid| stat_field(pid, 1) == Some(parent.as_raw().to_string()))
        .collect()
}
