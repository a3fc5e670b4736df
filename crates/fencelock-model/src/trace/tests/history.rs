//! Chaos histories (the format of `fencelock chaos --history`) read as traces.

use super::super::{Loss, Seen, What, WriteOutcome, check, read_chaos_history};

/// A chaos history (the format of `fencelock chaos --history`), every kind of line.
const HISTORY: &str = r#"{"mono_ns":1000,"wall_ms":1,"op":"run","topology":"single","kind":"semaphore","permits":2,"workers":3,"locks":["a"],"ttl_ms":1000,"seed":7,"faults":["kill-server"]}
{"mono_ns":2000,"wall_ms":1,"worker":1,"lock":"a","op":"acquire"}
{"mono_ns":3000,"wall_ms":1,"worker":1,"lock":"a","op":"granted","fence":10}
{"mono_ns":4000,"wall_ms":1,"worker":1,"lock":"a","op":"write","fence":10,"started_ns":3500,"accepted":true,"store_fence":10}
{"mono_ns":4100,"wall_ms":1,"worker":1,"lock":"a","op":"counter","read":0}
{"mono_ns":5000,"wall_ms":1,"worker":2,"lock":"a","op":"acquire"}
{"mono_ns":6000,"wall_ms":1,"worker":2,"lock":"a","op":"not_granted","outcome":"busy"}
{"mono_ns":7000,"wall_ms":1,"op":"fault","kind":"latency","target":"proxy 0","phase":"start"}
{"mono_ns":7500,"wall_ms":1,"op":"fault","kind":"kill-server","target":"server 0","phase":"start"}
{"mono_ns":7600,"wall_ms":1,"op":"fault","kind":"kill-server","target":"server 0","phase":"end"}
{"mono_ns":8000,"wall_ms":1,"worker":1,"lock":"a","op":"lost","fence":10,"reason":"expired"}
{"mono_ns":9000,"wall_ms":1,"worker":1,"lock":"a","op":"release","fence":10}
{"mono_ns":10000,"wall_ms":1,"worker":1,"lock":"a","op":"released","fence":10,"held":false}
{"mono_ns":11000,"wall_ms":1,"worker":3,"lock":"a","op":"acquire"}
{"mono_ns":12000,"wall_ms":1,"worker":3,"lock":"a","op":"granted","fence":12}
{"mono_ns":13000,"wall_ms":1,"worker":3,"lock":"a","op":"write","fence":12,"started_ns":12500,"error":"timed out"}
{"mono_ns":14000,"wall_ms":1,"op":"fault","kind":"kill-worker","target":"worker 3","phase":"start"}
{"mono_ns":15000,"wall_ms":1,"worker":2,"lock":"a","op":"acquire"}
{"mono_ns":16000,"wall_ms":1,"worker":2,"lock":"a","op":"granted","fence":11}
{"mono_ns":17000,"wall_ms":1,"worker":2,"lock":"a","op":"write","fence":11,"started_ns":16500,"accepted":false,"store_fence":12}
{"mono_ns":18000,"wall_ms":1,"lock":"a","op":"store_log","log":[[10,1],[12,3]]}
{"mono_ns":18000,"wall_ms":1,"lock":"a","op":"counter_final","value":1}
"#;

#[test]
fn a_chaos_history_is_read_line_by_line() {
    let trace = read_chaos_history(HISTORY.as_bytes()).unwrap_or_default();
    assert_eq!(trace.permits, 2);
    let seen: Vec<(usize, What)> = trace
        .events
        .iter()
        .map(|e| (e.line, e.what.clone()))
        .collect();
    let w = |worker: u32, seen: Seen| What::Worker {
        worker,
        lock: "a".into(),
        seen,
    };
    let write = |fence, started_ns, outcome| Seen::Write {
        fence,
        started_ns,
        outcome,
    };
    let expected = vec![
        (2, w(1, Seen::Request)),
        (
            3,
            w(
                1,
                Seen::Granted {
                    fence: 10,
                    permits: 1,
                },
            ),
        ),
        (4, w(1, write(10, 3500, WriteOutcome::Accepted))),
        (6, w(2, Seen::Request)),
        (7, w(2, Seen::NotGranted)),
        (9, What::Fault(Loss::Restart)),
        (
            11,
            w(
                1,
                Seen::Told {
                    fence: 10,
                    deadline_ns: None,
                },
            ),
        ),
        (12, w(1, Seen::Release { fence: 10 })),
        (
            13,
            w(
                1,
                Seen::Released {
                    fence: 10,
                    held: Some(false),
                },
            ),
        ),
        (14, w(3, Seen::Request)),
        (
            15,
            w(
                3,
                Seen::Granted {
                    fence: 12,
                    permits: 1,
                },
            ),
        ),
        (16, w(3, write(12, 12500, WriteOutcome::Unknown))),
        (
            17,
            What::Worker {
                worker: 3,
                lock: String::new(),
                seen: Seen::Killed,
            },
        ),
        (18, w(2, Seen::Request)),
        (
            19,
            w(
                2,
                Seen::Granted {
                    fence: 11,
                    permits: 1,
                },
            ),
        ),
        (
            20,
            w(2, write(11, 16500, WriteOutcome::Refused { store: 12 })),
        ),
        (
            21,
            What::StoreLog {
                lock: "a".into(),
                log: vec![(10, 1), (12, 3)],
            },
        ),
    ];
    assert_eq!(seen, expected);
    // Two permits, a restart, a write with no answer that the log shows, a killed holder: the
    // grant of 11 after 12 is the one thing no run of the model explains.
    let e = check(&trace).err();
    assert_eq!(
        e.as_ref().map(|e| (e.line, e.to_string())),
        Some((
            19,
            "line 19 (a): worker 2 was granted fence 11, not above fence 12 granted before it"
                .to_owned()
        ))
    );
    let mut fixed = HISTORY.replace(r#""fence":11"#, r#""fence":13"#);
    fixed = fixed.replace(
        r#""fence":13,"started_ns":16500,"accepted":false,"store_fence":12"#,
        r#""fence":13,"started_ns":16500,"accepted":true,"store_fence":13"#,
    );
    fixed = fixed.replace("[[10,1],[12,3]]", "[[10,1],[12,3],[13,2]]");
    let trace = read_chaos_history(fixed.as_bytes()).unwrap_or_default();
    let explained = check(&trace).map(|e| (e.operations, e.locks));
    // 3 grants, 3 writes (the one with no answer placed as the log's second entry), 1 release.
    assert_eq!(explained, Ok((7, 1)));
}

#[test]
fn a_failover_loses_data_over_sentinel_only() {
    let history = |topology: &str| {
        format!(
            r#"{{"mono_ns":1,"op":"run","topology":"{topology}","kind":"lock","workers":2,"locks":["a"],"ttl_ms":1000,"seed":7,"faults":["failover"]}}
{{"mono_ns":2,"op":"fault","kind":"failover","target":"server 0","phase":"start"}}
{{"mono_ns":3,"op":"fault","kind":"failover","target":"server 0","phase":"end"}}
{{"mono_ns":4,"op":"fault","kind":"kill-server","target":"server 0","phase":"end"}}
{{"mono_ns":5,"op":"fault","kind":"kill-worker","target":"worker 2","phase":"end"}}
"#
        )
    };
    let read = |topology: &str| {
        read_chaos_history(history(topology).as_bytes())
            .unwrap_or_default()
            .events
            .into_iter()
            .map(|e| (e.line, e.what))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        read("sentinel"),
        vec![
            (2, What::Fault(Loss::FailoverStart)),
            (3, What::Fault(Loss::FailoverEnd))
        ]
    );
    assert_eq!(read("cluster"), Vec::new());
}

#[test]
fn a_last_line_cut_short_is_left_out_and_only_that() {
    // Cut in the store's log (the next-to-last line).
    let cut = &HISTORY[..HISTORY.find("[[10,1]").unwrap_or(0)];
    let whole = read_chaos_history(HISTORY.as_bytes()).unwrap_or_default();
    let trace = read_chaos_history(cut.as_bytes()).unwrap_or_default();
    assert_eq!(trace.events.len() + 1, whole.events.len());
    assert!(
        trace.cut && !whole.cut,
        "a history without its store's log is cut short"
    );
    // The same text with its newline is a line that is not an entry.
    let e = read_chaos_history(format!("{cut}\n").as_bytes()).err();
    assert!(e.is_some_and(|e| e.starts_with("line 21: ")));
}

#[test]
fn a_line_that_is_not_an_entry_is_named() {
    let e = read_chaos_history("{\"op\":\"run\"}\nnot json\n".as_bytes()).err();
    assert!(e.is_some_and(|e| e.starts_with("line 1: no mono_ns")));
    let e = read_chaos_history(
        "{\"mono_ns\":1,\"op\":\"store_log\",\"lock\":\"a\",\"log\":3}\n".as_bytes(),
    )
    .err();
    assert!(e.is_some_and(|e| e.starts_with("line 1: a store log that is not a list")));
}
