//! fencelock's Lua scripts as the engine runs them: how a script is composed from its `.lua`
//! files ([`lua!`]), how one call (script, keys, arguments) is encoded and sent, and the wake-up
//! payloads that release scripts publish and the release listener reads.
//!
//! Every script is the helpers of `prelude.lua` that it calls, with the wake-up payloads in
//! front, then the parts its module names: helpers of that kind (`value.lua`, `fields.lua`,
//! `queue.lua`, ...) and the script itself. A script is run by SHA and loaded again when the
//! server answers `NOSCRIPT`, so each operation stays one round trip.

pub(crate) mod reply;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Duration;

use redis::Script;
use smallvec::SmallVec;

/// The release message that lets exactly one waiter in (a plain lock, a reentrant lock's last
/// hold, a semaphore permit). Defined once for Rust and Lua (see [`lua!`]).
macro_rules! wake_one {
    () => {
        "one"
    };
}
/// The release message that wakes every waiter (a read-write lock, an operator's release).
macro_rules! wake_all {
    () => {
        "all"
    };
}
/// The prefix of a release message that wakes only the waiter whose request has the owner token
/// that follows (a fair lock's next holder).
macro_rules! wake_to {
    () => {
        "to:"
    };
}

pub(crate) use {wake_all, wake_one, wake_to};

/// See [`wake_one!`].
pub(crate) const WAKE_ONE: &str = wake_one!();
/// See [`wake_all!`]. The listener never needs to match it: every payload but the other two
/// wakes every waiter.
#[cfg(test)]
pub(crate) const WAKE_ALL: &str = wake_all!();
/// See [`wake_to!`].
pub(crate) const WAKE_TO: &str = wake_to!();

/// The line in front of every script that names its publish command; [`Lua`] swaps it for the
/// sharded variant that Redis Cluster runs.
const PUBLISH_PLAIN: &str = "local PUBLISH_COMMAND = 'publish'\n";
const PUBLISH_SHARDED: &str = "local PUBLISH_COMMAND = 'spublish'\n";

/// A script: its source (the prelude and its parts, as [`lua!`] composed them) and its SHA, in
/// two variants that differ only in how a release is published: `PUBLISH` for one server (and
/// Sentinel, Redlock), `SPUBLISH` for Redis Cluster (sharded pub/sub keeps the message in the
/// lock's slot instead of broadcasting it to every node).
pub(crate) struct Lua {
    plain: Variant,
    sharded: Variant,
    /// The same script for many calls at once (scripts composed by [`lua!`]).
    batch: Option<Arc<Batch>>,
}

/// One variant of a script.
pub(crate) struct Variant {
    pub(crate) script: Script,
    pub(crate) source: Cow<'static, str>,
}

impl Variant {
    fn new(source: Cow<'static, str>) -> Self {
        Variant {
            script: Script::new(&source),
            source,
        }
    }

    /// `EVALSHA <sha>`, or with `by_source` `EVAL <source>`: the head of a call of this script,
    /// with room for `args` more arguments of `bytes` bytes in all, so that writing them does not
    /// grow the command again and again.
    pub(crate) fn command(&self, by_source: bool, args: usize, bytes: usize) -> redis::Cmd {
        let (name, head) = if by_source {
            ("EVAL", self.source.as_ref())
        } else {
            ("EVALSHA", self.script.get_hash())
        };
        let mut c = redis::Cmd::with_capacity(2 + args, name.len() + head.len() + bytes);
        c.arg(name).arg(head);
        c
    }
}

/// A script's batch form: its body wrapped in a function of its own `KEYS` and `ARGV`, called
/// once per call by `batch.lua`; one reply per call. The connection sends calls that pile up
/// while one is on its way this way (`connection/coalesce.rs`).
pub(crate) struct Batch {
    plain: Variant,
    sharded: Variant,
}

impl Batch {
    /// The variant a server runs: sharded on Redis Cluster.
    pub(crate) fn variant(&self, sharded: bool) -> &Variant {
        if sharded { &self.sharded } else { &self.plain }
    }

    /// One run of the batch form, laid out as `batch.lua` reads it: `calls` calls of `keys` keys
    /// and `args` arguments each (`bytes` bytes of them in all), every call's keys written by
    /// `write_keys`, call after call, then every call's arguments by `write_args`. An `EVALSHA`,
    /// or with `by_source` an `EVAL` of the source.
    pub(crate) fn command(
        &self,
        sharded: bool,
        by_source: bool,
        (calls, keys, args): (usize, usize, usize),
        bytes: usize,
        write_keys: &impl Fn(&mut redis::Cmd),
        write_args: &impl Fn(&mut redis::Cmd),
    ) -> redis::Cmd {
        // The counts (a number takes at most 20 digits), then the keys and the arguments.
        let room = 4 + calls.saturating_mul(keys.saturating_add(args));
        let mut c = self
            .variant(sharded)
            .command(by_source, room, bytes.saturating_add(80));
        c.arg(calls.saturating_mul(keys));
        write_keys(&mut c);
        c.arg(calls).arg(keys).arg(args);
        write_args(&mut c);
        c
    }
}

/// The replies of a batch whose every call answered a whole number from -1 to 9, which
/// `batch.lua` sends as one string, a character per call (`'0'` + the number).
pub(crate) fn compact_replies(codes: &[u8]) -> impl Iterator<Item = redis::Value> + '_ {
    codes
        .iter()
        .map(|&code| redis::Value::Int(i64::from(code) - i64::from(b'0')))
}

impl Lua {
    pub(crate) fn new(source: impl Into<Cow<'static, str>>) -> Self {
        let source = source.into();
        let sharded = source.replacen(PUBLISH_PLAIN, PUBLISH_SHARDED, 1);
        Lua {
            plain: Variant::new(source),
            sharded: Variant::new(Cow::Owned(sharded)),
            batch: None,
        }
    }

    /// A script as [`lua!`] composes it: the publish command and the payloads, the helpers of
    /// the prelude that its parts use (see [`used_helpers`]), then its parts; with its batch
    /// form.
    ///
    /// In the batch form, the leading parts that only define helpers (see [`helpers_only`]) go
    /// in front of the per-call function with the prelude's, so that a batch makes their
    /// closures once, not once per call.
    ///
    /// A script whose body has a line [`LATER_HELPERS`] (at its top level, after a path that
    /// returns early) defines in front only the helpers that the text before that line uses;
    /// the other helpers it uses are defined at that line, so that a run that returns before it
    /// makes none of their closures. The batch form defines them all in front, as always.
    pub(crate) fn composed(payloads: &str, prelude: &str, parts: &[&str]) -> Self {
        let all = parts.concat();
        let hoisted = parts
            .iter()
            .take(parts.len().saturating_sub(1))
            .take_while(|part| helpers_only(part))
            .count();
        let (helpers, body) = parts.split_at(hoisted);
        let body = body.concat();
        let Some((before, after)) = body.split_once(LATER_HELPERS) else {
            let head = format!(
                "{payloads}{}{}",
                used_helpers(prelude, &all),
                helpers.concat()
            );
            return Lua::with_batch(&head, &body);
        };
        // The prelude's helpers and the kind's, one paragraph each, in that order (a kind's
        // helper may call the prelude's).
        let library = format!("{prelude}\n\n{}", helpers.join("\n\n"));
        let early = used_paragraphs(&library, before);
        let every = used_paragraphs(&library, &body);
        let late: Vec<&str> = every
            .iter()
            .copied()
            .filter(|p| !early.contains(p))
            .collect();
        let mut lua = Lua::new(format!(
            "{payloads}{}{before}{}{after}",
            joined(&early),
            joined(&late)
        ));
        lua.batch = Some(Lua::batch_form(
            &format!("{payloads}{}", joined(&every)),
            &format!("{before}{after}"),
        ));
        lua
    }

    /// A script (`head`: the publish command, the payloads and the helpers; `body`: the script
    /// itself) with its batch form.
    pub(crate) fn with_batch(head: &str, body: &str) -> Self {
        let mut lua = Lua::new(format!("{head}{body}"));
        lua.batch = Some(Lua::batch_form(head, body));
        lua
    }

    /// The batch form of the script `head` + `body`: the body as a function of its own `KEYS`
    /// and `ARGV`, called per call by `batch.lua`.
    fn batch_form(head: &str, body: &str) -> Arc<Batch> {
        let batch = format!(
            "{head}local function one(KEYS, ARGV)\n{body}\nend\n{}",
            include_str!("batch.lua")
        );
        let sharded = batch.replacen(PUBLISH_PLAIN, PUBLISH_SHARDED, 1);
        Arc::new(Batch {
            plain: Variant::new(Cow::Owned(batch)),
            sharded: Variant::new(Cow::Owned(sharded)),
        })
    }

    /// The variant a server runs: sharded on Redis Cluster.
    pub(crate) fn variant(&self, sharded: bool) -> &Variant {
        if sharded { &self.sharded } else { &self.plain }
    }

    /// The batch form, if the script has one.
    pub(crate) fn batch(&self) -> Option<&Arc<Batch>> {
        self.batch.as_ref()
    }

    /// The source as one server runs it.
    #[cfg(test)]
    pub(crate) fn source(&self) -> &str {
        &self.plain.source
    }
}

/// A script of this crate, composed at build time: its publish command, the wake-up payloads,
/// `prelude.lua`, then each file named, in order, relative to the module that names them.
/// `lua!("acquire.lua")`, or `lua!("value.lua", "acquire.lua")` for a script that needs a
/// helper of its kind.
macro_rules! lua {
    ($($file:literal),+ $(,)?) => {
        std::sync::LazyLock::new(|| {
            $crate::script::Lua::composed(
                concat!(
                    "local PUBLISH_COMMAND = 'publish'\n",
                    "local WAKE_ONE = '", $crate::script::wake_one!(), "'\n",
                    "local WAKE_ALL = '", $crate::script::wake_all!(), "'\n",
                    "local WAKE_TO = '", $crate::script::wake_to!(), "'\n",
                ),
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/script/prelude.lua")),
                &[$(include_str!($file)),+],
            )
        })
    };
}
pub(crate) use lua;

/// The helpers of `helpers` (the prelude) that `script` uses, directly or through another
/// helper, in their order: every script runs its whole text on each call, and each helper
/// defined is a closure made (and later collected) on every run, which callgrind counts at
/// about 700 instructions of the server's apiece. A helper is a paragraph (lines up to a blank
/// line, so a helper has no blank line inside) that defines names at its top level
/// (`local function NAME(` or `local NAME, ... =`); paragraphs that define nothing (comments)
/// are left out.
pub(crate) fn used_helpers(helpers: &str, script: &str) -> String {
    joined(&used_paragraphs(helpers, script))
}

/// Paragraphs as script text, each followed by a blank line.
fn joined(paragraphs: &[&str]) -> String {
    let mut text = String::new();
    for paragraph in paragraphs {
        text.push_str(paragraph.trim_matches('\n'));
        text.push_str("\n\n");
    }
    text
}

/// The line of a script's body after which the helpers that only the rest of the body uses are
/// defined (see [`Lua::composed`]).
pub(crate) const LATER_HELPERS: &str =
    "-- (the helpers the rest of the script uses are defined here)\n";

/// The paragraphs of `helpers` that `script` uses, directly or through another, in their order
/// (see [`used_helpers`]).
fn used_paragraphs<'h>(helpers: &'h str, script: &str) -> Vec<&'h str> {
    let blocks: Vec<(&str, Vec<&str>)> = helpers
        .split("\n\n")
        .map(|block| (block, defined_names(block)))
        .filter(|(_, names)| !names.is_empty())
        .collect();
    let mut used = vec![false; blocks.len()];
    let mut text = code_only(script);
    loop {
        let mut more = false;
        for (i, (block, names)) in blocks.iter().enumerate() {
            if !used[i] && names.iter().any(|name| mentions(&text, name)) {
                used[i] = true;
                text.push_str(&code_only(block));
                more = true;
            }
        }
        if !more {
            break;
        }
    }
    blocks
        .iter()
        .zip(used)
        .filter(|(_, used)| *used)
        .map(|((block, _), _)| *block)
        .collect()
}

/// Whether a part of a script only defines helpers: each of its paragraphs (the prelude's
/// convention: one helper a paragraph, no blank line inside) is one `local function` or one
/// constant table (`local NAME = {`, the name in capitals), ending with its `end` or `}`; and
/// nothing in it names `KEYS` or `ARGV` (a helper that did would read the whole batch's in the
/// batch form). Such a part can run once per batch rather than once per call.
fn helpers_only(part: &str) -> bool {
    let code = code_only(part);
    if code.contains("KEYS") || code.contains("ARGV") {
        return false;
    }
    code.split("\n\n")
        .map(str::trim)
        .filter(|paragraph| !paragraph.is_empty())
        .all(|paragraph| {
            let constant = paragraph.strip_prefix("local ").is_some_and(|rest| {
                rest.split_once('=').is_some_and(|(name, value)| {
                    let name = name.trim();
                    !name.is_empty()
                        && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                        && value.trim_start().starts_with('{')
                })
            });
            let last = paragraph.lines().last().map(str::trim).unwrap_or_default();
            (paragraph.starts_with("local function ") && last == "end")
                || (constant && last.ends_with('}'))
        })
}

/// Lua text without its comments (everything from `--` to the end of a line; no script of
/// this crate has `--` inside a string).
fn code_only(text: &str) -> String {
    let mut code = String::with_capacity(text.len());
    for line in text.lines() {
        code.push_str(line.split("--").next().unwrap_or_default());
        code.push('\n');
    }
    code
}

/// The names a helper paragraph defines at its top level.
fn defined_names(block: &str) -> Vec<&str> {
    let mut names = Vec::new();
    for line in block.lines() {
        let Some(rest) = line.strip_prefix("local ") else {
            continue;
        };
        if let Some(function) = rest.strip_prefix("function ") {
            names.extend(function.split('(').next().map(str::trim));
        } else {
            let list = rest.split('=').next().unwrap_or_default();
            names.extend(list.split(',').map(str::trim).filter(|n| !n.is_empty()));
        }
    }
    names
}

/// Whether `text` mentions `name` as a whole word.
fn mentions(text: &str, name: &str) -> bool {
    let word = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(name).any(|(at, _)| {
        !word(text[..at].chars().next_back()) && !word(text[at + name.len()..].chars().next())
    })
}

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
    fn only_parts_that_define_helpers_go_in_front_of_a_batchs_per_call_function() {
        assert!(helpers_only(include_str!("../kinds/plain/value.lua")));
        assert!(helpers_only(include_str!("../kinds/fair/queue.lua")));
        assert!(helpers_only(include_str!("../kinds/reentrant/fields.lua")));
        assert!(helpers_only(include_str!("../kinds/rwlock/scan.lua")));
        assert!(helpers_only(include_str!("../kinds/entries.lua")));
        // Per-call code, and helpers that read the call's keys, stay in the function.
        assert!(!helpers_only(include_str!("../fenced/check.lua")));
        assert!(!helpers_only(include_str!("../kinds/plain/acquire.lua")));
        assert!(!helpers_only("local function f()\n  return KEYS[1]\nend\n"));
        assert!(!helpers_only("local function f()\nend\nf()\n"));
        let lua = Lua::composed(
            "local PUBLISH_COMMAND = 'publish'\n",
            "",
            &[
                "local function helper()\n  return 1\nend\n",
                "return helper()\n",
            ],
        );
        let batch = &lua.batch().expect("a batch form").plain.source;
        let helper = batch.find("local function helper()").expect("the helper");
        let one = batch
            .find("local function one(KEYS, ARGV)")
            .expect("the function");
        assert!(helper < one, "{batch}");
    }

    #[test]
    fn helpers_only_the_rest_uses_are_defined_after_the_early_path() {
        let prelude = "local function early()\n  return 1\nend\n\nlocal function late()\n  return 2\nend\n\nlocal function unused()\n  return 3\nend\n";
        let kind = "local function kind_late()\n  return late()\nend\n";
        let body = format!("if early() then\n  return 0\nend\n{LATER_HELPERS}return kind_late()\n");
        let lua = Lua::composed(
            "local PUBLISH_COMMAND = 'publish'\n",
            prelude,
            &[kind, &body],
        );
        let at = |source: &str, what: &str| {
            source
                .find(what)
                .unwrap_or_else(|| panic!("{what} missing from:\n{source}"))
        };
        let single = lua.source();
        assert!(at(single, "local function early()") < at(single, "if early() then"));
        assert!(at(single, "if early() then") < at(single, "local function late()"));
        assert!(at(single, "local function late()") < at(single, "local function kind_late()"));
        assert!(at(single, "local function kind_late()") < at(single, "return kind_late()"));
        assert!(!single.contains("unused"), "{single}");
        // The batch form defines every helper once, in front of the per-call function.
        let batch = &lua.batch().expect("a batch form").plain.source;
        let one = at(batch, "local function one(KEYS, ARGV)");
        for helper in ["early()", "late()", "kind_late()"] {
            assert!(
                at(batch, &format!("local function {helper}")) < one,
                "{batch}"
            );
        }
        assert!(!batch.contains("unused"), "{batch}");
        // The plain lock's grant and release return before their later helpers.
        let acquire = crate::kinds::plain::ACQUIRE.source();
        assert!(at(acquire, "if not value then") < at(acquire, "local function fence_if_held("));
        let release = crate::kinds::plain::RELEASE.source();
        assert!(at(release, "redis.call('del', KEYS[1])") < at(release, "local function holds("));
    }

    #[test]
    fn a_script_carries_the_prelude_helpers_it_uses_and_no_others() {
        let prelude = include_str!("prelude.lua");
        // next_fence uses clock_micros and int; clock_micros uses clock_text, which uses
        // server_time: all five come along.
        let kept = used_helpers(prelude, "local f = next_fence(KEYS[2], 0)\nreturn f\n");
        for name in [
            "local function next_fence(",
            "local function clock_micros(",
            "local function server_time(",
            "local function int(",
            "local function clock_text(",
            "local clock\n",
            "local micros_text\n",
            "local micros\n",
        ] {
            assert!(kept.contains(name), "{name} missing from:\n{kept}");
        }
        for name in [
            "keep_for",
            "kind_of",
            "try_publish",
            "raise_fence",
            "now_ms",
        ] {
            assert!(
                !kept.contains(&format!("local function {name}(")),
                "{name} kept"
            );
        }
        // A name inside a longer word, or in a comment, is no use of it.
        let kept = used_helpers(prelude, "local publisher = 1 -- see next_fence\n");
        assert!(!kept.contains("local function publish("), "{kept}");
        assert!(!kept.contains("local function next_fence("), "{kept}");
        // Every script of the crate starts with the payloads and keeps its own text whole.
        let plain = &crate::kinds::plain::RELEASE;
        assert!(
            plain
                .source()
                .starts_with("local PUBLISH_COMMAND = 'publish'\n")
        );
        assert!(plain.source().contains("local function try_publish("));
        assert!(!plain.source().contains("local function keep_for("));
    }

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
