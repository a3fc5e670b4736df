//! A lock request as a package describes it: the kind, the name and the options, checked once
//! when the request is made and turned into the library's [`LockRequest`] at each acquisition.

use std::time::Duration;

use fencelock::{LockRequest, WaitPolicy};

/// The kinds a package names (`reentrant` is acquired through its handle).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Lock,
    Fair,
    Semaphore,
    Read,
    Write,
    Reentrant,
}

impl Kind {
    /// The kind a package names `name`: `lock`, `fair`, `semaphore`, `read`, `write` or
    /// `reentrant`.
    pub fn from_name(name: &str) -> Option<Kind> {
        Some(match name {
            "lock" => Kind::Lock,
            "fair" => Kind::Fair,
            "semaphore" => Kind::Semaphore,
            "read" => Kind::Read,
            "write" => Kind::Write,
            "reentrant" => Kind::Reentrant,
            _ => return None,
        })
    }
}

/// The options of a request, as durations (each package converts its unit).
#[derive(Clone, Debug)]
pub struct Options {
    /// A semaphore's permits.
    pub permits: u32,
    /// How many of them one holder takes.
    pub take: u32,
    pub ttl: Option<Duration>,
    /// `None`: as long as it takes; zero: not at all.
    pub wait: Option<Duration>,
    pub queue_timeout: Option<Duration>,
    pub max_hold: Option<Duration>,
    pub lock_delay: Option<Duration>,
    pub auto_renew: bool,
    /// Who holds it, for `inspect` to show (the library checks it when the request is
    /// acquired: at most `fencelock::MAX_LABEL_LEN` bytes, no control characters).
    pub label: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            permits: 1,
            take: 1,
            ttl: None,
            wait: None,
            queue_timeout: None,
            max_hold: None,
            lock_delay: None,
            auto_renew: true,
            label: None,
        }
    }
}

/// A checked lock request (see the module docs).
#[derive(Clone, Debug)]
pub struct Spec {
    kind: Kind,
    name: String,
    options: Options,
    wait: WaitPolicy,
}

impl Spec {
    /// The request for lock `name` of `kind` (as [`Kind::from_name`] reads it).
    ///
    /// Permits taken from a lock that has none (`take` other than 1 for another kind than a
    /// semaphore) are refused by the library, when the request is acquired.
    ///
    /// # Errors
    ///
    /// The reason, for an unknown kind (the caller's `InvalidArgument` for lock `name`).
    pub fn new(kind: &str, name: String, options: Options) -> Result<Spec, String> {
        let kind = Kind::from_name(kind).ok_or_else(|| format!("unknown lock kind {kind:?}"))?;
        Ok(Spec {
            kind,
            name,
            wait: WaitPolicy::from(options.wait),
            options,
        })
    }

    pub fn kind(&self) -> Kind {
        self.kind
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The lease (`None`: the library's default).
    pub fn ttl(&self) -> Option<Duration> {
        self.options.ttl
    }

    /// The library's request made from `client`; `None` for a reentrant lock, which is made by
    /// its handle ([`configure`](Self::configure) its `request()`).
    pub fn request(&self, client: &fencelock::Client) -> Option<LockRequest> {
        let name = self.name.clone();
        let request = match self.kind {
            Kind::Lock => client.lock(name),
            Kind::Fair => client.fair_lock(name),
            Kind::Semaphore => client.semaphore(name, self.options.permits),
            Kind::Read => client.read_write_lock(name).read(),
            Kind::Write => client.read_write_lock(name).write(),
            Kind::Reentrant => return None,
        };
        Some(self.configure(request))
    }

    /// `request` with this spec's options.
    pub fn configure(&self, request: LockRequest) -> LockRequest {
        let options = &self.options;
        let mut request = request.auto_renew(options.auto_renew);
        if options.take != 1 {
            // The library refuses it for a kind without permits.
            request = request.take(options.take);
        }
        if let Some(ttl) = options.ttl {
            request = request.ttl(ttl);
        }
        if let Some(timeout) = options.queue_timeout {
            request = request.queue_timeout(timeout);
        }
        if let Some(limit) = options.max_hold {
            request = request.max_hold(limit);
        }
        if let Some(delay) = options.lock_delay {
            request = request.lock_delay(delay);
        }
        if let Some(label) = &options.label {
            request = request.label(label.as_str());
        }
        request.wait(self.wait)
    }
}
