//! The report as markdown: machine, parameters, one table per workload, the targets, the notes.
//! Every table goes through `table::Table`: a heading, the header, the alignment row, then
//! rows.

use std::fmt::Write as _;

use super::model::{Report, W6Report};
use super::table::{Table, cell_error, library_table, opt, ratio_cell};

impl Report {
    /// The report as markdown: machine, parameters, one table per workload, the targets.
    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
        self.machine_markdown(&mut md);
        self.w1_markdown(&mut md);
        self.w2_markdown(&mut md);
        self.w3_markdown(&mut md);
        self.w4_markdown(&mut md);
        self.w5_markdown(&mut md);
        if !self.w6.is_empty() {
            w6_markdown(&self.w6, &mut md);
        }
        self.w7_markdown(&mut md);
        self.w8_markdown(&mut md);
        self.w9_markdown(&mut md);
        self.targets_markdown(&mut md);
        if !self.notes.is_empty() {
            let _ = writeln!(md, "\n### Notes\n");
            for n in &self.notes {
                let _ = writeln!(md, "- {n}");
            }
        }
        md
    }

    fn machine_markdown(&self, md: &mut String) {
        let m = &self.machine;
        let _ = writeln!(md, "### Machine\n");
        let _ = writeln!(
            md,
            "- {} cores ({}), {}",
            m.cores,
            m.cpu_model.as_deref().unwrap_or("unknown CPU"),
            m.os
        );
        let _ = writeln!(md, "- Redis {}", m.redis_version);
        let _ = writeln!(md, "- {}", m.sharing);
        let _ = writeln!(
            md,
            "- load average (1 min): {} before, {} after",
            opt(m.load_before, 2),
            opt(m.load_after, 2)
        );
        if self.smoke {
            let _ = writeln!(
                md,
                "- **smoke run**: every workload ran ~0.5 s; the numbers are not meaningful"
            );
        }
        let _ = writeln!(md, "\n### Parameters\n");
        for p in &self.parameters {
            let _ = writeln!(md, "- {p}");
        }
    }

    fn w1_markdown(&self, md: &mut String) {
        library_table(
            md,
            &self.w1,
            "W1 — uncontended latency (1 client, sequential acquire + release, new key each cycle)",
            &[
                "library",
                "cycles/s",
                "p50 µs",
                "p99 µs",
                "round trips/cycle",
                "Redis cmds/cycle",
                "client CPU µs/cycle",
                "server CPU µs/cycle",
                "ratio to raw",
            ],
            "lrrrrrrrr",
            |r| {
                vec![
                    format!("{:.0}", r.cycles_per_s),
                    opt(r.p50_us, 0),
                    opt(r.p99_us, 0),
                    opt(r.reads_per_cycle, 2),
                    opt(r.commands_per_cycle, 2),
                    opt(r.client_cpu_us_per_cycle, 1),
                    opt(r.server_cpu_us_per_cycle, 1),
                ]
            },
        );
    }

    fn w2_markdown(&self, md: &mut String) {
        let tasks = self.w2.first().map_or(0, |r| r.tasks);
        library_table(
            md,
            &self.w2,
            &format!("W2 — uncontended throughput ({tasks} tasks on one client, each its own key)"),
            &[
                "library",
                "cycles/s",
                "cycles per task (min–max)",
                "client CPU µs/cycle",
                "server CPU µs/cycle",
                "script runs/cycle",
                "server reads/cycle",
                "ratio to raw",
            ],
            "lrrrrrrr",
            |r| {
                vec![
                    format!("{:.0}", r.cycles_per_s),
                    format!("{}–{}", r.min_task_cycles, r.max_task_cycles),
                    opt(r.client_cpu_us_per_cycle, 1),
                    opt(r.server_cpu_us_per_cycle, 1),
                    opt(r.script_runs_per_cycle, 2),
                    opt(r.reads_per_cycle, 2),
                ]
            },
        );
    }

    fn w3_markdown(&self, md: &mut String) {
        let workers = self.w3.first().map_or(0, |r| r.workers);
        library_table(
            md,
            &self.w3,
            &format!("W3 — contended handoff ({workers} workers, each its own client, one key)"),
            &[
                "library",
                "acquisitions/s",
                "handoff p50 µs",
                "handoff p99 µs",
                "floor p50 µs",
                "handoffs",
                "free while waiting",
                "wait p50 µs",
                "wait p99 µs",
                "self re-acquisitions",
                "mean hold µs",
                "grants per worker (min–max)",
                "violations",
                "lost updates",
                "ratio to raw",
            ],
            "lrrrrrrrrrrrrrr",
            |r| {
                vec![
                    format!("{:.0}", r.acquisitions_per_s),
                    opt(r.handoff_p50_us, 0),
                    opt(r.handoff_p99_us, 0),
                    opt(r.handoff_floor_p50_us, 0),
                    r.handoffs.to_string(),
                    r.free_while_waiting_percent
                        .map_or_else(String::new, |p| format!("{p:.1} %")),
                    opt(r.wait_p50_us, 0),
                    opt(r.wait_p99_us, 0),
                    r.self_reacquisitions.to_string(),
                    opt(r.mean_hold_us, 0),
                    format!("{}–{}", r.min_grants, r.max_grants),
                    r.violations.to_string(),
                    r.lost_updates.to_string(),
                ]
            },
        );
    }

    fn w9_markdown(&self, md: &mut String) {
        let mut counts: Vec<usize> = self.w9.iter().map(|r| r.workers).collect();
        counts.dedup();
        for n in counts {
            let rows: Vec<_> = self.w9.iter().filter(|r| r.workers == n).cloned().collect();
            library_table(
                md,
                &rows,
                &format!(
                    "W9 — what a contended grant costs the server ({n} workers, each its own client, one key)"
                ),
                &[
                    "library",
                    "grants/s",
                    "wait p50 ms",
                    "wait p99 ms",
                    "p99/p50",
                    "server µs/grant",
                    "server µs/handoff",
                    "commands/grant",
                    "connections",
                    "grants per worker (min–max)",
                    "violations",
                    "ratio to raw",
                ],
                "lrrrrrrrrrrr",
                |r| {
                    let ms = |us: Option<f64>| opt(us.map(|x| x / 1000.0), 1);
                    let spread = match (r.wait_p50_us, r.wait_p99_us) {
                        (Some(p50), Some(p99)) if p50 > 0.0 => Some(p99 / p50),
                        _ => None,
                    };
                    vec![
                        format!("{:.0}", r.acquisitions_per_s),
                        ms(r.wait_p50_us),
                        ms(r.wait_p99_us),
                        opt(spread, 2),
                        opt(r.server_us_per_grant, 0),
                        opt(r.server_us_per_handoff, 0),
                        opt(r.commands_per_grant, 1),
                        r.connections.map_or_else(|| "–".into(), |c| c.to_string()),
                        format!("{}–{}", r.min_grants, r.max_grants),
                        (r.violations + r.lost_updates).to_string(),
                    ]
                },
            );
        }
    }

    fn w4_markdown(&self, md: &mut String) {
        let n = self.w4.iter().map(|r| r.instances).max().unwrap_or(0);
        library_table(
            md,
            &self.w4,
            &format!(
                "W4 — Redlock over {n} instances (1 client, sequential), then one instance SIGSTOPped"
            ),
            &[
                "library",
                "healthy cycles/s",
                "p50 µs",
                "p99 µs",
                "one stopped: cycles/s",
                "p50 µs",
                "p99 µs",
                "failed cycles",
                "hung",
                "ratio to raw (healthy)",
            ],
            "lrrrrrrrlr",
            |r| {
                let (h, s) = (&r.healthy, &r.one_stopped);
                let hung = if s.stalled || h.stalled {
                    "**yes**"
                } else {
                    "no"
                };
                vec![
                    format!("{:.0}", h.cycles_per_s),
                    opt(h.p50_us, 0),
                    opt(h.p99_us, 0),
                    format!("{:.1}", s.cycles_per_s),
                    opt(s.p50_us, 0),
                    opt(s.p99_us, 0),
                    (h.failures + s.failures).to_string(),
                    hung.into(),
                ]
            },
        );
    }

    fn w5_markdown(&self, md: &mut String) {
        library_table(
            md,
            &self.w5,
            "W5 — keeping locks alive (automatic renewal)",
            &[
                "library",
                "locks",
                "renewals/s",
                "renewal script runs/s",
                "all Redis cmds/s",
                "server reads/s",
                "renewals per read",
                "client CPU %",
                "client CPU µs per renewal",
                "bytes per lock",
                "held (client view)",
                "held (in Redis)",
                "NOSCRIPT at start",
                "CPU per renewal, ratio to raw",
            ],
            "lrrrrrrrrrrrrr",
            |r| {
                vec![
                    r.locks.to_string(),
                    format!("{:.0}", r.renewals_per_s),
                    format!("{:.0}", r.renewal_commands_per_s),
                    format!("{:.0}", r.total_commands_per_s),
                    format!("{:.1}", r.reads_per_s),
                    format!(
                        "{:.0}",
                        r.renewals_per_s / r.reads_per_s.max(f64::MIN_POSITIVE)
                    ),
                    format!("{:.2}", r.client_cpu_percent),
                    format!("{:.2}", r.client_cpu_us_per_renewal),
                    format!("{:.0}", r.bytes_per_lock),
                    format!("{}/{}", r.still_held, r.locks),
                    format!("{}/{}", r.held_in_redis, r.locks),
                    r.noscript_replies.to_string(),
                ]
            },
        );
    }

    fn w7_markdown(&self, md: &mut String) {
        if self.w7.is_empty() {
            return;
        }
        let tasks = self.w7.iter().map(|r| r.tasks).max().unwrap_or(0);
        let mut table = Table::start(
            md,
            &format!(
                "W7 — deployments (fencelock and raw alternating on the same servers; 1 task, and {tasks} tasks on one client, each its own key)"
            ),
            &[
                "deployment",
                "library",
                "1 task, cycles/s",
                &format!("{tasks} tasks, cycles/s"),
                "release → woken waiter granted, p50 µs",
                "note",
            ],
            "llrrrl",
        );
        for r in &self.w7 {
            table.row(&[
                r.deployment.clone(),
                r.library.clone(),
                opt(r.sequential_per_s, 0),
                opt(r.concurrent_per_s, 0),
                opt(r.wake_p50_us, 0),
                r.error.as_deref().map(cell_error).unwrap_or_default(),
            ]);
        }
    }

    fn w8_markdown(&self, md: &mut String) {
        if self.w8.is_empty() {
            return;
        }
        let tasks = self.w8.iter().map(|r| r.tasks).max().unwrap_or(0);
        let mut table = Table::start(
            md,
            &format!(
                "W8 — fenced writes (one server; the writers alternating; 1 task, and {tasks} tasks on one client, each its own resource)"
            ),
            &[
                "writer",
                "1 task, writes/s",
                "× SET",
                &format!("{tasks} tasks, writes/s"),
                "× SET",
                "note",
            ],
            "lrrrrl",
        );
        for r in &self.w8 {
            table.row(&[
                r.writer.clone(),
                opt(r.sequential_per_s, 0),
                opt(r.sequential_ratio_to_set, 2),
                opt(r.concurrent_per_s, 0),
                opt(r.concurrent_ratio_to_set, 2),
                r.error.as_deref().map(cell_error).unwrap_or_default(),
            ]);
        }
    }

    fn targets_markdown(&self, md: &mut String) {
        if self.targets.is_empty() {
            return;
        }
        let mut table = Table::start(md, "Targets", &["target", "measured", "met"], "lll");
        for t in &self.targets {
            let met = match t.met {
                Some(true) => "yes",
                Some(false) => "**no**",
                None => "not measured",
            };
            table.row(&[t.target.clone(), t.measured.clone(), met.into()]);
        }
    }
}

fn w6_markdown(w6: &W6Report, md: &mut String) {
    if let Some(e) = &w6.error {
        let _ = writeln!(md, "\n### W6 — the lock family\n\n*{e}*");
    }
    if !w6.uncontended.is_empty() {
        w6_uncontended_markdown(w6, md);
    }
    if !w6.contended.is_empty() {
        w6_contended_markdown(w6, md);
    }
}

fn w6_uncontended_markdown(w6: &W6Report, md: &mut String) {
    let mut table = Table::start(
        md,
        "W6 — the lock family, uncontended (1 task, sequential cycles, one name per kind)",
        &[
            "kind",
            "a cycle",
            "cycles/s",
            "p50 µs",
            "p99 µs",
            "round trips/cycle",
            "Redis cmds/cycle",
            "script µs/cycle (server)",
            "server CPU µs/cycle",
            "client CPU µs/cycle",
            "failed checks",
            "ratio to plain",
        ],
        "llrrrrrrrrrr",
    );
    for r in &w6.uncontended {
        if let Some(e) = &r.error {
            table.failed(&[&r.kind, &r.cycle], e);
            continue;
        }
        table.row(&[
            r.kind.clone(),
            r.cycle.clone(),
            format!("{:.0}", r.cycles_per_s),
            opt(r.p50_us, 0),
            opt(r.p99_us, 0),
            opt(r.reads_per_cycle, 2),
            opt(r.commands_per_cycle, 1),
            opt(r.script_us_per_cycle, 1),
            opt(r.server_cpu_us_per_cycle, 1),
            opt(r.client_cpu_us_per_cycle, 1),
            r.failed_checks.to_string(),
            ratio_cell(r.ratio_to_plain),
        ]);
    }
}

fn w6_contended_markdown(w6: &W6Report, md: &mut String) {
    let mut table = Table::start(
        md,
        "W6 — the lock family, contended (workers on 2 clients, one name, short holds)",
        &[
            "kind",
            "contenders",
            "acquisitions/s",
            "handoff p50 µs",
            "handoff p99 µs",
            "handoffs",
            "scripts per grant",
            "mean hold µs",
            "grants per worker (min–max)",
            "violations",
            "fence errors",
            "out-of-order grants (near ties)",
            "acq/s ratio to plain",
            "handoff p50 ratio to plain",
        ],
        "llrrrrrrrrrrrr",
    );
    for r in &w6.contended {
        if let Some(e) = &r.error {
            table.failed(&[&r.kind, &r.contenders], e);
            continue;
        }
        let order = match (r.out_of_order, r.near_ties) {
            (Some(o), Some(t)) => format!("{o} ({t})"),
            (Some(o), None) => o.to_string(),
            _ => "–".into(),
        };
        table.row(&[
            r.kind.clone(),
            r.contenders.clone(),
            format!("{:.0}", r.acquisitions_per_s),
            opt(r.handoff_p50_us, 0),
            opt(r.handoff_p99_us, 0),
            r.handoffs.to_string(),
            opt(r.scripts_per_grant, 2),
            opt(r.mean_hold_us, 0),
            format!("{}–{}", r.min_grants, r.max_grants),
            r.violations.to_string(),
            r.fence_errors.to_string(),
            order,
            ratio_cell(r.ratio_to_plain),
            ratio_cell(r.handoff_ratio_to_plain),
        ]);
    }
    let _ = writeln!(md, "\nHandoff, per row:\n");
    for r in &w6.contended {
        let _ = writeln!(md, "- {}: {}", r.kind, r.handoff);
    }
}
