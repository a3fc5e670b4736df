//! Owner tokens: 128 bits from the operating system's CSPRNG, one per acquisition.

use std::fmt;

/// The random owner token of one acquisition. Only its holder can release or extend the lock.
///
/// Its `Debug` output shows only a short prefix, so that logs do not carry whole tokens.
///
/// Its 32 hex digits sit inline: making a token allocates nothing.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct OwnerToken([u8; 32]);

impl OwnerToken {
    /// A fresh token: 16 bytes from the OS CSPRNG, as 32 lowercase hex digits.
    pub(crate) fn generate() -> Result<Self, getrandom::Error> {
        let mut bytes = [0u8; 16];
        getrandom::fill(&mut bytes)?;
        let mut hex = [0u8; 32];
        for (pair, b) in hex.chunks_exact_mut(2).zip(bytes) {
            pair.copy_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 0x0f)]]);
        }
        Ok(OwnerToken(hex))
    }

    /// A handle's fresh token, or a stand-in and the OS's failure. A request that carries the
    /// failure refuses itself before anything is sent ([`crate::Error::RandomSource`]), so the
    /// stand-in never reaches Redis.
    pub(crate) fn for_handle() -> (Self, Option<getrandom::Error>) {
        match Self::generate() {
            Ok(token) => (token, None),
            Err(e) => (OwnerToken([b'-'; 32]), Some(e)),
        }
    }

    /// A fresh token for lock `name`, with the OS's failure as an error naming the lock.
    pub(crate) fn for_lock(name: &str) -> crate::error::Result<Self> {
        Self::generate().map_err(|e| crate::error::Error::RandomSource {
            lock: name.to_owned(),
            reason: e.to_string(),
        })
    }

    pub(crate) fn as_str(&self) -> &str {
        // Hex digits only: always UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "OwnerToken({}…)",
            self.as_str().get(..8).unwrap_or_default()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_128_bit_hex_and_distinct() {
        let a = OwnerToken::generate().unwrap();
        let b = OwnerToken::generate().unwrap();
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert!(!format!("{a:?}").contains(a.as_str()));
    }
}
