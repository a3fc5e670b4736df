"""One vocabulary, owned by the library: every code of an error, a loss, a conflict, an
observation and a lock kind that the Rust library gives has its one Python counterpart, and
Python shows the library's code, never a guess of its own."""

from __future__ import annotations

import asyncio
import inspect
import os
import subprocess
import time

import pytest

import fencelock
import fencelock.aio
from fencelock import _native, errors


def test_every_error_code_has_exactly_one_class():
    classes = [
        cls
        for cls in vars(errors).values()
        if inspect.isclass(cls) and issubclass(cls, fencelock.Error) and cls is not fencelock.Error
        # A class that refines another's without a code of its own is not a code's class
        # (ClientClosed, an InvalidArgument, has its own: closed).
        and "code" in vars(cls)
    ]
    codes = sorted(cls.code for cls in classes)
    assert codes == sorted(_native.ERROR_CODES), "a class without a code, or a code without a class"
    assert len(set(codes)) == len(codes)
    for code in _native.ERROR_CODES:
        cls = errors._BY_CODE[code]
        assert cls.code == code
        assert getattr(fencelock, cls.__name__) is cls, f"{cls.__name__} is not exported"


def test_the_other_codes_are_the_librarys():
    assert list(_native.LOST_CODES) == ["not_owner", "expired", "max_hold_reached", "released"]
    assert list(_native.CONFLICT_CODES) == [
        "other_kind",
        "permits_mismatch",
        "upgrade",
        "write_reentry",
        "reentry_limit",
    ]
    assert sorted(_native.OBSERVATION_CODES) == sorted(c.code for c in (fencelock.Leader, fencelock.Vacant, fencelock.Gap))
    assert "read-write" in _native.KIND_CODES


def test_errors_carry_the_librarys_code(server, name):
    client = fencelock.Client(server.url)
    held = client.lock(name).acquire()
    with pytest.raises(fencelock.Busy) as busy:
        client.lock(name, wait=0).acquire()
    assert busy.value.code == "busy"
    with pytest.raises(fencelock.TimedOut) as timed_out:
        client.lock(name, wait=0.1).acquire()
    assert timed_out.value.code == "timed_out"
    with pytest.raises(fencelock.Conflict) as conflict:
        client.semaphore(name, 2).acquire()
    assert (conflict.value.code, conflict.value.conflict) == ("conflict", "other_kind")
    assert conflict.value.conflict in _native.CONFLICT_CODES
    held.release()


def test_a_block_whose_lock_was_taken_says_not_owner_from_the_release(server, name):
    """The guard had not noticed the loss when the block ended: the release found the lock
    gone, and that is the reason given (after the release too), not a guess."""
    client = fencelock.Client(server.url)
    with pytest.raises(fencelock.NotHeld) as caught:
        with client.lock(name, ttl=30.0) as guard:
            server.raw().delete(f"fencelock:{{{name}}}")
    assert caught.value.reason == "not_owner"
    assert guard.lost_reason == "not_owner"
    assert guard.lost.wait(1.0)


def test_a_lease_that_ran_out_says_expired(server, name):
    client = fencelock.Client(server.url)
    with pytest.raises(fencelock.NotHeld) as caught:
        with client.lock(name, ttl=0.2, auto_renew=False):
            time.sleep(0.5)
    assert caught.value.reason == "expired"


def test_a_leaderships_value_is_kept_through_a_resignation(server, name):
    client = fencelock.Client(server.url)
    leadership = client.election(name).campaign("node-a", ttl=10.0)
    leadership.proclaim("node-a:8080")
    assert leadership.value == "node-a:8080"
    assert leadership.resign() is True
    assert leadership.value == "node-a:8080"
    assert leadership.lost_reason == "released"


def test_the_observations_codes_match_the_clis(server, name, fencelock_cli):
    """`fencelock leader --watch --json` and the Python observer name each observation with the
    library's code."""
    client = fencelock.Client(server.url)
    watcher = subprocess.Popen(
        [fencelock_cli, "leader", name, "--watch", "--json"],
        env=dict(os.environ, FENCELOCK_URL=server.url),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        first = watcher.stdout.readline()
        assert '"event":"vacant"' in first.replace(" ", ""), first
        leadership = client.election(name).campaign("node-a", ttl=10.0)
        line = watcher.stdout.readline()
        assert '"event":"leader"' in line.replace(" ", ""), line
        leadership.resign()
    finally:
        watcher.kill()
        watcher.wait()
    seen = list(client.election(name).observe(timeout=0.5))
    assert [type(o).code for o in seen] == ["vacant"]


def test_asyncio_errors_are_the_same_classes(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        held = await client.lock(name).acquire()
        with pytest.raises(fencelock.Busy) as caught:
            await client.lock(name, wait=0).acquire()
        await held.release()
        return caught.value.code

    assert asyncio.run(main()) == "busy"
