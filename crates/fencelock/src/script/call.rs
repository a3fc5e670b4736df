//! One call of a script: its keys and arguments, written as Redis gets them (at once, or into
//! one buffer for a batch).

use std::borrow::Cow;
use std::time::Duration;

use smallvec::SmallVec;

use super::{Lua, Variant};

/// One script call: the script, its keys and its arguments. Keys and arguments borrow from the
/// hold where they can, and sit inline (no script takes more than four of either), so that a
/// renewal batch of thousands of holds allocates nothing per hold but what goes into the
/// pipeline.
pub(crate) struct Call<'a> {
    pub(crate) lua: &'a Lua,
    pub(crate) keys: Keys<'a>,
    pub(crate) args: Args<'a>,
}

/// A script call's keys.
pub(crate) type Keys<'a> = SmallVec<[Cow<'a, str>; 4]>;
/// A script call's arguments.
pub(crate) type Args<'a> = SmallVec<[Arg<'a>; 4]>;

/// A call's keys, then its arguments, as they go to Redis: one buffer and where each ends.
pub(crate) struct Encoded {
    bytes: Vec<u8>,
    ends: SmallVec<[usize; 8]>,
    keys: usize,
}

impl Encoded {
    /// The bytes of the keys and arguments, all together.
    pub(crate) fn len(&self) -> usize {
        self.bytes.len()
    }

    fn parts(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| self.bytes.get(start..end).unwrap_or_default())
    }

    /// The keys.
    pub(crate) fn keys(&self) -> impl Iterator<Item = &[u8]> {
        self.parts().take(self.keys)
    }

    /// The arguments.
    pub(crate) fn args(&self) -> impl Iterator<Item = &[u8]> {
        self.parts().skip(self.keys)
    }
}

/// One argument of a script call.
pub(crate) enum Arg<'a> {
    Str(&'a str),
    Text(String),
    /// A binary argument (a fenced write's value).
    Bytes(&'a [u8]),
    Int(u64),
    /// A plain lock's value, `<token>:<fence>`, written out without an allocation.
    Value(&'a str, u64),
}

impl Arg<'_> {
    /// A lease (or any duration) as Redis wants it: whole milliseconds, at least one.
    pub(crate) fn millis(ttl: Duration) -> Arg<'static> {
        Arg::Int(lease_millis(ttl))
    }

    /// A duration in whole milliseconds where 0 means "none" (a request that takes no place in
    /// a queue).
    pub(crate) fn millis_or_zero(d: Duration) -> Arg<'static> {
        Arg::Int(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
    }
}

/// The lease as Redis wants it: whole milliseconds, at least one.
pub(crate) fn lease_millis(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl redis::ToRedisArgs for Arg<'_> {
    fn write_redis_args<W>(&self, out: &mut W)
    where
        W: ?Sized + redis::RedisWrite,
    {
        match self {
            Arg::Str(s) => s.write_redis_args(out),
            Arg::Text(s) => s.write_redis_args(out),
            Arg::Bytes(b) => b.write_redis_args(out),
            Arg::Int(n) => n.write_redis_args(out),
            Arg::Value(token, fence) => write_value(&mut out.writer_for_next_arg(), token, *fence),
        }
    }
}

/// Writes a plain lock's value, `<token>:<fence>` ([`Arg::Value`]), into one argument's bytes.
fn write_value(out: &mut impl std::io::Write, token: &str, fence: u64) {
    // Writing into a command's buffer or a Vec cannot fail.
    let _ = out.write_all(token.as_bytes());
    let _ = out.write_all(b":");
    let _ = out.write_all(itoa::Buffer::new().format(fence).as_bytes());
}

impl<'a> Call<'a> {
    /// A call of `lua` with borrowed keys.
    pub(crate) fn new(lua: &'a Lua, keys: &[&'a str], args: Args<'a>) -> Self {
        Call {
            lua,
            keys: keys.iter().map(|k| Cow::Borrowed(*k)).collect(),
            args,
        }
    }

    /// The `EVALSHA` (or, with `by_source`, `EVAL`) command of this call, in `variant`.
    pub(crate) fn command(&self, variant: &Variant, by_source: bool) -> redis::Cmd {
        // The key count (a number takes at most 20 digits), the keys and the arguments.
        let args = 1 + self.keys.len() + self.args.len();
        let mut command = variant.command(by_source, args, 20 + self.bytes());
        command.arg(self.keys.len());
        self.write_keys(&mut command);
        self.write_args(&mut command);
        command
    }

    /// About how many bytes the keys and arguments take (at most 20 for a number).
    pub(crate) fn bytes(&self) -> usize {
        self.keys.iter().map(|k| k.len()).sum::<usize>()
            + self
                .args
                .iter()
                .map(|a| match a {
                    Arg::Str(s) => s.len(),
                    Arg::Text(s) => s.len(),
                    Arg::Bytes(b) => b.len(),
                    Arg::Int(_) => 20,
                    Arg::Value(token, _) => token.len() + 21,
                })
                .sum::<usize>()
    }

    /// Writes the keys into `command`, one argument each.
    pub(crate) fn write_keys(&self, command: &mut redis::Cmd) {
        for key in &self.keys {
            command.arg(key.as_ref());
        }
    }

    /// Writes the arguments into `command`, one argument each.
    pub(crate) fn write_args(&self, command: &mut redis::Cmd) {
        for arg in &self.args {
            command.arg(arg);
        }
    }

    /// The call's keys and arguments as they go to Redis, in one buffer, for a call sent later
    /// in a batch.
    pub(crate) fn encode(&self) -> Encoded {
        let mut encoded = Encoded {
            bytes: Vec::with_capacity(128),
            ends: SmallVec::new(),
            keys: self.keys.len(),
        };
        for key in &self.keys {
            encoded.bytes.extend_from_slice(key.as_bytes());
            encoded.ends.push(encoded.bytes.len());
        }
        for arg in &self.args {
            match arg {
                Arg::Str(s) => encoded.bytes.extend_from_slice(s.as_bytes()),
                Arg::Text(s) => encoded.bytes.extend_from_slice(s.as_bytes()),
                Arg::Bytes(b) => encoded.bytes.extend_from_slice(b),
                // Writing into a Vec cannot fail.
                Arg::Int(n) => {
                    let mut digits = itoa::Buffer::new();
                    encoded
                        .bytes
                        .extend_from_slice(digits.format(*n).as_bytes());
                }
                Arg::Value(token, fence) => write_value(&mut encoded.bytes, token, *fence),
            }
            encoded.ends.push(encoded.bytes.len());
        }
        encoded
    }

    /// The key the call is routed by on Redis Cluster (every key of a lock is in its slot).
    pub(crate) fn routing_key(&self) -> &str {
        self.keys.first().map_or("", |k| k.as_ref())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_encoded_call_gives_back_its_keys_and_arguments_as_redis_gets_them() {
        let lua = Lua::new("return 1");
        let args: Args<'_> = [
            Arg::Str("token"),
            Arg::Int(1500),
            Arg::Text(String::new()),
            Arg::Text("x".into()),
            Arg::Value("f00d", 1_764_107_100_123_456),
        ]
        .into_iter()
        .collect();
        let call = Call::new(&lua, &["fencelock:{a}", "fencelock:{a}:fence"], args);
        let encoded = call.encode();
        let keys: Vec<&[u8]> = encoded.keys().collect();
        let args: Vec<&[u8]> = encoded.args().collect();
        let expected = [&b"token"[..], b"1500", b"", b"x", b"f00d:1764107100123456"];
        assert_eq!(keys, [&b"fencelock:{a}"[..], b"fencelock:{a}:fence"]);
        assert_eq!(args, expected);
        // Sent at once, the same arguments after the key count and the keys.
        let command = call.command(lua.variant(false), false);
        let sent: Vec<&[u8]> = command
            .args_iter()
            .skip(5)
            .filter_map(|a| match a {
                redis::Arg::Simple(bytes) => Some(bytes),
                _ => None,
            })
            .collect();
        assert_eq!(sent, expected);
        assert!(lua.batch().is_none());
        let composed = Lua::with_batch("local PUBLISH_COMMAND = 'publish'\n", "return 1\n");
        let batch = composed.batch().map(|b| b.variant(true).source.to_string());
        assert!(batch.is_some_and(
            |b| b.contains("local function one(KEYS, ARGV)") && b.contains("'spublish'")
        ));
    }
}
