//! Redis URLs as the tool shows them: `host:port`, never a password. The redaction itself is the
//! library's ([`fencelock::admin::redact_password`]), so that the two never disagree.

/// The server of a Redis URL as `host:port`, without credentials, or an error message (without
/// the password) if the URL does not parse.
pub fn server_of(url: &str) -> Result<String, String> {
    match redis::Client::open(url) {
        Ok(client) => Ok(client.get_connection_info().addr().to_string()),
        Err(err) => Err(redact(&err.to_string(), url)),
    }
}

/// `message` with the password of `url` (as written, and percent-decoded) replaced by `***`.
pub fn redact(message: &str, url: &str) -> String {
    fencelock::admin::redact_password(message, url)
}

#[cfg(test)]
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
    fn passwords_are_redacted_raw_and_decoded() {
        let url = "redis://user:p%40ss@h:1";
        assert_eq!(redact("a p%40ss b p@ss c", url), "a *** b *** c");
        assert_eq!(redact("nothing", "redis://h:1"), "nothing");
    }
}
