"""Leader election from Python: terms are fences, the leader is readable and observable, a
deposed leader is told."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

import fencelock
import fencelock.aio


def test_terms_grow_and_the_leader_is_read(server, name):
    client = fencelock.Client(server.url)
    election = client.election(name)
    assert election.leader() is None
    first = election.campaign("node-a", ttl=5.0)
    assert first.is_held() and first.value == "node-a"
    with pytest.raises(fencelock.Busy):
        client.election(name).campaign("node-b", wait=0)
    leader = election.leader()
    assert leader is not None
    assert (leader.value, leader.term) == ("node-a", first.term)
    assert abs(leader.since - time.time()) < 60
    first.proclaim("node-a:8080")
    assert election.leader().value == "node-a:8080"
    assert first.resign() is True
    assert election.leader() is None
    with client.election(name).campaign("node-b") as second:
        assert second.term > first.term
        # A term is a fence.
        store = client.fenced_store(name)
        assert store.apply(second.term, fencelock.Writes().set(f"{name}:k", "b")) == second.term
        with pytest.raises(fencelock.Fenced):
            store.apply(first.term, fencelock.Writes().set(f"{name}:k", "a"))
    assert election.leader() is None


def test_a_deposed_leader_is_told_and_refused(server, name):
    client = fencelock.Client(server.url)
    leadership = client.election(name).campaign("node-a", ttl=1.0)
    lost = leadership.lost
    server.raw().delete(f"fencelock:{{{name}}}")
    assert lost.wait(5.0), "the deposed leader was not told"
    successor = client.election(name).campaign("node-b", wait=5.0)
    with pytest.raises((fencelock.NotLeader, fencelock.NotHeld)) as caught:
        leadership.proclaim("still me?")
    assert caught.value.lock == name
    assert client.election(name).leader().value == "node-b"
    successor.resign()


def test_an_observer_sees_every_leader_in_order(server, name):
    client = fencelock.Client(server.url)
    election = client.election(name)
    seen = []
    ready = threading.Event()

    def observe() -> None:
        for observation in election.observe(timeout=3.0):
            seen.append(observation)
            ready.set()

    observer = threading.Thread(target=observe)
    observer.start()
    assert ready.wait(5.0)  # the first observation: nobody leads yet
    terms = []
    for value in ("a", "b", "c"):
        leadership = election.campaign(value)
        terms.append(leadership.term)
        leadership.resign()
    observer.join(20)
    assert isinstance(seen[0], fencelock.Vacant)
    leaders = [o for o in seen if isinstance(o, fencelock.Leader)]
    assert [(l.value, l.term) for l in leaders] == list(zip("abc", terms))
    assert not any(isinstance(o, fencelock.Gap) for o in seen)


def test_asyncio_campaign_and_observe(server, name):
    async def main():
        client = fencelock.aio.Client(server.url)
        election = client.election(name)
        observations = election.observe()
        assert isinstance(await observations.__anext__(), fencelock.Vacant)
        async with await election.campaign("node-a", ttl=5.0) as leadership:
            seen = await asyncio.wait_for(observations.__anext__(), 5.0)
            assert seen == fencelock.Leader("node-a", leadership.term, seen.since)
            await leadership.proclaim("node-a:2")
            assert (await election.leader()).value == "node-a:2"
        assert await election.leader() is None

    asyncio.run(asyncio.wait_for(main(), 60))
