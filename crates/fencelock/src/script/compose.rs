//! A script as the engine runs it: its source and SHA in two variants (`PUBLISH`, `SPUBLISH`),
//! its batch form, and [`lua!`], which composes it from its parts.

use std::borrow::Cow;
use std::sync::Arc;

use redis::Script;

use super::helpers::{LATER_HELPERS, helpers_only, joined, used_helpers, used_paragraphs};

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

    /// The source as one server runs it (not Redis Cluster: `PUBLISH`).
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
                    "local PASS_CLAIM_MS = ", $crate::script::pass_claim_ms!(), "\n",
                ),
                include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/script/prelude.lua")),
                &[$(include_str!($file)),+],
            )
        })
    };
}
pub(crate) use lua;

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
}
