//! `fencelock` on a Redis Cluster (`--cluster`, `FENCELOCK_CLUSTER`) and through Sentinel
//! (`--sentinel NAME`, the master's password from `FENCELOCK_MASTER_PASSWORD`): the job runs with
//! its fence, `status` and `list` see the lock, and a missing master password is exit 69.

#![allow(clippy::unwrap_used, clippy::expect_used)] // a test fails by panicking

use crate::common;

use common::*;
use fencelock_testkit::{RedisCluster, SENTINEL_MASTER, SentinelSet};

#[test]
fn run_status_and_list_on_a_cluster() {
    let cluster = RedisCluster::start(3, 0).expect("a Redis Cluster");
    let urls = cluster.urls();
    let ran = run(&[
        "run",
        "--cluster",
        "--url",
        &urls[0],
        "--url",
        &urls[1],
        "cluster-job",
        "--",
        "sh",
        "-c",
        "test \"$FENCELOCK_FENCE\" -gt 0",
    ]);
    assert_eq!(ran.code, Some(0), "{}", ran.explain());
    // The lock's keys went to the master of its slot.
    let master = cluster
        .master_of("fencelock:{cluster-job}:fence")
        .expect("the slot's master");
    assert!(exists(master, "fencelock:{cluster-job}:fence"));

    // FENCELOCK_CLUSTER=1 does the same as --cluster.
    let mut status = fencelock(&["status", "--url", &urls[2], "--json", "cluster-job"]);
    status.env("FENCELOCK_CLUSTER", "1");
    let status = Running::start(status).finish();
    assert_eq!(status.code, Some(0), "{}", status.explain());
    assert!(
        status.stdout.contains("\"held\":false") && status.stdout.contains("\"last_fence\""),
        "{}",
        status.explain()
    );

    // A lock held by a running job is listed, whichever master has it.
    let dir = scratch();
    let marker = file(dir.path(), "started");
    let job = fencelock(&[
        "run",
        "--cluster",
        "--url",
        &urls[0],
        "held-on-cluster",
        "--",
        "sh",
        "-c",
        &format!("touch {marker}; sleep 30"),
    ]);
    let job = Running::start(job);
    wait_for_file(
        &path(dir.path(), "started"),
        std::time::Duration::from_secs(20),
    );
    let listed = run(&["list", "--cluster", "--url", &urls[1], "--json"]);
    assert_eq!(listed.code, Some(0), "{}", listed.explain());
    assert!(
        listed.stdout.contains("held-on-cluster"),
        "{}",
        listed.explain()
    );
    job.signal(nix::sys::signal::Signal::SIGTERM);
    let finished = job.finish();
    assert_ne!(finished.code, Some(0), "{}", finished.explain());
}

#[test]
fn run_through_sentinel_with_the_master_password_from_the_environment() {
    let set = SentinelSet::start(1, 1).expect("a Sentinel set");
    let password = "m4ster-s3cret";
    for sentinel in &set.sentinels {
        sentinel
            .cmd(&["SENTINEL", "SET", SENTINEL_MASTER, "auth-pass", password])
            .expect("SENTINEL SET");
    }
    for node in &set.nodes {
        node.cmd(&["CONFIG", "SET", "masterauth", password])
            .expect("masterauth");
    }
    for node in &set.nodes {
        node.cmd(&["CONFIG", "SET", "requirepass", password])
            .expect("requirepass");
    }
    let sentinel_url = set.sentinel_urls().remove(0);

    let mut job = fencelock(&[
        "run",
        "--sentinel",
        SENTINEL_MASTER,
        "--url",
        &sentinel_url,
        "sentinel-job",
        "--",
        "sh",
        "-c",
        "test \"$FENCELOCK_FENCE\" -gt 0",
    ]);
    job.env("FENCELOCK_MASTER_PASSWORD", password);
    let ran = Running::start(job).finish();
    assert_eq!(ran.code, Some(0), "{}", ran.explain());

    // Without the password: a refusal (exit 69) naming the master, never the password.
    let refused = run(&[
        "run",
        "--sentinel",
        SENTINEL_MASTER,
        "--url",
        &sentinel_url,
        "sentinel-job",
        "--",
        "true",
    ]);
    assert_eq!(refused.code, Some(69), "{}", refused.explain());
    assert!(
        refused.stderr.contains("authentication") && refused.stderr.contains(SENTINEL_MASTER),
        "{}",
        refused.explain()
    );
    assert!(!refused.stderr.contains(password), "{}", refused.explain());
}
