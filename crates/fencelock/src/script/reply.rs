//! Reading script replies: the shared reply codes and the values inside them.
//!
//! Every acquire script answers the fence alone, an integer or its decimal digits (granted: the
//! commonest reply is one value for the server to write and the client to parse; see
//! [`is_grant`]), `{0, ms}` (held; how long until what is in the way lapses, -1 for a key without expiry), `{-1, key, type}` (a key holds something
//! that is not a fencelock lock; nothing was written) or `{-2, what, detail}` (the request
//! conflicts with the lock's state; nothing was written). See ARCHITECTURE.md for the codes of
//! each script.

use redis::{RedisError, Value};

/// The reply code of "held by another owner".
pub(crate) const HELD: i64 = 0;
/// The reply code of "a key holds something that is not ours".
pub(crate) const FOREIGN: i64 = -1;
/// The reply code of a conflict with the lock's state.
pub(crate) const CONFLICT: i64 = -2;
/// A release script's reply: released, but the server refused the wake-up message.
pub(crate) const RELEASED_UNTOLD: i64 = 2;

/// A Redis type name (or a script's description of a value) for messages.
pub(crate) fn describe_type(found: &str) -> String {
    match found {
        "string" | "list" | "set" | "zset" | "hash" | "stream" => format!("a {found}"),
        other => other.to_owned(),
    }
}

/// Whether an acquire script's reply is a grant: the fence alone, not a table.
pub(crate) fn is_grant(value: &Value) -> bool {
    matches!(value, Value::Int(_) | Value::BulkString(_))
}

/// A non-negative integer (a fence): an integer reply, or its decimal digits (a script that
/// has the number only as text sends the text rather than convert it).
pub(crate) fn as_u64(value: &Value) -> redis::RedisResult<u64> {
    let fence = match value {
        Value::Int(n) => u64::try_from(*n).ok(),
        Value::BulkString(digits) if digits.iter().all(u8::is_ascii_digit) => {
            std::str::from_utf8(digits)
                .ok()
                .and_then(|d| d.parse().ok())
        }
        _ => None,
    };
    fence.ok_or_else(|| unexpected_value("a fence", value))
}

/// A string (lossily decoded).
pub(crate) fn as_string(value: &Value) -> redis::RedisResult<String> {
    match value {
        Value::BulkString(bytes) => Ok(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Ok(s.clone()),
        _ => Err(unexpected_value("a string", value)),
    }
}

/// The error for a reply that no fencelock script gives.
pub(crate) fn unexpected(script: &str, reply: &[Value]) -> RedisError {
    RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected reply from fencelock script",
        format!("{script}: {reply:?}"),
    ))
}

fn unexpected_value(what: &str, value: &Value) -> RedisError {
    RedisError::from((
        redis::ErrorKind::UnexpectedReturnType,
        "unexpected value in fencelock script reply",
        format!("expected {what}, got {value:?}"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_is_an_integer_or_its_decimal_digits_and_nothing_else() {
        let digits = |s: &str| Value::BulkString(s.as_bytes().to_vec());
        assert_eq!(as_u64(&Value::Int(42)).unwrap(), 42);
        assert_eq!(
            as_u64(&digits("1764107100123456")).unwrap(),
            1_764_107_100_123_456
        );
        for bad in [
            Value::Int(-1),
            digits(""),
            digits("-1"),
            digits("+1"),
            digits("1e5"),
            digits(" 1"),
            digits("99999999999999999999"),
            Value::Nil,
        ] {
            assert!(as_u64(&bad).is_err(), "{bad:?}");
        }
    }
}
