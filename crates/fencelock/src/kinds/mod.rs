//! The kinds of lock. Each is a module with its `.lua` files and a type implementing
//! [`Protocol`](crate::engine::Protocol), which is all the engine knows of it. Adding a kind is
//! one module here, its scripts, and a constructor on [`Client`](crate::Client).
//!
//! Lua helpers that only some kinds need sit here too: `entries.lua` (holder entries that each
//! carry a lease of their own, `<expiry ms>[:...]`) and `entry_extend.lua`, the extend script of
//! every kind that keeps such entries.

use std::sync::LazyLock;

use crate::script::{Lua, lua};

pub(crate) mod fair;
pub(crate) mod plain;
pub(crate) mod reentrant;
pub(crate) mod rwlock;
pub(crate) mod semaphore;

/// Re-arms one holder entry of a lock that keeps its holders in a hash (a semaphore permit, a
/// reader or the writer of a read-write lock).
pub(crate) static ENTRY_EXTEND: LazyLock<Lua> = lua!("entries.lua", "entry_extend.lua");

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::engine::{Attempt, FenceMemory, Hold, Protocol, ReleaseFence};
    use crate::keys::LockKeys;
    use crate::token::OwnerToken;

    /// One protocol of each kind, with the scripts it must run: acquire, release, extend.
    fn every_kind() -> Vec<(Arc<dyn Protocol>, [&'static Lua; 3])> {
        let owner = || OwnerToken::generate().unwrap();
        let memory = Arc::new(tokio::sync::Mutex::new(None::<FenceMemory>));
        let rw = |side| -> Arc<dyn Protocol> {
            Arc::new(rwlock::RwSide {
                side,
                owner: owner(),
            })
        };
        vec![
            (
                Arc::new(plain::Plain),
                [&*plain::ACQUIRE, &*plain::RELEASE, &*plain::EXTEND],
            ),
            (
                Arc::new(reentrant::Reentrant {
                    owner: owner(),
                    max_depth: 64,
                    memory,
                }),
                [
                    &*reentrant::ACQUIRE,
                    &*reentrant::RELEASE,
                    &*reentrant::EXTEND,
                ],
            ),
            (
                rw(rwlock::Side::Read),
                [&*rwlock::READ, &*rwlock::RELEASE, &*ENTRY_EXTEND],
            ),
            (
                rw(rwlock::Side::Write),
                [&*rwlock::WRITE, &*rwlock::RELEASE, &*ENTRY_EXTEND],
            ),
            (
                Arc::new(semaphore::Permit {
                    permits: 3,
                    take: 1,
                }),
                [&*semaphore::ACQUIRE, &*semaphore::RELEASE, &*ENTRY_EXTEND],
            ),
            (
                Arc::new(fair::Fair),
                [&*fair::ACQUIRE, &*fair::RELEASE, &*plain::EXTEND],
            ),
        ]
    }

    fn hold(protocol: Arc<dyn Protocol>) -> Hold {
        Hold {
            name: Arc::from("kinds"),
            protocol,
            keys: LockKeys::new("fencelock", "kinds"),
            token: OwnerToken::generate().unwrap(),
            linger: Duration::ZERO,
            marked: Default::default(),
            releasing: Default::default(),
            released_fence: Default::default(),
            holder_label: None,
        }
    }

    const ATTEMPT: Attempt = Attempt {
        ttl: Duration::from_secs(1),
        queue_timeout: Duration::from_secs(5),
        others_wait: true,
        waiting: true,
    };

    #[test]
    fn no_script_call_puts_its_keys_or_arguments_on_the_heap() {
        for (protocol, _) in every_kind() {
            let hold = hold(protocol);
            let label = hold.label();
            let ttl = Duration::from_secs(1);
            let mut calls = vec![
                hold.acquire_call(ATTEMPT),
                hold.release_call(ReleaseFence::Held(7)),
                hold.release_call(ReleaseFence::WriteBack(7)),
                hold.extend_call(ttl),
            ];
            calls.extend(hold.reassert_call(7, ttl));
            for call in calls {
                assert!(!call.keys.spilled(), "{label}: {} keys", call.keys.len());
                assert!(!call.args.spilled(), "{label}: {} args", call.args.len());
            }
        }
    }

    #[test]
    fn each_kind_runs_its_own_scripts() {
        let mut labels = Vec::new();
        for (protocol, [acquire, release, extend]) in every_kind() {
            let hold = hold(protocol);
            let label = hold.label();
            labels.push(label);
            let calls = [
                ("acquire", hold.acquire_call(ATTEMPT).lua, acquire),
                (
                    "release",
                    hold.release_call(ReleaseFence::Unknown).lua,
                    release,
                ),
                ("extend", hold.extend_call(ATTEMPT.ttl).lua, extend),
            ];
            for (op, runs, expected) in calls {
                assert!(
                    std::ptr::eq(runs, expected),
                    "{label}: {op} runs another script:\n{}",
                    runs.source()
                        .lines()
                        .find(|l| l.starts_with("-- "))
                        .unwrap_or("")
                );
            }
        }
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), 6, "every kind has its own label: {labels:?}");
    }

    #[test]
    fn every_script_has_the_wake_payloads_and_the_prelude_helpers_it_calls() {
        for (protocol, scripts) in every_kind() {
            for lua in scripts {
                let source = lua.source();
                assert!(
                    source
                        .starts_with("local PUBLISH_COMMAND = 'publish'\nlocal WAKE_ONE = 'one'\n"),
                    "{}",
                    protocol.label()
                );
                // Every prelude helper a script carries is called there (defined, and used at
                // least once more).
                for line in include_str!("../script/prelude.lua").lines() {
                    let Some(name) = line
                        .strip_prefix("local function ")
                        .and_then(|f| f.split('(').next())
                    else {
                        continue;
                    };
                    if source.contains(line) {
                        let uses = source.matches(&format!("{name}(")).count();
                        assert!(uses >= 2, "{}: {name} is never called", protocol.label());
                    }
                }
                assert!(
                    source.contains("local function server_time()")
                        || !source.contains("server_time(")
                );
            }
        }
    }

    #[test]
    fn only_the_plain_lock_reasserts() {
        for (protocol, _) in every_kind() {
            let hold = hold(protocol);
            let reasserts = hold.reassert_call(7, ATTEMPT.ttl).is_some();
            assert_eq!(reasserts, hold.label() == "lock", "{}", hold.label());
        }
    }
}
