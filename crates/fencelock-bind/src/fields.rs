//! The fields an error carries besides its code and message, named the same in every package:
//! a package sets each as an attribute (Python) or a property (Node.js) of its exception.

use std::time::Duration;

use fencelock::Error;

/// A field's value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    Text(String),
    /// A code of the library's vocabulary, or a command's or rule's name.
    Word(&'static str),
    Count(u64),
    /// A fence or a term (64 bits: a `bigint` in JavaScript).
    Fence(u64),
    /// A duration: the package gives it in its unit.
    Time(Duration),
    /// Absent (a field of the variant that has no value here).
    None,
}

/// The fields of `error`'s variant, besides `code`, the message and `lock` (which every error
/// has: [`Error::code`], its `Display`, [`Error::lock_name`]).
pub fn fields(error: &Error) -> Vec<(&'static str, Value)> {
    use Value::{Fence, Text, Time, Word};
    let text = |s: &str| Text(s.to_owned());
    match error {
        Error::InvalidArgument { reason, .. }
        | Error::Config { reason }
        | Error::RandomSource { reason, .. }
        | Error::Unsupported { reason, .. } => vec![("reason", text(reason))],
        Error::TimedOut { waited, .. } => vec![("waited", Time(*waited))],
        Error::Busy { remaining, .. } => {
            vec![("remaining", remaining.map_or(Value::None, Time))]
        }
        Error::NotHeld { reason, .. } => vec![("reason", Word(reason.code()))],
        Error::Unreachable { server, hint, .. } => {
            vec![
                ("server", text(server)),
                ("hint", hint.map_or(Value::None, Word)),
            ]
        }
        Error::NoQuorum {
            command,
            agreed,
            needed,
            total,
            ..
        } => vec![
            ("command", Word(command)),
            ("agreed", count(*agreed)),
            ("needed", count(*needed)),
            ("total", count(*total)),
        ],
        Error::Tls { server, .. } | Error::AuthFailed { server, .. } => {
            vec![("server", text(server))]
        }
        Error::NotReplicated {
            server,
            acknowledged,
            wanted,
            ..
        } => vec![
            ("server", text(server)),
            ("acknowledged", Value::Count(u64::from(*acknowledged))),
            ("wanted", Value::Count(u64::from(*wanted))),
        ],
        Error::PermissionDenied {
            server,
            command,
            rule,
            ..
        } => vec![
            ("server", text(server)),
            ("command", Word(command)),
            ("rule", Word(rule)),
        ],
        Error::Redis {
            server, command, ..
        } => vec![("server", text(server)), ("command", Word(command))],
        Error::WrongType { key, found, .. } => {
            vec![("key", text(key)), ("found", text(found))]
        }
        Error::Fenced {
            resource,
            fence,
            accepted,
        } => vec![
            ("resource", text(resource)),
            ("fence", Fence(*fence)),
            ("accepted", Fence(*accepted)),
        ],
        Error::FencedWrongType {
            resource,
            key,
            found,
        } => vec![
            ("resource", text(resource)),
            ("key", text(key)),
            ("found", text(found)),
        ],
        Error::NotLeader {
            election,
            term,
            current,
        } => vec![
            ("election", text(election)),
            ("term", Fence(*term)),
            ("current", current.map_or(Value::None, Fence)),
        ],
        Error::Conflict { conflict, .. } => vec![("conflict", Word(conflict.code()))],
        // The packages' own "client closed" error says so in its `reason`.
        Error::Closed { .. } => vec![("reason", Word("closed"))],
        _ => Vec::new(),
    }
}

fn count(n: usize) -> Value {
    Value::Count(u64::try_from(n).unwrap_or(u64::MAX))
}
