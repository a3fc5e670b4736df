//! ARCHITECTURE.md's map of the library is true: its module table lists every source file, and
//! imports point down the table, never up (a file imports only what is listed after its own row,
//! or within its own row).
//!
//! The check reads the sources: every `crate::` and `super::` path outside comments and test
//! modules (inline, or a module's `tests.rs`), resolved to the file that defines the item (through a module's re-exports).
//!
//! The command's files (`crates/fencelock-cli/src`) are read the same way: no two of them
//! import each other, directly or around a circle.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

/// The rows of ARCHITECTURE.md's library table, in order: `client/mod.rs`, `admin/`, ...
fn rows() -> Vec<String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ARCHITECTURE.md");
    let text = fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (the check needs the repository)", path.display()));
    let start = text
        .find("## The library, module by module")
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no library table"));
    let table = &text[start..];
    let end = table[3..].find("\n## ").map_or(table.len(), |e| e + 3);
    table[..end]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect()
}

/// Every `.rs` file under `dir`, relative to `src/`.
fn files(dir: &Path, out: &mut Vec<String>) {
    files_under(dir, &src(), out);
}

/// Every `.rs` file under `dir`, relative to `base`.
fn files_under(dir: &Path, base: &Path, out: &mut Vec<String>) {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files_under(&path, base, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(base).unwrap_or(&path);
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The row of a file: its own (`engine/acquire.rs`) or its folder's (`admin/`).
fn row_of(rows: &[String], file: &str) -> Option<usize> {
    rows.iter().position(|r| r == file).or_else(|| {
        rows.iter()
            .position(|r| r.ends_with('/') && file.starts_with(r.as_str()))
    })
}

/// The source without comments and without its `#[cfg(test)] mod tests`.
fn code(text: &str) -> String {
    let text = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    text.lines()
        .map(|l| match l.find("//") {
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module path of a file: `engine/acquire.rs` -> `engine::acquire`, `notify/mod.rs` ->
/// `notify`, `lib.rs` -> ``.
fn module_of(file: &str) -> Vec<String> {
    let stem = file.trim_end_matches(".rs");
    let mut parts: Vec<String> = stem.split('/').map(str::to_owned).collect();
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    parts
}

/// The file of a module path, if it is one: `engine::acquire` -> `engine/acquire.rs`; the
/// crate root is `lib.rs` (or a binary's `main.rs`).
fn file_of(module: &[String], all: &[String]) -> Option<String> {
    if module.is_empty() {
        let root = if all.iter().any(|f| f == "main.rs") {
            "main.rs"
        } else {
            "lib.rs"
        };
        return Some(root.to_owned());
    }
    let joined = module.join("/");
    [format!("{joined}.rs"), format!("{joined}/mod.rs")]
        .into_iter()
        .find(|f| all.contains(f))
}

/// The paths a file names with `crate::` or `super::`, each as segments from the crate root
/// (a `{...}` group expands to one path per name).
fn imports(file: &str, text: &str) -> Vec<Vec<String>> {
    let own = module_of(file);
    // `super::` of `engine/acquire.rs` (module `engine::acquire`) and of `notify/mod.rs`
    // (module `notify`) is the module's parent.
    let parent: Vec<String> = own
        .iter()
        .take(own.len().saturating_sub(1))
        .cloned()
        .collect();
    let mut found = Vec::new();
    let bytes = text.as_bytes();
    for (anchor, base) in [("crate::", Vec::new()), ("super::", parent)] {
        let mut from = 0;
        while let Some(at) = text[from..].find(anchor) {
            let start = from + at;
            from = start + anchor.len();
            if start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_') {
                continue;
            }
            let mut prefix = base.clone();
            expand(&text[from..], &mut prefix, &mut found);
        }
    }
    found
}

/// Expands the path at the start of `rest` (after `crate::`) into `out`.
fn expand(rest: &str, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    let ident: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    let after = &rest[ident.len()..];
    if !ident.is_empty() {
        prefix.push(ident);
        if let Some(more) = after.strip_prefix("::") {
            return expand(more, prefix, out);
        }
        out.push(prefix.clone());
        return;
    }
    if let Some(group) = after.strip_prefix('{') {
        let mut depth = 1;
        let mut end = 0;
        for (i, c) in group.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ => {}
            }
            if depth == 0 {
                end = i;
                break;
            }
        }
        let inner = &group[..end];
        let mut depth = 0;
        let mut part_start = 0;
        let mut parts = Vec::new();
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&inner[part_start..i]);
                    part_start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&inner[part_start..]);
        for part in parts {
            let part = part.trim();
            if part.is_empty() || part == "self" {
                continue;
            }
            let mut p = prefix.clone();
            expand(part, &mut p, out);
        }
    }
}

/// The file that defines what `path` names: the deepest module file on the path, and, where the
/// next segment is an item re-exported by that module (`pub(crate) use child::Item`), the child.
fn defining_file(path: &[String], all: &[String], sources: &BTreeMap<String, String>) -> String {
    let mut best = file_of(&[], all).unwrap_or_else(|| "lib.rs".to_owned());
    let mut depth = 0;
    for n in 1..=path.len() {
        if let Some(f) = file_of(&path[..n], all) {
            best = f;
            depth = n;
        }
    }
    // An item of a module file that is defined in one of its children (a re-export).
    if let (Some(item), Some(text)) = (path.get(depth), sources.get(&best)) {
        let module = &path[..depth];
        for line in text.lines() {
            let line = line.trim();
            if !(line.starts_with("pub") && line.contains(" use ")) {
                continue;
            }
            let Some(used) = line.split(" use ").nth(1) else {
                continue;
            };
            let child = used.split("::").next().unwrap_or_default();
            if mentions_word(used, item) {
                let mut child_path = module.to_vec();
                child_path.push(child.to_owned());
                if file_of(&child_path, all).is_some() {
                    child_path.push(item.clone());
                    return defining_file(&child_path, all, sources);
                }
            }
        }
    }
    best
}

/// Whether `text` names `word` as a whole identifier.
fn mentions_word(text: &str, word: &str) -> bool {
    let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
    text.match_indices(word).any(|(at, _)| {
        !ident(text[..at].chars().next_back()) && !ident(text[at + word.len()..].chars().next())
    })
}

/// The child modules a module file declares (`mod name;`), and the paths it names through them
/// (`name::Item`), as paths from the crate root.
fn child_imports(file: &str, text: &str) -> Vec<Vec<String>> {
    let own = module_of(file);
    let children: Vec<String> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let l = l.strip_prefix("pub(crate) ").unwrap_or(l);
            let l = l.strip_prefix("pub ").unwrap_or(l);
            l.strip_prefix("mod ")?.strip_suffix(';').map(str::to_owned)
        })
        .collect();
    let mut found = Vec::new();
    for child in children {
        let anchor = format!("{child}::");
        for (at, _) in text.match_indices(&anchor) {
            let before = text[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut prefix = own.clone();
            expand(&text[at..], &mut prefix, &mut found);
        }
    }
    found
}

/// The paths a file imports: `crate::` and `super::` paths, and a module file's own uses of its
/// children (not its `pub use` re-exports, which only pass an item on).
fn paths_of(file: &str, text: &str) -> Vec<Vec<String>> {
    let code = code(text);
    let mut paths = imports(file, &code);
    let uses: String = code
        .lines()
        .filter(|l| !(l.trim_start().starts_with("pub") && l.contains(" use ")))
        .collect::<Vec<_>>()
        .join("\n");
    paths.extend(child_imports(file, &uses));
    paths
}

/// The import circles among the files under `base` (a crate's `src`): each as the files around
/// it. A file's use of its own module's `mod.rs` (where a module keeps what its files share) is
/// not an edge.
fn circles(base: &Path) -> Vec<String> {
    let mut all = Vec::new();
    files_under(base, base, &mut all);
    let sources: BTreeMap<String, String> = all
        .iter()
        .map(|f| {
            let text = fs::read_to_string(base.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            (f.clone(), text)
        })
        .collect();
    let mut edges: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for (file, text) in &sources {
        let parent = module_of(file)
            .split_last()
            .and_then(|(_, parent)| file_of(parent, &all));
        for path in paths_of(file, text) {
            let target = defining_file(&path, &all, &sources);
            let own_parent =
                parent.as_deref() == Some(target.as_str()) && !file.ends_with("mod.rs");
            if target != *file && !own_parent {
                edges.entry(file.as_str()).or_default().push(target);
            }
        }
    }
    // Depth first: an edge back to a file on the current path closes a circle.
    fn visit<'a>(
        file: &'a str,
        edges: &'a BTreeMap<&str, Vec<String>>,
        path: &mut Vec<&'a str>,
        done: &mut Vec<&'a str>,
        found: &mut Vec<String>,
    ) {
        if done.contains(&file) {
            return;
        }
        if let Some(at) = path.iter().position(|f| *f == file) {
            let mut circle: Vec<&str> = path[at..].to_vec();
            circle.push(file);
            found.push(circle.join(" -> "));
            return;
        }
        path.push(file);
        for next in edges.get(file).into_iter().flatten() {
            visit(next, edges, path, done, found);
        }
        path.pop();
        done.push(file);
    }
    let mut found = Vec::new();
    let mut done = Vec::new();
    for file in &all {
        visit(file, &edges, &mut Vec::new(), &mut done, &mut found);
    }
    found
}

#[test]
fn the_commands_files_import_in_no_circle() {
    let cli = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fencelock-cli/src");
    let mut all = Vec::new();
    files_under(&cli, &cli, &mut all);
    assert!(all.len() > 20, "too few files read: {all:?}");
    let circles = circles(&cli);
    assert!(
        circles.is_empty(),
        "import circles among the command's files:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_module_table_lists_every_file_and_imports_point_down_it() {
    let rows = rows();
    assert!(rows.len() > 20, "too few rows read: {rows:?}");
    let mut all = Vec::new();
    files(&src(), &mut all);
    let sources: BTreeMap<String, String> = all
        .iter()
        .map(|f| {
            let text = fs::read_to_string(src().join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
            (f.clone(), text)
        })
        .collect();

    let unlisted: Vec<&String> = all.iter().filter(|f| row_of(&rows, f).is_none()).collect();
    assert!(
        unlisted.is_empty(),
        "files ARCHITECTURE.md does not list: {unlisted:?}"
    );

    let mut upward = Vec::new();
    for (file, text) in &sources {
        let Some(own) = row_of(&rows, file) else {
            continue;
        };
        // A module's tests in a file of their own (`tests.rs`) are read as inline ones are:
        // not at all (a test may build what it needs from anywhere).
        if file == "tests.rs" || file.ends_with("/tests.rs") {
            continue;
        }
        for path in paths_of(file, text) {
            let target = defining_file(&path, &all, &sources);
            let Some(theirs) = row_of(&rows, &target) else {
                continue;
            };
            // A file may use its own module's `mod.rs` (where the module keeps what its files
            // share); everything else points down the table.
            let parent = module_of(file)
                .split_last()
                .and_then(|(_, parent)| file_of(parent, &all));
            let own_parent =
                parent.as_deref() == Some(target.as_str()) && !file.ends_with("mod.rs");
            if theirs < own && target != "lib.rs" && !own_parent {
                upward.push(format!(
                    "{file} (row {own}) imports {} from {target} (row {theirs})",
                    path.join("::")
                ));
            }
        }
    }
    upward.sort();
    upward.dedup();
    assert!(
        upward.is_empty(),
        "imports that point up ARCHITECTURE.md's table:\n{}",
        upward.join("\n")
    );
}
