//! Redis URLs as the tool shows them: `host:port`, never a password.

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
    let mut message = message.to_owned();
    let mut secrets = Vec::new();
    if let Some(raw) = raw_password(url) {
        secrets.push(raw.to_owned());
    }
    if let Ok(client) = redis::Client::open(url)
        && let Some(decoded) = client.get_connection_info().redis_settings().password()
    {
        secrets.push(decoded.to_owned());
    }
    for secret in secrets.iter().filter(|s| !s.is_empty()) {
        message = message.replace(secret.as_str(), "***");
    }
    message
}

/// The password part of `scheme://user:password@host...`, if any.
fn raw_password(url: &str) -> Option<&str> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let userinfo = authority.rsplit_once('@')?.0;
    Some(userinfo.split_once(':')?.1)
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
        assert_eq!(raw_password("redis://:pw@h:1/0"), Some("pw"));
        assert_eq!(raw_password("redis://h:1/a:b@c"), None);
    }
}
