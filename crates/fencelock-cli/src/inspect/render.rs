//! How `status`, `list` and `watch` show a lock: its holder, its JSON fields, durations,
//! waiters, the run-once records' JSON, and aligned tables.

use std::time::Duration;

use fencelock::admin::{Side, Waiter};
use serde_json::{Map, Value, json};

/// A holder for people: its token's first digits, and its label in parentheses if it has one.
pub(crate) fn holder_text(holder: &fencelock::admin::Holder) -> String {
    match &holder.label {
        Some(label) => format!("{} ({label})", holder.token_prefix),
        None => holder.token_prefix.clone(),
    }
}

/// The JSON fields of one lock, in a stable order.
pub(crate) fn lock_fields(info: &fencelock::admin::LockInfo) -> Map<String, Value> {
    let millis = |d: Option<Duration>| d.and_then(|d| u64::try_from(d.as_millis()).ok());
    let holder = info.holder.as_ref();
    let shared: Vec<Value> = info
        .shared
        .iter()
        .map(|h| {
            json!({
                "holder": h.token_prefix,
                "label": h.label,
                "remaining_ms": millis(h.remaining),
                "fence": h.fence,
                "permits": h.permits,
            })
        })
        .collect();
    let kind = info.kind.as_ref().map(fencelock::LockKind::code);
    let permits = info.permits;
    let waiters: Vec<Value> = info
        .waiters
        .iter()
        .map(|w| {
            json!({
                "place": w.place,
                "waiter": w.token_prefix,
                "waited_ms": millis(w.waited),
                "side": w.side.as_ref().map(Side::code),
            })
        })
        .collect();
    let fields = json!({
        "name": info.name,
        "held": info.is_held(),
        "holder": holder.map(|h| &h.token_prefix),
        "remaining_ms": millis(holder.and_then(|h| h.remaining)),
        "fence": holder.and_then(|h| h.fence),
        "last_fence": info.last_fence,
        "kind": kind,
        "permits": permits,
        "shared": shared,
        "waiting": info.waiting,
        "waiters": waiters,
        "label": holder.and_then(|h| h.label.as_ref()),
    });
    match fields {
        Value::Object(fields) => fields,
        _ => Map::new(),
    }
}

/// The run-once records as `status --json` shows them.
pub(super) fn once_json(records: &[fencelock::admin::OnceRecord]) -> Value {
    let millis = |at: std::time::SystemTime| {
        at.duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    };
    Value::Array(
        records
            .iter()
            .map(|r| {
                json!({
                    "key": r.key,
                    "fence": r.fence,
                    "recorded_ms": millis(r.at),
                    "record": r.record,
                })
            })
            .collect(),
    )
}

/// `text` as one word for a POSIX shell, in single quotes.
pub(super) fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

/// A remaining lease for people: `27.4s`, `850ms`, `no expiry`.
pub(crate) fn remaining(d: Option<Duration>) -> String {
    match d {
        None => "no expiry".to_owned(),
        Some(d) if d >= Duration::from_secs(1) => format!("{:.1}s", d.as_secs_f64()),
        Some(d) => format!("{}ms", d.as_millis()),
    }
}

/// One waiter for people: `1. 5f3e9a01 (writer), waited 1.2s`; `-` for no place, nothing
/// about the wait when it is not known.
pub(crate) fn waiter_text(waiter: &Waiter) -> String {
    let mut text = waiter
        .place
        .map_or_else(|| "-".to_owned(), |p| format!("{p}."));
    text.push(' ');
    text.push_str(&waiter.token_prefix);
    if let Some(side) = waiter.side.as_ref().map(Side::code) {
        text.push_str(&format!(" ({side})"));
    }
    if let Some(waited) = waiter.waited {
        text.push_str(&format!(", waited {}", remaining(Some(waited))));
    }
    text
}

pub(super) fn optional(n: Option<u64>) -> String {
    n.map_or_else(|| "-".to_owned(), |n| n.to_string())
}

/// Rows as left-aligned columns separated by two spaces (no trailing spaces).
pub(super) fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            line.push_str(cell);
            if i + 1 < N {
                let pad = widths[i] - cell.chars().count() + 2;
                line.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// What `status` calls the kind a lock is held as: `lock`, `reentrant lock (2 holds)`,
/// `read-write lock`, `semaphore of 4`.
pub(super) fn kind_label(info: &fencelock::admin::LockInfo) -> String {
    match &info.kind {
        Some(fencelock::LockKind::Lock) => "lock".to_owned(),
        Some(fencelock::LockKind::Reentrant) => {
            let holds = info.holder.as_ref().and_then(|h| h.holds).unwrap_or(0);
            format!("reentrant lock ({holds} holds)")
        }
        Some(fencelock::LockKind::ReadWrite) => "read-write lock".to_owned(),
        Some(fencelock::LockKind::Semaphore) => {
            format!("semaphore of {}", info.permits.unwrap_or(0))
        }
        Some(other) => other.to_string(),
        None => "free".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remaining_leases_read_well() {
        assert_eq!(remaining(Some(Duration::from_millis(27_431))), "27.4s");
        assert_eq!(remaining(Some(Duration::from_millis(850))), "850ms");
        assert_eq!(remaining(None), "no expiry");
    }

    #[test]
    fn waiters_read_well() {
        let info = |place, waited, side| {
            let mut waiter = fencelock::admin::Waiter::default();
            waiter.place = place;
            waiter.waited = waited;
            waiter.side = side;
            waiter.token_prefix = "5f3e9a01".to_owned();
            waiter_text(&waiter)
        };
        assert_eq!(
            info(
                Some(1),
                Some(Duration::from_millis(1200)),
                Some(Side::Writer)
            ),
            "1. 5f3e9a01 (writer), waited 1.2s"
        );
        assert_eq!(info(Some(2), None, None), "2. 5f3e9a01");
        assert_eq!(info(None, None, None), "- 5f3e9a01");
    }

    #[test]
    fn shell_words_are_quoted() {
        assert_eq!(
            shell_quote("fencelock:once:{m}:v42"),
            "'fencelock:once:{m}:v42'"
        );
        assert_eq!(shell_quote("it's"), "'it'\\''s'");
    }

    #[test]
    fn tables_align_columns() {
        let rows = [
            ["NAME".to_owned(), "FENCE".to_owned()],
            ["long-name".to_owned(), "1".to_owned()],
        ];
        assert_eq!(table(&rows), "NAME       FENCE\nlong-name  1\n");
    }
}
