//! Every script of the library by its file, as the library sends it: for the tests of the wire
//! format (docs/PROTOCOL.md), which run the scripts as another implementation would and check
//! the replies its tables give. Not part of the API.

use crate::script::Lua;

/// The source of the script whose own file is `file` (its path under `src/`, as
/// docs/PROTOCOL.md's tables name it: `kinds/plain/acquire.lua`, `once/fail.lua`), composed as
/// the library sends it to a server that is not a cluster (with the helpers it uses, and for
/// the fenced store's and run-once's scripts `fenced/check.lua` in front); `None` for a file
/// that is no script of the library's.
pub fn script_source(file: &str) -> Option<&'static str> {
    let lua: &'static Lua = match file {
        "kinds/plain/acquire.lua" => &crate::kinds::plain::ACQUIRE,
        "kinds/plain/release.lua" => &crate::kinds::plain::RELEASE,
        "kinds/plain/extend.lua" => &crate::kinds::plain::EXTEND,
        "kinds/plain/reassert.lua" => &crate::kinds::plain::REASSERT,
        "kinds/fair/acquire.lua" => &crate::kinds::fair::ACQUIRE,
        "kinds/fair/release.lua" => &crate::kinds::fair::RELEASE,
        "kinds/reentrant/acquire.lua" => &crate::kinds::reentrant::ACQUIRE,
        "kinds/reentrant/release.lua" => &crate::kinds::reentrant::RELEASE,
        "kinds/reentrant/extend.lua" => &crate::kinds::reentrant::EXTEND,
        "kinds/rwlock/read.lua" => &crate::kinds::rwlock::READ,
        "kinds/rwlock/write.lua" => &crate::kinds::rwlock::WRITE,
        "kinds/rwlock/release.lua" => &crate::kinds::rwlock::RELEASE,
        "kinds/semaphore/acquire.lua" => &crate::kinds::semaphore::ACQUIRE,
        "kinds/semaphore/release.lua" => &crate::kinds::semaphore::RELEASE,
        "kinds/semaphore/extend.lua" => &crate::kinds::semaphore::EXTEND,
        "kinds/entry_extend.lua" => &crate::kinds::ENTRY_EXTEND,
        "election/campaign.lua" => &crate::election::protocol::CAMPAIGN,
        "election/extend.lua" => &crate::election::protocol::EXTEND,
        "election/step_down.lua" => &crate::election::protocol::STEP_DOWN,
        "election/announce.lua" => &crate::election::ANNOUNCE,
        "election/leader.lua" => &crate::election::LEADER,
        "admin/inspect.lua" => &crate::admin::INSPECT,
        "admin/force_release.lua" => &crate::admin::FORCE_RELEASE,
        "fenced/write.lua" => &crate::fenced::WRITE,
        "fenced/set_one.lua" => &crate::fenced::SET_ONE,
        "fenced/clock.lua" => &crate::fenced::CLOCK,
        "once/begin.lua" => &crate::once::BEGIN,
        "once/record.lua" => &crate::once::guard::RECORD,
        "once/fail.lua" => &crate::once::guard::FAIL,
        "revoke/ask.lua" => &crate::revoke::ASK,
        "revoke/asked.lua" => &crate::revoke::ASKED,
        _ => return None,
    };
    Some(lua.source())
}

#[cfg(test)]
mod tests {
    use super::script_source;

    /// Every `.lua` file under `src/` that is a script of its own (not a part that only defines
    /// helpers, nor the prelude or the batch loop) is named, and its source is in the script.
    #[test]
    fn every_script_file_is_named() {
        let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
        let mut files = Vec::new();
        let mut dirs = vec![std::path::PathBuf::from(src)];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else if path.extension().is_some_and(|e| e == "lua") {
                    files.push(path);
                }
            }
        }
        let mut named = 0;
        for path in files {
            let rel = path
                .strip_prefix(src)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/");
            let text = std::fs::read_to_string(&path).unwrap();
            match script_source(&rel) {
                Some(source) => {
                    named += 1;
                    let body = text.lines().find(|l| !l.is_empty() && !l.starts_with("--"));
                    let body = body.unwrap_or_else(|| panic!("{rel} has no code"));
                    assert!(
                        source.contains(body),
                        "{rel}: {body:?} is not in its script"
                    );
                }
                None => assert!(
                    crate::script::helpers_only(&text)
                        || [
                            "script/prelude.lua",
                            "script/batch.lua",
                            "fenced/check.lua",
                            "fenced/caller.lua"
                        ]
                        .contains(&rel.as_str()),
                    "{rel} is a script that script_source does not name"
                ),
            }
        }
        assert_eq!(named, 31);
        assert_eq!(script_source("kinds/plain/nothing.lua"), None);
    }
}
