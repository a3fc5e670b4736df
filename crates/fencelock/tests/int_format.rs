//! The scripts' `int` (script/prelude.lua) writes whole numbers right whatever the size of the
//! server's C `long`, which Lua 5.1's `%d` casts to: on this server (64 bits) through `%d`, and on
//! a server whose `long` has 32 bits (32-bit builds, Windows ports; emulated here by a
//! `string.format` whose `%d` casts as such a build does) through `%.0f`. Values above 2^31, as
//! large as expiries (~1.8e12) and fences (~1.8e15), and 2^53 - 1, run by EVAL on a real server.

use crate::common;

use common::server;

/// The whole numbers written, as decimal digits.
const VALUES: [&str; 8] = [
    "0",
    "2147483647",
    "2147483648",
    "4294967301",
    "1800000000123",
    "1800000000000123",
    "9007199254740990",
    "9007199254740991",
];

/// `string.format` as the server has it, counting its `%d` calls.
const NATIVE: &str = "local real_format = string.format
local percent_d = 0
local string = {format = function(form, n)
  if form == '%d' then percent_d = percent_d + 1 end
  return real_format(form, n)
end}
";

/// `string.format` as a server whose C `long` has 32 bits has it: a `%d` argument out of its
/// range becomes `LONG_MIN` (what x86's conversion gives), counting its `%d` calls.
const LONG_32: &str = "local real_format = string.format
local percent_d = 0
local string = {format = function(form, n)
  if form == '%d' then
    percent_d = percent_d + 1
    if n >= 2147483648 or n < -2147483648 then n = -2147483648 end
  end
  return real_format(form, n)
end}
";

/// The paragraph of the prelude that defines `int` (with its state).
fn int_helper() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/script/prelude.lua");
    let prelude = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    prelude
        .split("\n\n")
        .find(|paragraph| paragraph.contains("local function int("))
        .unwrap_or_else(|| panic!("the prelude defines no `int`"))
        .to_owned()
}

/// What `int` writes for each of `VALUES` under `format`, and how many `%d` calls it made.
fn written(redis: &fencelock_testkit::RedisServer, format: &str) -> (Vec<String>, i64) {
    let script = format!(
        "{format}{}\nlocal out = {{}}\nfor i = 1, #ARGV do out[i] = int(tonumber(ARGV[i])) end\n\
         return {{out, percent_d}}\n",
        int_helper()
    );
    let mut args = vec!["EVAL", script.as_str(), "0"];
    args.extend(VALUES);
    let reply = redis.cmd(&args).unwrap_or_else(|e| panic!("EVAL: {e}"));
    let redis::Value::Array(parts) = reply else {
        panic!("EVAL: {reply:?}");
    };
    let [redis::Value::Array(out), redis::Value::Int(calls)] = parts.as_slice() else {
        panic!("EVAL: {parts:?}");
    };
    let out = out
        .iter()
        .map(|v| match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            other => panic!("not a string: {other:?}"),
        })
        .collect();
    (out, *calls)
}

#[test]
fn whole_numbers_are_written_right_with_a_64_bit_long_and_a_32_bit_one() {
    let redis = server();
    let (native, native_calls) = written(&redis, NATIVE);
    let (long_32, long_32_calls) = written(&redis, LONG_32);
    assert_eq!(native, VALUES, "with the server's own `%d`");
    assert_eq!(long_32, VALUES, "with a 32-bit long's `%d`");
    // The probe, then `%d` for every value: the fast path.
    assert_eq!(native_calls, 1 + 8, "`%d` calls with a 64-bit long");
    // The probe only: every value through `%.0f`.
    assert_eq!(long_32_calls, 1, "`%d` calls with a 32-bit long");
}
