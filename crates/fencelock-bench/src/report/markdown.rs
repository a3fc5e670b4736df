//! The report as markdown: machine, parameters, one table per workload, the targets, the notes.

use std::fmt::Write as _;

use super::fmt_ratio;
use super::model::Report;

impl Report {
    /// The report as markdown: machine, parameters, one table per workload, the targets.
    pub fn to_markdown(&self) -> String {
        let mut md = String::new();
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
        if !self.w1.is_empty() {
            let _ = writeln!(
                md,
                "\n### W1 — uncontended latency (1 client, sequential acquire + release, new key each cycle)\n"
            );
            let _ = writeln!(
                md,
                "| library | cycles/s | p50 µs | p99 µs | round trips/cycle | Redis cmds/cycle | client CPU µs/cycle | server CPU µs/cycle | ratio to raw |"
            );
            let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---:|");
            for r in &self.w1 {
                if let Some(e) = &r.error {
                    let _ = writeln!(md, "| {} | {} | | | | | | | |", r.library, cell_error(e));
                    continue;
                }
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | {} | {} | {} | {} | {} | {} | {} |",
                    r.library,
                    r.cycles_per_s,
                    opt(r.p50_us, 0),
                    opt(r.p99_us, 0),
                    opt(r.reads_per_cycle, 2),
                    opt(r.commands_per_cycle, 2),
                    opt(r.client_cpu_us_per_cycle, 1),
                    opt(r.server_cpu_us_per_cycle, 1),
                    ratio_cell(r.ratio_to_raw)
                );
            }
        }
        if !self.w2.is_empty() {
            let tasks = self.w2.first().map_or(0, |r| r.tasks);
            let _ = writeln!(
                md,
                "\n### W2 — uncontended throughput ({tasks} tasks on one client, each its own key)\n"
            );
            let _ = writeln!(
                md,
                "| library | cycles/s | cycles per task (min–max) | client CPU µs/cycle | server CPU µs/cycle | script runs/cycle | server reads/cycle | ratio to raw |"
            );
            let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|");
            for r in &self.w2 {
                if let Some(e) = &r.error {
                    let _ = writeln!(md, "| {} | {} | | | | | | |", r.library, cell_error(e));
                    continue;
                }
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | {}–{} | {} | {} | {} | {} | {} |",
                    r.library,
                    r.cycles_per_s,
                    r.min_task_cycles,
                    r.max_task_cycles,
                    opt(r.client_cpu_us_per_cycle, 1),
                    opt(r.server_cpu_us_per_cycle, 1),
                    opt(r.script_runs_per_cycle, 2),
                    opt(r.reads_per_cycle, 2),
                    ratio_cell(r.ratio_to_raw)
                );
            }
        }
        if !self.w3.is_empty() {
            let workers = self.w3.first().map_or(0, |r| r.workers);
            let _ = writeln!(
                md,
                "\n### W3 — contended handoff ({workers} workers, each its own client, one key)\n"
            );
            let _ = writeln!(
                md,
                "| library | acquisitions/s | handoff p50 µs | handoff p99 µs | handoffs | free while waiting | wait p50 µs | wait p99 µs | self re-acquisitions | mean hold µs | grants per worker (min–max) | violations | lost updates | ratio to raw |"
            );
            let _ = writeln!(
                md,
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for r in &self.w3 {
                if let Some(e) = &r.error {
                    let _ = writeln!(
                        md,
                        "| {} | {} | | | | | | | | | | | | |",
                        r.library,
                        cell_error(e)
                    );
                    continue;
                }
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {}–{} | {} | {} | {} |",
                    r.library,
                    r.acquisitions_per_s,
                    opt(r.handoff_p50_us, 0),
                    opt(r.handoff_p99_us, 0),
                    r.handoffs,
                    r.free_while_waiting_percent
                        .map_or_else(String::new, |p| format!("{p:.1} %")),
                    opt(r.wait_p50_us, 0),
                    opt(r.wait_p99_us, 0),
                    r.self_reacquisitions,
                    opt(r.mean_hold_us, 0),
                    r.min_grants,
                    r.max_grants,
                    r.violations,
                    r.lost_updates,
                    ratio_cell(r.ratio_to_raw)
                );
            }
        }
        if !self.w4.is_empty() {
            let n = self.w4.iter().map(|r| r.instances).max().unwrap_or(0);
            let _ = writeln!(
                md,
                "\n### W4 — Redlock over {n} instances (1 client, sequential), then one instance SIGSTOPped\n"
            );
            let _ = writeln!(
                md,
                "| library | healthy cycles/s | p50 µs | p99 µs | one stopped: cycles/s | p50 µs | p99 µs | failed cycles | hung | ratio to raw (healthy) |"
            );
            let _ = writeln!(md, "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|");
            for r in &self.w4 {
                if let Some(e) = &r.error {
                    let _ = writeln!(md, "| {} | {} | | | | | | | | |", r.library, cell_error(e));
                    continue;
                }
                let (h, s) = (&r.healthy, &r.one_stopped);
                let _ = writeln!(
                    md,
                    "| {} | {:.0} | {} | {} | {:.1} | {} | {} | {} | {} | {} |",
                    r.library,
                    h.cycles_per_s,
                    opt(h.p50_us, 0),
                    opt(h.p99_us, 0),
                    s.cycles_per_s,
                    opt(s.p50_us, 0),
                    opt(s.p99_us, 0),
                    h.failures + s.failures,
                    if s.stalled || h.stalled {
                        "**yes**"
                    } else {
                        "no"
                    },
                    ratio_cell(r.ratio_to_raw)
                );
            }
        }
        if !self.w5.is_empty() {
            let _ = writeln!(md, "\n### W5 — keeping locks alive (automatic renewal)\n");
            let _ = writeln!(
                md,
                "| library | locks | renewals/s | renewal script runs/s | all Redis cmds/s | server reads/s | renewals per read | client CPU % | client CPU µs per renewal | bytes per lock | held (client view) | held (in Redis) | NOSCRIPT at start | CPU per renewal, ratio to raw |"
            );
            let _ = writeln!(
                md,
                "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for r in &self.w5 {
                if let Some(e) = &r.error {
                    let _ = writeln!(
                        md,
                        "| {} | {} | | | | | | | | | | | | |",
                        r.library,
                        cell_error(e)
                    );
                    continue;
                }
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.0} | {:.0} | {:.0} | {:.1} | {:.0} | {:.2} | {:.2} | {:.0} | {}/{} | {}/{} | {} | {} |",
                    r.library,
                    r.locks,
                    r.renewals_per_s,
                    r.renewal_commands_per_s,
                    r.total_commands_per_s,
                    r.reads_per_s,
                    r.renewals_per_s / r.reads_per_s.max(f64::MIN_POSITIVE),
                    r.client_cpu_percent,
                    r.client_cpu_us_per_renewal,
                    r.bytes_per_lock,
                    r.still_held,
                    r.locks,
                    r.held_in_redis,
                    r.locks,
                    r.noscript_replies,
                    ratio_cell(r.ratio_to_raw)
                );
            }
        }
        if !self.w6.is_empty() {
            self.w6_markdown(&mut md);
        }
        if !self.w7.is_empty() {
            let tasks = self.w7.iter().map(|r| r.tasks).max().unwrap_or(0);
            let _ = writeln!(
                md,
                "\n### W7 — deployments (fencelock and raw alternating on the same servers; 1 task, and {tasks} tasks on one client, each its own key)\n"
            );
            let _ = writeln!(
                md,
                "| deployment | library | 1 task, cycles/s | {tasks} tasks, cycles/s | release → woken waiter granted, p50 µs | note |"
            );
            let _ = writeln!(md, "|---|---|---:|---:|---:|---|");
            for r in &self.w7 {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} |",
                    r.deployment,
                    r.library,
                    opt(r.sequential_per_s, 0),
                    opt(r.concurrent_per_s, 0),
                    opt(r.wake_p50_us, 0),
                    r.error.as_deref().map(cell_error).unwrap_or_default()
                );
            }
        }
        if !self.w8.is_empty() {
            let tasks = self.w8.iter().map(|r| r.tasks).max().unwrap_or(0);
            let _ = writeln!(
                md,
                "\n### W8 — fenced writes (one server; the writers alternating; 1 task, and {tasks} tasks on one client, each its own resource)\n"
            );
            let _ = writeln!(
                md,
                "| writer | 1 task, writes/s | × SET | {tasks} tasks, writes/s | × SET | note |"
            );
            let _ = writeln!(md, "|---|---:|---:|---:|---:|---|");
            for r in &self.w8 {
                let _ = writeln!(
                    md,
                    "| {} | {} | {} | {} | {} | {} |",
                    r.writer,
                    opt(r.sequential_per_s, 0),
                    opt(r.sequential_ratio_to_set, 2),
                    opt(r.concurrent_per_s, 0),
                    opt(r.concurrent_ratio_to_set, 2),
                    r.error.as_deref().map(cell_error).unwrap_or_default()
                );
            }
        }
        if !self.targets.is_empty() {
            let _ = writeln!(md, "\n### Targets\n");
            let _ = writeln!(md, "| target | measured | met |");
            let _ = writeln!(md, "|---|---|---|");
            for t in &self.targets {
                let met = match t.met {
                    Some(true) => "yes",
                    Some(false) => "**no**",
                    None => "not measured",
                };
                let _ = writeln!(md, "| {} | {} | {met} |", t.target, t.measured);
            }
        }
        if !self.notes.is_empty() {
            let _ = writeln!(md, "\n### Notes\n");
            for n in &self.notes {
                let _ = writeln!(md, "- {n}");
            }
        }
        md
    }

    fn w6_markdown(&self, md: &mut String) {
        let w6 = &self.w6;
        if let Some(e) = &w6.error {
            let _ = writeln!(md, "\n### W6 — the lock family\n\n*{e}*");
        }
        if !w6.uncontended.is_empty() {
            let _ = writeln!(
                md,
                "\n### W6 — the lock family, uncontended (1 task, sequential cycles, one name per kind)\n"
            );
            let _ = writeln!(
                md,
                "| kind | a cycle | cycles/s | p50 µs | p99 µs | round trips/cycle | Redis cmds/cycle | script µs/cycle (server) | server CPU µs/cycle | client CPU µs/cycle | failed checks | ratio to plain |"
            );
            let _ = writeln!(
                md,
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for r in &w6.uncontended {
                if let Some(e) = &r.error {
                    let _ = writeln!(
                        md,
                        "| {} | {} | {} | | | | | | | | | |",
                        r.kind,
                        r.cycle,
                        cell_error(e)
                    );
                    continue;
                }
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                    r.kind,
                    r.cycle,
                    r.cycles_per_s,
                    opt(r.p50_us, 0),
                    opt(r.p99_us, 0),
                    opt(r.reads_per_cycle, 2),
                    opt(r.commands_per_cycle, 1),
                    opt(r.script_us_per_cycle, 1),
                    opt(r.server_cpu_us_per_cycle, 1),
                    opt(r.client_cpu_us_per_cycle, 1),
                    r.failed_checks,
                    ratio_cell(r.ratio_to_plain)
                );
            }
        }
        if !w6.contended.is_empty() {
            let _ = writeln!(
                md,
                "\n### W6 — the lock family, contended (workers on 2 clients, one name, short holds)\n"
            );
            let _ = writeln!(
                md,
                "| kind | contenders | acquisitions/s | handoff p50 µs | handoff p99 µs | handoffs | scripts per grant | mean hold µs | grants per worker (min–max) | violations | fence errors | out-of-order grants (near ties) | acq/s ratio to plain | handoff p50 ratio to plain |"
            );
            let _ = writeln!(
                md,
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
            );
            for r in &w6.contended {
                if let Some(e) = &r.error {
                    let _ = writeln!(
                        md,
                        "| {} | {} | {} | | | | | | | | | | | |",
                        r.kind,
                        r.contenders,
                        cell_error(e)
                    );
                    continue;
                }
                let order = match (r.out_of_order, r.near_ties) {
                    (Some(o), Some(t)) => format!("{o} ({t})"),
                    (Some(o), None) => o.to_string(),
                    _ => "–".into(),
                };
                let _ = writeln!(
                    md,
                    "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {}–{} | {} | {} | {order} | {} | {} |",
                    r.kind,
                    r.contenders,
                    r.acquisitions_per_s,
                    opt(r.handoff_p50_us, 0),
                    opt(r.handoff_p99_us, 0),
                    r.handoffs,
                    opt(r.scripts_per_grant, 2),
                    opt(r.mean_hold_us, 0),
                    r.min_grants,
                    r.max_grants,
                    r.violations,
                    r.fence_errors,
                    ratio_cell(r.ratio_to_plain),
                    ratio_cell(r.handoff_ratio_to_plain)
                );
            }
            let _ = writeln!(md, "\nHandoff, per row:\n");
            for r in &w6.contended {
                let _ = writeln!(md, "- {}: {}", r.kind, r.handoff);
            }
        }
    }
}

fn opt(v: Option<f64>, decimals: usize) -> String {
    v.filter(|x| x.is_finite())
        .map_or_else(|| "–".into(), |x| format!("{x:.decimals$}"))
}

fn ratio_cell(r: Option<f64>) -> String {
    r.map_or_else(|| "–".into(), fmt_ratio)
}

fn cell_error(e: &str) -> String {
    format!("*{}*", e.replace('|', "/").replace('\n', " "))
}
