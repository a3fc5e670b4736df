//! Just enough JSON for `--json` output: strings, numbers, null, flat objects and arrays.

use std::fmt::Write;

/// `text` as a JSON string.
pub fn string(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// JSON `null`.
pub fn null() -> String {
    "null".to_owned()
}

/// A number, or `null`.
pub fn number(n: Option<u64>) -> String {
    n.map_or_else(null, |n| n.to_string())
}

/// An array of strings.
pub fn strings(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|s| string(s)).collect();
    format!("[{}]", items.join(","))
}

/// An object from `(key, JSON value)` pairs, in the given order.
pub fn object(fields: &[(&str, String)]) -> String {
    let fields: Vec<String> = fields
        .iter()
        .map(|(key, value)| format!("{}:{value}", string(key)))
        .collect();
    format!("{{{}}}", fields.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped() {
        assert_eq!(string("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
        assert_eq!(string("é/ü"), "\"é/ü\"");
    }

    #[test]
    fn objects_keep_their_order() {
        assert_eq!(
            object(&[("b", number(Some(1))), ("a", null())]),
            "{\"b\":1,\"a\":null}"
        );
        assert_eq!(strings(&["x".into()]), "[\"x\"]");
    }
}
