//! Redis URLs as fencelock shows them: `host:port`, never a password. One redaction for the
//! library and the `fencelock` command.

/// `message` with the password of `url` replaced by `***`: as written in the URL, and
/// percent-decoded (`p%40ss` is the password `p@ss`), wherever either appears.
///
/// ```
/// let url = "redis://app:p%40ss@cache.internal:6379";
/// assert_eq!(
///     fencelock::admin::redact_password("bad URL redis://app:p%40ss@... (p@ss)", url),
///     "bad URL redis://app:***@... (***)"
/// );
/// ```
pub fn redact_password(message: &str, url: &str) -> String {
    let mut message = message.to_owned();
    let mut secrets = Vec::new();
    if let Some(raw) = raw_password(url) {
        secrets.push(raw.to_owned());
        if let Some(decoded) = percent_decode(raw) {
            secrets.push(decoded);
        }
    }
    if let Ok(client) = redis::Client::open(url)
        && let Some(decoded) = client.get_connection_info().redis_settings().password()
    {
        secrets.push(decoded.to_owned());
    }
    // The longest first, so that a secret that contains another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        message = message.replace(secret.as_str(), "***");
    }
    message
}

/// The password part of `scheme://user:password@host...`, if any. The userinfo ends at the
/// last `@` of the authority (a password may contain `@` unescaped).
fn raw_password(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let userinfo = authority.rsplit_once('@')?.0;
    Some(userinfo.split_once(':')?.1)
}

/// `%XX` escapes decoded, if that gives valid UTF-8 different from the input.
fn percent_decode(raw: &str) -> Option<String> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(out).ok().filter(|decoded| decoded != raw)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_raw_and_decoded() {
        let url = "redis://user:p%40ss@h:1";
        assert_eq!(redact_password("a p%40ss b p@ss c", url), "a *** b *** c");
        assert_eq!(redact_password("nothing", "redis://h:1"), "nothing");
        assert_eq!(raw_password("redis://:pw@h:1/0"), Some("pw"));
        assert_eq!(raw_password("redis://h:1/a:b@c"), None);
    }

    #[test]
    fn a_password_with_an_at_sign_is_found_whole() {
        // Split on the first `@`, the password would be "p" and "ss" would leak.
        let url = "redis://user:p@ss@h:1";
        assert_eq!(raw_password(url), Some("p@ss"));
        assert_eq!(redact_password("x p@ss y", url), "x *** y");
    }
}
