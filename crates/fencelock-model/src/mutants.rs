//! The plain lock's model's breaks of the protocol: the flags `tests/check.rs` turns on, one at
//! a time, to show that each property can fail.

/// Breaks of the protocol, each a flag. The unmutated model (all false) passes every property;
/// each flag makes the checker find a counterexample to one of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Mutants {
    /// The resource accepts every write, whatever its fence.
    pub no_resource_check: bool,
    /// A pass gives the waiter a full lease instead of the claim: a waiter that died in line
    /// keeps the lock idle for a lease.
    pub unbounded_claim: bool,
    /// The fence is `last + 1` only (not `max(last + 1, clock)`): a failover that lost the
    /// counter hands out a fence again.
    pub fence_counter_only: bool,
    /// The fence is the server clock only (not `max(last + 1, clock)`): two grants within one
    /// clock tick, or a clock step back, repeat or lower it.
    pub fence_clock_only: bool,
    /// Drops the clock assumption: a promoted replica's clock may lag the old master's by more
    /// than the failover takes ([`UNBOUNDED_LAG`](crate::UNBOUNDED_LAG)).
    pub unbounded_clock_lag: bool,
    /// A renewal does not check the owner: it extends whoever holds the lock and tells the
    /// caller that it holds it.
    pub renew_any_owner: bool,
}
