"""What an operator and a careful user do from Python: read a lock and its line of waiters,
list locks, force a release, follow releases; the library's events in `logging`; grants
acknowledged by replicas; TLS material given as bytes."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest

import fencelock
import fencelock.aio


def test_inspect_shows_the_holder_and_the_line_of_waiters(server, name):
    client = fencelock.Client(server.url)
    assert client.inspect(name).is_held() is False
    guard = client.lock(name, ttl=30.0).acquire()
    waiters = [threading.Thread(target=lambda: client.lock(name, wait=10.0).acquire().release()) for _ in range(2)]
    for waiter in waiters:
        waiter.start()
    deadline = time.monotonic() + 10
    while client.inspect(name).waiting < 2:
        assert time.monotonic() < deadline, client.inspect(name)
        time.sleep(0.02)
    info = client.inspect(name)
    assert info.name == name and info.kind == "lock" and info.is_held()
    assert info.holder is not None and info.holder.fence == guard.fence
    assert 0 < info.holder.remaining <= 30.0
    assert [w.place for w in info.waiters] == [1, 2]
    assert all(len(w.token_prefix) == 8 for w in info.waiters)
    assert info.last_fence == guard.fence
    guard.release()
    for waiter in waiters:
        waiter.join(30)


def test_a_label_is_what_inspect_shows_of_its_holder(server, name):
    client = fencelock.Client(server.url)
    with client.lock(name, label="worker-3:4711") as guard:
        holder = client.inspect(name).holder
        assert holder is not None and holder.fence == guard.fence
        assert holder.label == "worker-3:4711"
    with client.semaphore(f"{name}-sem", 2, label="batch") as _:
        assert client.inspect(f"{name}-sem").shared[0].label == "batch"
    with client.lock(f"{name}-plain"):
        assert client.inspect(f"{name}-plain").holder.label is None
    # Refused before anything is held: a wrong type, or a label the library does not take.
    with pytest.raises(fencelock.InvalidArgument, match="label"):
        client.lock(name, label=7)
    with pytest.raises(fencelock.InvalidArgument, match="label") as refused:
        client.lock(name, label="x" * 129).acquire()
    assert refused.value.lock == name
    assert not client.inspect(name).is_held()


def test_multi_lock_campaign_and_once_label_their_holds(server, name):
    client = fencelock.Client(server.url)
    names = [f"{name}/a", f"{name}/b"]
    with client.multi_lock(names, label="batch-7"):
        assert [client.inspect(n).holder.label for n in names] == ["batch-7", "batch-7"]
    leadership = client.election(f"{name}/e").campaign("me", label="node-2")
    assert client.inspect(f"{name}/e").holder.label == "node-2"
    leadership.resign()
    seen = []
    client.once(f"{name}/o", label="job-9").run(lambda fence: seen.append(client.inspect(f"{name}/o").holder.label))
    assert seen == ["job-9"]
    # Refused before anything is held.
    with pytest.raises(fencelock.InvalidArgument, match="label") as refused:
        client.multi_lock(names, label="x" * 129).acquire()
    assert refused.value.lock == names[0]
    with pytest.raises(fencelock.InvalidArgument, match="label"):
        client.election(f"{name}/e").campaign("me", label="\n")
    assert not any(client.inspect(n).is_held() for n in [*names, f"{name}/e"])


def test_list_finds_held_locks_by_pattern(server, name):
    client = fencelock.Client(server.url)
    guards = [client.lock(f"{name}/{i}", ttl=30.0).acquire() for i in range(3)]
    other = client.semaphore(f"{name}-other", 3).acquire()
    listing = client.list(f"{name}/*")
    assert [lock.name for lock in listing.locks] == [f"{name}/{i}" for i in range(3)]
    assert listing.skipped == [] and listing.unanswered == []
    assert [lock.name for lock in client.list(f"{name}-*").locks] == [f"{name}-other"]
    for guard in guards:
        guard.release()
    other.release()
    assert client.list(f"{name}*").locks == []


def test_force_release_frees_a_lock_and_its_holder_learns_it(server, name):
    client = fencelock.Client(server.url)
    guard = client.lock(name, ttl=1.0).acquire()
    lost = guard.lost
    assert client.force_release(name) is True
    assert client.force_release(name) is False
    assert lost.wait(5.0), "the holder was not told"
    assert guard.lost_reason == "not_owner"
    again = client.lock(name, wait=0).acquire()
    assert again.release() is True


def test_releases_are_followed(server, name):
    client = fencelock.Client(server.url)
    seen = []
    ready = threading.Event()

    def follow() -> None:
        watch = client.releases(name, timeout=3.0)
        ready.set()
        for _ in watch:
            seen.append(time.monotonic())

    holder = client.lock(name, ttl=30.0).acquire()
    follower = threading.Thread(target=follow)
    follower.start()
    ready.wait(5)
    time.sleep(0.3)
    # Marked as waited for, so that its release publishes: a try that does not wait marks it.
    assert client.lock(name).try_acquire() is None
    holder.release()
    follower.join(30)
    assert len(seen) == 1

    async def follow_async():
        aclient = fencelock.aio.Client(server.url)
        guard = await aclient.lock(name, ttl=30.0).acquire()
        assert await aclient.lock(name).try_acquire() is None
        releases = aclient.releases(name, timeout=3.0)
        heard = asyncio.ensure_future(releases.__anext__())
        await asyncio.sleep(0.3)
        await guard.release()
        await asyncio.wait_for(heard, 5.0)
        await releases.aclose()

    asyncio.run(follow_async())


def test_the_librarys_events_reach_logging(server, name, caplog):
    client = fencelock.Client(server.url)
    with caplog.at_level(logging.DEBUG, logger="fencelock"):
        # The level is read again at most once a second.
        time.sleep(1.1)
        guard = client.lock(name, ttl=0.5, auto_renew=False).acquire()
        assert guard.lost.wait(5.0)
        deadline = time.monotonic() + 5
        while not any("lock lost" in r.getMessage() for r in caplog.records):
            assert time.monotonic() < deadline, [r.getMessage() for r in caplog.records]
            time.sleep(0.05)
    lost = next(r for r in caplog.records if "lock lost" in r.getMessage())
    assert lost.levelno == logging.WARNING
    assert lost.name.startswith("fencelock")
    assert name in lost.getMessage()
    assert any(r.levelno == logging.DEBUG and "acquire" in r.getMessage() for r in caplog.records)
    # The fields ride along as the record's attributes (`extra`), for structured formatters:
    # the loss's lock, kind, fence and reason; the grant's.
    assert (lost.lock, lost.kind, lost.fence) == (name, "lock", guard.fence)
    assert lost.reason == "the lease ran out before it was renewed"
    granted = next(r for r in caplog.records if "lock acquired" in r.getMessage())
    assert (granted.lock, granted.fence) == (name, guard.fence)


def test_nothing_is_formatted_below_the_loggers_level(server, name, caplog):
    client = fencelock.Client(server.url)
    with caplog.at_level(logging.ERROR, logger="fencelock"):
        time.sleep(1.1)
        client.lock(name).acquire().release()
        time.sleep(0.2)
    assert [r for r in caplog.records if r.name.startswith("fencelock")] == []


def test_wait_for_replicas_refuses_a_grant_no_replica_acknowledged(server, name):
    client = fencelock.Client(server.url, wait_for_replicas=1, replica_timeout=0.1)
    with pytest.raises(fencelock.NotReplicated) as caught:
        client.lock(name, wait=0).acquire()
    assert (caught.value.acknowledged, caught.value.wanted) == (0, 1)
    # Given back: the lock is free.
    fencelock.Client(server.url).lock(name, wait=0).acquire().release()
    warned = fencelock.Client(server.url, wait_for_replicas=1, replica_timeout=0.1, replica_shortfall="warn")
    warned.lock(name, wait=0).acquire().release()
    with pytest.raises(fencelock.ConfigError):
        fencelock.Client(server.url, wait_for_replicas=1, replica_shortfall="maybe")


def test_tls_material_given_as_bytes(make_server, name, tmp_path):
    from conftest import free_port, redis_server
    from test_errors import _certificates

    ca, cert, key = _certificates(tmp_path)
    tls_port = free_port()
    make_server("--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
                "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "yes", binary=redis_server())
    url = f"rediss://127.0.0.1:{tls_port}"
    # The server asks for a client certificate: the server's own will do (signed by the CA).
    client = fencelock.Client(url, tls_ca=ca.read_bytes(), tls_client_cert=cert.read_bytes(),
                              tls_client_key=key.read_bytes())
    client.lock(name, wait=0).acquire().release()
    # Paths and bytes mixed.
    mixed = fencelock.Client(url, tls_ca=str(ca), tls_client_cert=cert.read_bytes(), tls_client_key=key)
    mixed.lock(name, wait=0).acquire().release()
    without = fencelock.Client(url, tls_ca=ca.read_bytes(), command_timeout=2.0)
    with pytest.raises(fencelock.Error):
        without.lock(name, wait=0).acquire()
