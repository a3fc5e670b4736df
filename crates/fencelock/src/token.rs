//! Owner tokens: 128 bits from the operating system's CSPRNG, one per acquisition.

use std::fmt;
use std::sync::{Mutex, PoisonError};

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
        let mut bytes = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes)?;
        Ok(Self::of(bytes))
    }

    /// The token of 16 random bytes, as 32 lowercase hex digits.
    fn of(bytes: [u8; TOKEN_BYTES]) -> Self {
        let mut hex = [0u8; 32];
        for (pair, b) in hex.chunks_exact_mut(2).zip(bytes) {
            pair.copy_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 0x0f)]]);
        }
        OwnerToken(hex)
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

    pub(crate) fn as_str(&self) -> &str {
        // Hex digits only: always UTF-8.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

const HEX: &[u8; 16] = b"0123456789abcdef";
/// The random bytes of a token.
const TOKEN_BYTES: usize = 16;
/// How many random bytes a [`Tokens`] fetches at a time: 256 tokens.
const POOL_BYTES: usize = 4096;

/// A client's source of owner tokens: bytes from the OS CSPRNG, fetched 4 KiB at a time, so
/// that an acquisition makes no system call for its token (a `getrandom` per acquisition was as
/// many system calls as all the others of an uncontended cycle's client, under `strace -c`).
/// Each token's bytes are erased from the pool as it takes them. The pool belongs to one client,
/// which is not used across a `fork` (the client's runtime threads are not in the child, and the
/// Python package refuses a parent's objects in a child), so no two processes draw the same
/// bytes.
pub(crate) struct Tokens {
    pool: Mutex<Pool>,
}

struct Pool {
    bytes: Box<[u8; POOL_BYTES]>,
    /// Where the next token's bytes begin; `POOL_BYTES` when the pool is used up.
    next: usize,
}

impl Default for Tokens {
    fn default() -> Self {
        Tokens {
            pool: Mutex::new(Pool {
                bytes: Box::new([0; POOL_BYTES]),
                next: POOL_BYTES,
            }),
        }
    }
}

impl Tokens {
    /// A fresh token, from the pool (filled again from the OS CSPRNG when it is used up).
    pub(crate) fn generate(&self) -> Result<OwnerToken, getrandom::Error> {
        let mut pool = self.pool.lock().unwrap_or_else(PoisonError::into_inner);
        let Pool { bytes, next } = &mut *pool;
        if next.saturating_add(TOKEN_BYTES) > POOL_BYTES {
            getrandom::fill(&mut bytes[..])?;
            *next = 0;
        }
        let mut token = [0u8; TOKEN_BYTES];
        let end = next.saturating_add(TOKEN_BYTES);
        if let Some(taken) = bytes.get_mut(*next..end) {
            token.copy_from_slice(taken);
            taken.fill(0);
        }
        *next = end;
        Ok(OwnerToken::of(token))
    }

    /// A fresh token for lock `name`, with the OS's failure as an error naming the lock.
    pub(crate) fn for_lock(&self, name: &str) -> crate::error::Result<OwnerToken> {
        self.generate()
            .map_err(|e| crate::error::Error::RandomSource {
                lock: name.to_owned(),
                reason: e.to_string(),
            })
    }
}

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

    #[test]
    fn a_pool_hands_out_distinct_tokens_across_refills_and_erases_what_it_gave() {
        let tokens = Tokens::default();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..(POOL_BYTES / TOKEN_BYTES) * 3 + 7 {
            let token = tokens.generate().unwrap();
            assert!(token.as_str().bytes().all(|c| c.is_ascii_hexdigit()));
            assert!(seen.insert(token.as_str().to_owned()), "a token twice");
        }
        let pool = tokens.pool.lock().unwrap();
        assert_eq!(pool.next, 7 * TOKEN_BYTES);
        assert!(pool.bytes[..pool.next].iter().all(|b| *b == 0));
        assert!(pool.bytes[pool.next..].iter().any(|b| *b != 0));
    }
}
