//! Redis Cluster: where a sharded channel is served. The node a subscription goes to is asked
//! (`CLUSTER NODES`, routed as the `SSUBSCRIBE` is) whether it serves the channel's slot as its
//! master, and over which connection (`CLIENT ID`); the connection's route to the slot is read
//! again when it may be stale.

use std::time::Duration;

use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{Route, SingleNodeRoutingInfo, SlotAddr};

use crate::connection::within;

/// Where a subscription goes: the node that serves the channel's slot as its master (its
/// cluster id), and the connection to it (its `CLIENT ID`, where the user may ask for it).
///
/// The connection matters as much as the node: the `redis` crate may replace its connection
/// to a node (one it took for broken, around a failover) without telling anyone, and a
/// subscription confirmed on the connection it replaced is gone with it. The crate subscribes
/// the new connection again only to the channels its slot map gives that node; one it routes
/// elsewhere then, by a map not read again yet, is lost without a word (seen on Redis 7.0: a
/// few channels of a dozen resubscribed right after a failover, confirmed and checked, on a
/// connection replaced a moment later).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Placement {
    node: String,
    connection: Option<i64>,
}

/// Where a subscription of `channel` goes now (routed as the `SSUBSCRIBE` is: the slot's
/// master as the connection's slot map has it, or a replica of it while the master's
/// connection is repaired), if the node there says it serves the channel's slot as its master
/// (`CLUSTER NODES`, its own line, asked over the same connection as its `CLIENT ID`); `None`
/// if it does not.
pub(super) async fn serving(
    conn: &ClusterConnection,
    channel: &str,
    limit: Duration,
) -> redis::RedisResult<Option<Placement>> {
    let route =
        SingleNodeRoutingInfo::SpecificNode(Route::with_key(channel, SlotAddr::ReplicaOptional));
    let mut conn = conn.clone();
    let mut asked = redis::pipe();
    asked.cmd("CLIENT").arg("ID").cmd("CLUSTER").arg("NODES");
    let mut replies = within(limit, conn.route_pipeline(asked, 0, 2, route))
        .await?
        .into_iter();
    // A user without `CLIENT ID` still gets its subscriptions checked by node.
    let connection = match replies.next() {
        Some(redis::Value::Int(id)) => Some(id),
        _ => None,
    };
    let nodes = replies.next().unwrap_or(redis::Value::Nil);
    let nodes: String = redis::from_redis_value(nodes)?;
    Ok(master_of(&nodes, key_slot(channel.as_bytes())).map(|node| Placement { node, connection }))
}

/// The id of the node that answered `CLUSTER NODES` (its `myself` line), if it is a master
/// that serves `slot`.
fn master_of(nodes: &str, slot: u16) -> Option<String> {
    let line = nodes.lines().find(|line| {
        line.split_whitespace()
            .nth(2)
            .is_some_and(|flags| flags.split(',').any(|f| f == "myself"))
    })?;
    let mut fields = line.split_whitespace();
    let id = fields.next()?;
    let flags = fields.nth(1)?;
    if !flags.split(',').any(|f| f == "master") {
        return None;
    }
    // `<master> <ping-sent> <pong-recv> <config-epoch> <link-state>`, then the slots: `a-b`,
    // `a`, or a migration in brackets.
    let serves = fields.skip(5).any(|range| {
        let (first, last) = range.split_once('-').unwrap_or((range, range));
        match (first.parse::<u16>(), last.parse::<u16>()) {
            (Ok(first), Ok(last)) => (first..=last).contains(&slot),
            _ => false,
        }
    });
    serves.then(|| id.to_owned())
}

/// The hash slot of `key` (CRC16/XMODEM of its hash tag, or of the key without one, modulo
/// 16384), as Redis Cluster computes it.
fn key_slot(key: &[u8]) -> u16 {
    let tagged = key
        .iter()
        .position(|b| *b == b'{')
        .and_then(|open| {
            let rest = &key[open + 1..];
            let close = rest.iter().position(|b| *b == b'}')?;
            (close > 0).then(|| &rest[..close])
        })
        .unwrap_or(key);
    let mut crc: u16 = 0;
    for byte in tagged {
        crc ^= u16::from(*byte) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc % 16384
}

/// Sends a script that does nothing (`EVAL "return 1" 1 channel`) to the master of `channel`'s
/// slot, as the connection's slot map has it. A node that stopped serving the slot (the former
/// master of a failover, a replica now) answers `MOVED`, and the connection reads the cluster's
/// slots again before it answers: a subscription sent after it goes to the new master. Sent
/// before, it goes to the former master, which as a replica accepts it, and may never pass a
/// message on to it (seen on Redis 7.0 right after a failover: the connection's slot map, which
/// only a `MOVED` refreshes, stayed stale for as long as the test ran). The reply says nothing.
pub(super) async fn refresh_route(
    conn: &ClusterConnection,
    channel: &str,
    limit: Duration,
) -> redis::RedisResult<()> {
    let mut conn = conn.clone();
    let probe = redis::cmd("EVAL")
        .arg("return 1")
        .arg(1)
        .arg(channel)
        .clone();
    within(limit, probe.query_async::<redis::Value>(&mut conn))
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use redis::cluster_routing::Slot;

    use super::*;

    #[test]
    fn slots_and_the_master_that_serves_them() {
        assert_eq!(key_slot(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12182);
        assert_eq!(key_slot(b"fencelock:{foo}:announce"), 12182);
        // An empty tag is no tag.
        assert_ne!(key_slot(b"{}foo"), key_slot(b"foo"));
        // The slot the `redis` crate routes by.
        for key in [
            &b"123456789"[..],
            b"fencelock:{a/b}:announce",
            b"{}foo",
            b"x{y",
        ] {
            assert_eq!(Slot::new(key_slot(key)), Some(Slot::for_key(key)));
        }
        let nodes = "\
a1 127.0.0.1:7000@17000 master - 0 0 1 connected 0-5460
b2 127.0.0.1:7001@17001 myself,master - 0 0 2 connected 5461-10922 12182 [12183->-a1]
c3 127.0.0.1:7003@17003 slave b2 0 0 2 connected
";
        assert_eq!(master_of(nodes, 5461).as_deref(), Some("b2"));
        assert_eq!(master_of(nodes, 12182).as_deref(), Some("b2"));
        assert_eq!(master_of(nodes, 12183), None);
        assert_eq!(master_of(nodes, 0), None);
        // A replica (a former master) serves nothing as master.
        let replica = "\
b2 127.0.0.1:7001@17001 master - 0 0 3 connected 5461-10922
c3 127.0.0.1:7003@17003 myself,slave b2 0 0 2 connected
";
        assert_eq!(master_of(replica, 5461), None);
    }
}
