//! The renderings pinned on a small fixed report (`testdata/report.json`): the markdown, the
//! JSON and the chart must stay as they are, byte for byte. After a deliberate change of a
//! rendering, run the tests with `FENCELOCK_BENCH_BLESS=1` to write the expected files anew.

use std::path::PathBuf;

use super::model::Report;

fn testdata(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("src/report/testdata")
        .join(name)
}

fn report() -> Report {
    let text = std::fs::read_to_string(testdata("report.json")).unwrap();
    Report::from_json(&text).unwrap()
}

fn assert_pinned(name: &str, actual: &str) {
    let path = testdata(name);
    if std::env::var_os("FENCELOCK_BENCH_BLESS").is_some() {
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (FENCELOCK_BENCH_BLESS=1 writes it)",
            path.display()
        )
    });
    assert!(
        actual == expected,
        "{name} differs from the pinned output:\n--- actual\n{actual}\n--- expected\n{expected}"
    );
}

#[test]
fn markdown_is_pinned() {
    assert_pinned("report.md", &report().to_markdown());
}

#[test]
fn json_is_pinned() {
    assert_pinned("report.out.json", &report().to_json().unwrap());
}

#[test]
fn svg_is_pinned() {
    assert_pinned("report.svg", &report().to_svg());
}
