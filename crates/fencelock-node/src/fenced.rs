//! Fenced writes from JavaScript: the package's `Writes` keeps its operations as plain objects
//! (`{ op: "set", key, value }`, values already Buffers), turned here into the library's
//! `Writes`.

use fencelock::fenced::Writes;
use napi::bindgen_prelude::{BigInt, Buffer};
use napi_derive::napi;

use crate::errors::{Failure, millis};

/// One fenced write.
#[napi(object)]
pub struct Write {
    /// `set`, `setWithTtl`, `del`, `hset`, `hdel`, `incrBy`, `pexpire`, `rpush`, `lpush`,
    /// `sadd`, `srem`, `xadd`.
    pub op: String,
    pub key: String,
    pub value: Option<Buffer>,
    pub field: Option<Buffer>,
    pub by: Option<i64>,
    /// Milliseconds.
    pub ttl: Option<f64>,
    /// `xadd`'s fields and values, alternating.
    pub fields: Option<Vec<Buffer>>,
}

/// A fence given by JavaScript (a bigint, or a safe integer), or `InvalidArgument` naming the
/// resource.
pub fn fence(resource: &str, fence: &BigInt) -> Result<u64, Failure> {
    match fence.get_u64() {
        (false, value, true) => Ok(value),
        _ => Err(Failure::invalid(
            resource,
            "a fence is a non-negative integer below 2^64",
        )),
    }
}

/// The library's writes for `ops`, or `InvalidArgument` naming `resource`.
pub fn writes(resource: &str, ops: Vec<Write>) -> Result<Writes, Failure> {
    let mut writes = Writes::new();
    for op in ops {
        writes = add(resource, writes, op)?;
    }
    Ok(writes)
}

fn add(resource: &str, writes: Writes, op: Write) -> Result<Writes, Failure> {
    let missing = |what: &str| {
        Failure::invalid(
            resource,
            format!("the fenced write {:?} needs its {what}", op.op),
        )
    };
    let value = || {
        op.value
            .as_ref()
            .map(|b| b.to_vec())
            .ok_or_else(|| missing("value"))
    };
    let field = || {
        op.field
            .as_ref()
            .map(|b| b.to_vec())
            .ok_or_else(|| missing("field"))
    };
    let ttl = || match op.ttl {
        Some(ms) => millis(resource, "ttl", ms),
        None => Err(missing("ttl")),
    };
    let key = op.key.as_str();
    Ok(match op.op.as_str() {
        "set" => writes.set(key, value()?),
        "setWithTtl" => writes.set_with_ttl(key, value()?, ttl()?),
        "del" => writes.del(key),
        "hset" => writes.hset(key, field()?, value()?),
        "hdel" => writes.hdel(key, field()?),
        "incrBy" => writes.incr_by(key, op.by.ok_or_else(|| missing("amount"))?),
        "pexpire" => writes.pexpire(key, ttl()?),
        "rpush" => writes.rpush(key, value()?),
        "lpush" => writes.lpush(key, value()?),
        "sadd" => writes.sadd(key, value()?),
        "srem" => writes.srem(key, value()?),
        "xadd" => {
            let flat = op.fields.as_ref().ok_or_else(|| missing("fields"))?;
            if flat.len() % 2 != 0 {
                return Err(Failure::invalid(
                    resource,
                    "xadd's fields alternate names and values",
                ));
            }
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = flat
                .chunks(2)
                .filter_map(|pair| match pair {
                    [name, value] => Some((name.to_vec(), value.to_vec())),
                    _ => None,
                })
                .collect();
            writes.xadd(key, &pairs)
        }
        other => {
            return Err(Failure::invalid(
                resource,
                format!("unknown fenced write {other:?}"),
            ));
        }
    })
}
