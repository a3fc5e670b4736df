//! The helper tree shaker: which of the prelude's helpers a script uses, directly or through
//! another helper, so that a script defines only those.

/// The helpers of `helpers` (the prelude) that `script` uses, directly or through another
/// helper, in their order: every script runs its whole text on each call, and each helper
/// defined is a closure made (and later collected) on every run, a cost the server pays per
/// helper (docs/BENCHMARKS.md counts it). A helper is a paragraph (lines up to a blank
/// line, so a helper has no blank line inside) that defines names at its top level
/// (`local function NAME(` or `local NAME, ... =`); paragraphs that define nothing (comments)
/// are left out.
pub(crate) fn used_helpers(helpers: &str, script: &str) -> String {
    joined(&used_paragraphs(helpers, script))
}

/// Paragraphs as script text, each followed by a blank line.
pub(super) fn joined(paragraphs: &[&str]) -> String {
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
pub(super) fn used_paragraphs<'h>(helpers: &'h str, script: &str) -> Vec<&'h str> {
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
pub(crate) fn helpers_only(part: &str) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
