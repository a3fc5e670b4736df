//! W6 contended: the runs (which kind, how many workers), the report rows of each, and the
//! lock handle each worker acquires through.

use fencelock::{Client, LockRequest, ReadWriteLock, ReentrantLock};

use super::book::Role;
use super::{CLIENTS, CROWD_PERMITS, MANY_WORKERS, PERMIT_WORKERS, READERS, WORKERS};
use crate::error::Result;

/// The contended runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Crowd {
    /// The plain lock, with this many workers.
    Plain(usize),
    Reentrant,
    Write,
    /// The fair lock, with this many workers.
    Fair(usize),
    Semaphore,
    ReadWrite,
}

impl Crowd {
    pub(super) const ALL: [Crowd; 8] = [
        Crowd::Plain(WORKERS),
        Crowd::Reentrant,
        Crowd::Write,
        Crowd::Fair(WORKERS),
        Crowd::Semaphore,
        Crowd::ReadWrite,
        Crowd::Plain(MANY_WORKERS),
        Crowd::Fair(MANY_WORKERS),
    ];

    /// Part of the run's lock name: distinct for every run.
    pub(super) fn slug(self) -> String {
        match self {
            Crowd::Plain(n) => format!("plain-{n}"),
            Crowd::Reentrant => "reentrant".into(),
            Crowd::Write => "write".into(),
            Crowd::Fair(n) => format!("fair-{n}"),
            Crowd::Semaphore => "semaphore".into(),
            Crowd::ReadWrite => "rw".into(),
        }
    }

    /// The rows of this run: the read-write run has two (the writer, the readers).
    pub(super) fn sides(self) -> Vec<Side> {
        let one = |kind: String, handoff| {
            vec![Side {
                kind,
                contenders: format!("{} workers on {CLIENTS} clients", self.workers()),
                workers: self.workers(),
                handoff,
            }]
        };
        let next = "a release → the next holder's grant";
        match self {
            Crowd::Plain(_) => one("plain".into(), next),
            Crowd::Reentrant => one("reentrant (each grant re-entered once)".into(), next),
            Crowd::Write => one("write (writers only)".into(), next),
            Crowd::Fair(_) => one("fair".into(), next),
            Crowd::Semaphore => one(
                format!("semaphore (N={CROWD_PERMITS})"),
                "a permit's release → the next grant",
            ),
            Crowd::ReadWrite => vec![
                Side {
                    kind: "read-write: the writer".into(),
                    contenders: format!("1 writer + {READERS} readers on {CLIENTS} clients"),
                    workers: 1,
                    handoff: "the last reader's release → the writer's grant",
                },
                Side {
                    kind: "read-write: readers".into(),
                    contenders: format!("{READERS} readers + 1 writer on {CLIENTS} clients"),
                    workers: READERS,
                    handoff: "the writer's release → the first reader's grant",
                },
            ],
        }
    }

    pub(super) fn workers(self) -> usize {
        match self {
            Crowd::Plain(n) | Crowd::Fair(n) => n,
            Crowd::Reentrant | Crowd::Write => WORKERS,
            Crowd::Semaphore => PERMIT_WORKERS,
            Crowd::ReadWrite => 1 + READERS,
        }
    }
}

/// One report row of a contended run.
pub(super) struct Side {
    pub(super) kind: String,
    pub(super) contenders: String,
    pub(super) workers: usize,
    pub(super) handoff: &'static str,
}

/// What a worker acquires.
pub(super) enum Handle {
    Plain(Client),
    /// Each grant is re-entered once inside the critical section.
    Reentrant(ReentrantLock),
    Write(ReadWriteLock),
    Read(ReadWriteLock),
    Fair(Client),
    Permit(Client, u32),
}

impl Handle {
    pub(super) fn new(crowd: Crowd, id: usize, client: &Client, name: &str) -> Result<Self> {
        Ok(match crowd {
            Crowd::Plain(_) => Handle::Plain(client.clone()),
            Crowd::Reentrant => Handle::Reentrant(client.reentrant_lock(name)),
            Crowd::Write => Handle::Write(client.read_write_lock(name)),
            Crowd::Fair(_) => Handle::Fair(client.clone()),
            Crowd::Semaphore => Handle::Permit(client.clone(), CROWD_PERMITS),
            Crowd::ReadWrite if id == 0 => Handle::Write(client.read_write_lock(name)),
            Crowd::ReadWrite => Handle::Read(client.read_write_lock(name)),
        })
    }

    pub(super) fn request(&self, name: &str) -> LockRequest {
        match self {
            Handle::Plain(client) => client.lock(name),
            Handle::Reentrant(lock) => lock.request(),
            Handle::Write(lock) => lock.write(),
            Handle::Read(lock) => lock.read(),
            Handle::Fair(client) => client.fair_lock(name),
            Handle::Permit(client, permits) => client.semaphore(name, *permits),
        }
    }

    pub(super) fn role(&self, crowd: Crowd) -> Role {
        match self {
            Handle::Write(_) if crowd == Crowd::ReadWrite => Role::Writer,
            Handle::Read(_) => Role::Reader,
            Handle::Permit(_, n) => Role::Permit(*n),
            _ => Role::Exclusive,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_crowd_has_its_own_name_and_the_many_worker_rows_say_so() {
        let slugs: std::collections::BTreeSet<String> =
            Crowd::ALL.iter().map(|c| c.slug()).collect();
        assert_eq!(slugs.len(), Crowd::ALL.len());
        for (crowd, kind) in [
            (Crowd::Plain(MANY_WORKERS), "plain"),
            (Crowd::Fair(MANY_WORKERS), "fair"),
        ] {
            assert!(Crowd::ALL.contains(&crowd));
            assert_eq!(crowd.workers(), MANY_WORKERS);
            let sides = crowd.sides();
            assert_eq!(sides.len(), 1);
            assert_eq!(sides[0].kind, kind);
            assert_eq!(sides[0].workers, MANY_WORKERS);
            assert_eq!(sides[0].contenders, "16 workers on 2 clients");
        }
        assert_eq!(
            Crowd::Plain(WORKERS).sides()[0].contenders,
            "4 workers on 2 clients"
        );
    }
}
