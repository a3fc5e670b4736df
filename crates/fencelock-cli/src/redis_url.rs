//! Redis URLs as the tool shows them: `host:port`, never a password. The redaction itself is the
//! library's ([`fencelock::admin::redact_password`]), so that the two never disagree.

/// The URL schemes a server can be named with.
const SCHEMES: [&str; 7] = [
    "redis",
    "rediss",
    "unix",
    "redis+unix",
    "valkey",
    "valkeys",
    "valkey+unix",
];

/// What a Redis URL looks like, for messages.
const EXPECTED: &str = "expected redis://HOST:PORT (or rediss://, unix://)";

/// The server of a Redis URL as `host:port`, without credentials, or an error message (without
/// the password) if the URL does not parse: one that names the URL, redacted, and says what a
/// Redis URL looks like (`127.0.0.1:6379` lacks its `redis://`).
pub fn server_of(url: &str) -> Result<String, String> {
    let known = url
        .split_once("://")
        .is_some_and(|(scheme, _)| SCHEMES.contains(&scheme.to_ascii_lowercase().as_str()));
    if !known {
        return Err(format!("{:?} is not a Redis URL: {EXPECTED}", shown(url)));
    }
    match redis::Client::open(url) {
        Ok(client) => Ok(client.get_connection_info().addr().to_string()),
        Err(err) => Err(format!(
            "{:?} does not parse ({}): {EXPECTED}",
            shown(url),
            redact(&err.to_string(), url)
        )),
    }
}

/// `url` with its password, if any, as `***`; also in a URL written without its scheme
/// (`user:secret@host:6379`).
fn shown(url: &str) -> String {
    let shown = redact(url, url);
    if url.contains("://") {
        shown
    } else {
        redact(&shown, &format!("redis://{url}"))
    }
}

/// `message` with the password of `url` (as written, and percent-decoded) replaced by `***`.
pub fn redact(message: &str, url: &str) -> String {
    fencelock::admin::redact_password(message, url)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // a test fails by panicking
mod tests {
    use super::*;

    #[test]
    fn the_server_is_shown_without_credentials() {
        assert_eq!(
            server_of("redis://user:s3cret@example.com:6380/2").as_deref(),
            Ok("example.com:6380")
        );
        assert_eq!(
            server_of("redis://127.0.0.1").as_deref(),
            Ok("127.0.0.1:6379")
        );
    }

    #[test]
    fn a_url_without_its_scheme_says_what_a_redis_url_looks_like() {
        let err = server_of("127.0.0.1:6379").unwrap_err();
        assert_eq!(
            err,
            "\"127.0.0.1:6379\" is not a Redis URL: expected redis://HOST:PORT (or rediss://, \
             unix://)"
        );
        for url in ["localhost:6379", "http://h:1", "cache.internal"] {
            let err = server_of(url).unwrap_err();
            assert!(
                err.contains(url) && err.contains("expected redis://"),
                "{err}"
            );
        }
        for url in ["rediss://h:1", "REDIS://h:1", "unix:///tmp/redis.sock"] {
            assert!(server_of(url).is_ok(), "{url}");
        }
    }

    #[test]
    fn a_bad_url_is_named_without_its_password() {
        for url in [
            "user:s3cret@h:6379",
            "redis://user:s3cret@h:notaport",
            "http://user:s3cret@h:1",
        ] {
            let err = server_of(url).unwrap_err();
            assert!(
                !err.contains("s3cret") && err.contains("***") && err.contains("expected"),
                "{url}: {err}"
            );
        }
    }

    #[test]
    fn passwords_are_redacted_raw_and_decoded() {
        let url = "redis://user:p%40ss@h:1";
        assert_eq!(redact("a p%40ss b p@ss c", url), "a *** b *** c");
        assert_eq!(redact("nothing", "redis://h:1"), "nothing");
    }
}
