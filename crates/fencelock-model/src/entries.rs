//! What the models of the locks that keep their holders and waiters as entries of a hash, each
//! with a lease of its own (the semaphore, the read-write lock), share: a client's phase, its
//! steps, and the renewal (`kinds/entry_extend.lua`) and release of its entry.

/// What a client believes and does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryPhase {
    /// Holds nothing, waits for nothing.
    Idle,
    /// Waits with `token`; tries again at step `wake`.
    Waiting { token: u8, wake: u8 },
    /// Believes it holds until `deadline` (with the fence it was answered).
    Holding { token: u8, fence: u32, deadline: u8 },
    /// Crashed.
    Dead,
}

/// One step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EntryAction {
    /// Client `i` runs the kind's acquire script (a new request, or a waiter's try).
    Acquire(u8),
    /// Client `i` renews its entry (`entry_extend.lua`).
    Renew(u8),
    /// Client `i` runs the kind's release script.
    Release(u8),
    /// Client `i` crashes.
    Crash(u8),
    /// One time step passes.
    Tick,
}

/// An entry of the hash with a lease of its own.
pub trait Leased {
    /// Its token.
    fn token(&self) -> u8;
    /// The step at which its lease ends.
    fn expires(&mut self) -> &mut u8;
}

/// The steps the clients in `phases` may take at `now`: the idle and the waiting try, the
/// holders renew or release, any may crash while `crash` allows; time passes until `max_time`,
/// but not while a waiter is due to try.
pub fn actions(phases: &[EntryPhase], crash: bool, now: u8, max_time: u8) -> Vec<EntryAction> {
    let mut actions = Vec::new();
    let mut due = false;
    for (i, phase) in phases.iter().enumerate() {
        let i = u8::try_from(i).unwrap_or(u8::MAX);
        match *phase {
            EntryPhase::Idle => actions.push(EntryAction::Acquire(i)),
            EntryPhase::Waiting { wake, .. } => {
                actions.push(EntryAction::Acquire(i));
                due |= wake <= now;
            }
            EntryPhase::Holding { .. } => {
                actions.push(EntryAction::Renew(i));
                actions.push(EntryAction::Release(i));
            }
            EntryPhase::Dead => continue,
        }
        if crash {
            actions.push(EntryAction::Crash(i));
        }
    }
    if now < max_time && !due {
        actions.push(EntryAction::Tick);
    }
    actions
}

/// `entry_extend.lua` for a client in `phase`: its entry's lease from `now` for `lease` steps
/// if it has not ended (and the client's deadline with it); else the entry goes, if it is
/// still there, and the client is idle. `None` if the client holds nothing.
pub fn renew<E: Leased>(
    entries: &mut Vec<E>,
    phase: &mut EntryPhase,
    now: u8,
    lease: u8,
) -> Option<()> {
    let EntryPhase::Holding { token, fence, .. } = *phase else {
        return None;
    };
    match entries.iter().position(|e| e.token() == token) {
        Some(m) if *entries[m].expires() > now => {
            *entries[m].expires() = now + lease;
            *phase = EntryPhase::Holding {
                token,
                fence,
                deadline: now + lease,
            };
        }
        Some(m) => {
            entries.remove(m);
            *phase = EntryPhase::Idle;
        }
        None => *phase = EntryPhase::Idle,
    }
    Some(())
}

/// A release by a client in `phase`: every entry of its token goes, and it is idle; its token,
/// or `None` if it holds nothing.
pub fn release<E: Leased>(entries: &mut Vec<E>, phase: &mut EntryPhase) -> Option<u8> {
    let EntryPhase::Holding { token, .. } = *phase else {
        return None;
    };
    entries.retain(|e| e.token() != token);
    *phase = EntryPhase::Idle;
    Some(token)
}
