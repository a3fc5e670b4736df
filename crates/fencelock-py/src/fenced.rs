//! Fenced writes from Python: `fencelock.Writes` keeps its operations as tuples
//! (`("set", key, value)`, ...; values already bytes), turned here into Rust `Writes`.

use fencelock::fenced::Writes;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::errors::{invalid, seconds};

/// The Rust writes for `ops`, or `InvalidArgument` naming `resource`.
pub fn writes(resource: &str, ops: &Bound<'_, PyList>) -> PyResult<Writes> {
    let mut writes = Writes::new();
    for op in ops.iter() {
        let op = op.cast_into::<PyTuple>().map_err(|_| {
            invalid(
                resource,
                "each fenced write must be a tuple made by fencelock.Writes",
            )
        })?;
        writes = add(resource, writes, &op)?;
    }
    Ok(writes)
}

fn add(resource: &str, writes: Writes, op: &Bound<'_, PyTuple>) -> PyResult<Writes> {
    let name: String = op.get_item(0)?.extract()?;
    let key = || -> PyResult<String> { op.get_item(1)?.extract() };
    let bytes = |i: usize| -> PyResult<Vec<u8>> { op.get_item(i)?.extract() };
    let secs = |i: usize| -> PyResult<std::time::Duration> {
        seconds(resource, "ttl", op.get_item(i)?.extract()?)
    };
    Ok(match name.as_str() {
        "set" => writes.set(&key()?, bytes(2)?),
        "set_with_ttl" => writes.set_with_ttl(&key()?, bytes(2)?, secs(3)?),
        "del" => writes.del(&key()?),
        "hset" => writes.hset(&key()?, bytes(2)?, bytes(3)?),
        "hdel" => writes.hdel(&key()?, bytes(2)?),
        "incr_by" => writes.incr_by(&key()?, op.get_item(2)?.extract()?),
        "pexpire" => writes.pexpire(&key()?, secs(2)?),
        "rpush" => writes.rpush(&key()?, bytes(2)?),
        "lpush" => writes.lpush(&key()?, bytes(2)?),
        "sadd" => writes.sadd(&key()?, bytes(2)?),
        "srem" => writes.srem(&key()?, bytes(2)?),
        "xadd" => {
            let fields: Vec<(Vec<u8>, Vec<u8>)> = op.get_item(2)?.extract()?;
            writes.xadd(&key()?, &fields)
        }
        other => return Err(invalid(resource, format!("unknown fenced write {other:?}"))),
    })
}
