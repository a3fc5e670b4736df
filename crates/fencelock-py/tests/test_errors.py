"""Each exception, raised by the case that names it, with the lock's name and its fields."""

from __future__ import annotations

import pytest

import fencelock

from conftest import free_port


def test_busy_and_timed_out(server, name):
    client = fencelock.Client(server.url)
    holder = client.lock(name, ttl=10.0).acquire()
    with pytest.raises(fencelock.Busy) as busy:
        client.lock(name, wait=0).acquire()
    assert busy.value.lock == name and 0 < busy.value.remaining <= 10
    with pytest.raises(fencelock.TimedOut) as timed_out:
        client.lock(name, wait=0.2).acquire()
    assert timed_out.value.lock == name and timed_out.value.waited >= 0.2
    assert isinstance(timed_out.value, TimeoutError)
    holder.release()


@pytest.mark.parametrize(
    "options",
    [{"ttl": -1.0}, {"ttl": float("nan")}, {"wait": -0.5}, {"max_hold": float("inf")}],
)
def test_invalid_times_are_refused_naming_the_lock(server, name, options):
    client = fencelock.Client(server.url)
    with pytest.raises(fencelock.InvalidArgument) as caught:
        client.lock(name, **options)
    assert caught.value.lock == name
    assert isinstance(caught.value, ValueError)


def test_a_bad_name_is_refused_with_nothing_sent(server):
    client = fencelock.Client(server.url)
    with pytest.raises(fencelock.InvalidArgument) as caught:
        client.lock("with{braces}").acquire()
    assert caught.value.lock == "with{braces}"
    assert server.raw().keys("*") == [] or b"fencelock:{with{braces}}" not in server.raw().keys("*")


def test_a_bad_url_is_a_config_error():
    with pytest.raises(fencelock.ConfigError) as caught:
        fencelock.Client("http://127.0.0.1:1")
    assert caught.value.lock is None


def test_a_key_prefix_ending_with_a_colon_is_a_config_error(server, name):
    # fencelock puts the colon between the prefix and the name itself (`PREFIX:{NAME}`).
    with pytest.raises(fencelock.ConfigError) as caught:
        fencelock.Client(server.url, key_prefix="fencelock:")
    assert caught.value.lock is None
    assert "ends with ':'" in str(caught.value)
    nested = fencelock.Client(server.url, key_prefix="app:locks")
    guard = nested.lock(name, wait=0).acquire()
    assert server.raw().exists(f"app:locks:{{{name}}}") == 1
    guard.release()


def test_unreachable_names_the_server(name):
    port = free_port()
    client = fencelock.Client(f"redis://127.0.0.1:{port}", command_timeout=0.5)
    with pytest.raises(fencelock.Unreachable) as caught:
        client.lock(name, wait=0).acquire()
    assert caught.value.lock == name
    assert caught.value.server == f"127.0.0.1:{port}"
    assert isinstance(caught.value, ConnectionError)


def test_auth_failed_never_shows_the_password(make_server, name):
    server = make_server("--requirepass", "right-secret")
    client = fencelock.Client(f"redis://:wrong-secret@127.0.0.1:{server.port}")
    with pytest.raises(fencelock.AuthFailed) as caught:
        client.lock(name, wait=0).acquire()
    assert caught.value.lock == name
    assert "wrong-secret" not in str(caught.value) and "wrong-secret" not in repr(client)


def test_permission_denied_names_the_rule(make_server, name):
    server = make_server()
    # A user that may not run scripts.
    server.raw().acl_setuser(
        "noscripts", enabled=True, passwords=["+pw"], keys=["*"], channels=["*"],
        commands=["+@all", "-eval", "-evalsha", "-script"],
    )
    client = fencelock.Client(f"redis://noscripts:pw@127.0.0.1:{server.port}")
    with pytest.raises(fencelock.PermissionDenied) as caught:
        client.lock(name, wait=0).acquire()
    assert caught.value.lock == name
    assert caught.value.rule


def test_conflict_when_a_name_is_used_as_another_kind(server, name):
    client = fencelock.Client(server.url)
    permit = client.semaphore(name, 3).acquire()
    with pytest.raises(fencelock.Conflict) as caught:
        client.lock(name, wait=0).acquire()
    assert caught.value.conflict == "other_kind" and caught.value.lock == name
    permit.release()


def test_wrong_type_leaves_a_foreign_key_alone(server, name):
    raw = server.raw()
    raw.rpush(f"fencelock:{{{name}}}", "not a lock")
    client = fencelock.Client(server.url)
    with pytest.raises(fencelock.WrongType) as caught:
        client.lock(name, wait=0).acquire()
    assert caught.value.lock == name and caught.value.found == "a list"
    assert raw.lrange(f"fencelock:{{{name}}}", 0, -1) == [b"not a lock"]


def test_no_quorum_over_redlock(make_server, name):
    up = make_server()
    downs = [f"redis://127.0.0.1:{free_port()}" for _ in range(2)]
    client = fencelock.Client.redlock([up.url] + downs, command_timeout=0.5)
    with pytest.raises(fencelock.NoQuorum) as caught:
        client.lock(name, wait=0).acquire()
    assert (caught.value.agreed, caught.value.needed, caught.value.total) == (1, 2, 3)
    # Nothing stays held on the instance that agreed.
    assert up.raw().exists(f"fencelock:{{{name}}}") == 0


def test_fenced_and_not_held(server, name):
    client = fencelock.Client(server.url)
    store = client.fenced_store(name)
    store.apply(10, fencelock.Writes().set(f"{name}:k", "v"))
    with pytest.raises(fencelock.Fenced) as caught:
        store.apply(9, fencelock.Writes().set(f"{name}:k", "w"))
    assert (caught.value.fence, caught.value.accepted) == (9, 10)
    guard = client.lock(name, ttl=5.0).acquire()
    guard.release()
    with pytest.raises(fencelock.NotHeld) as not_held:
        guard.extend(5.0)
    assert not_held.value.lock == name


def test_exceptions_pickle_with_their_fields(server, name):
    import pickle

    client = fencelock.Client(server.url)
    holder = client.lock(name, ttl=10.0).acquire()
    with pytest.raises(fencelock.Busy) as busy:
        client.lock(name, wait=0).acquire()
    copy = pickle.loads(pickle.dumps(busy.value))
    assert type(copy) is fencelock.Busy and copy.lock == name and str(copy) == str(busy.value)
    holder.release()


def test_fenced_wrong_type_writes_nothing(server, name):
    client = fencelock.Client(server.url)
    server.raw().rpush(f"{name}:h", "a list")
    with pytest.raises(fencelock.FencedWrongType) as caught:
        client.fenced_store(name).apply(5, fencelock.Writes().set(f"{name}:s", "v").hset(f"{name}:h", "f", "v"))
    assert caught.value.resource == name and caught.value.key == f"{name}:h"
    assert server.raw().exists(f"{name}:s") == 0


def test_unsupported_semaphore_over_redlock(make_server, name):
    servers = [make_server() for _ in range(3)]
    client = fencelock.Client.redlock([s.url for s in servers])
    with pytest.raises(fencelock.Unsupported) as caught:
        client.semaphore(name, 2).acquire()
    assert caught.value.lock == name
    assert all(s.raw().keys("*") == [] for s in servers)


def test_redis_error_names_the_refusal(make_server, server, name):
    replica = make_server("--replicaof", "127.0.0.1", str(server.port))
    client = fencelock.Client(replica.url)
    with pytest.raises(fencelock.RedisError) as caught:
        client.lock(name, wait=0).acquire()
    assert caught.value.lock == name and caught.value.server == f"127.0.0.1:{replica.port}"
    assert "read only replica" in str(caught.value)


def _certificates(tmp_path):
    """A CA and a server certificate for 127.0.0.1 signed by it (openssl)."""
    import subprocess

    def openssl(*args):
        made = subprocess.run(["openssl", *args], capture_output=True, cwd=tmp_path)
        assert made.returncode == 0, made.stderr

    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=fencelock test CA",
            "-keyout", "ca.key", "-out", "ca.crt")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1", "-keyout", "server.key",
            "-out", "server.csr")
    (tmp_path / "san.ext").write_text("subjectAltName=IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-days", "1", "-extfile", "san.ext", "-out", "server.crt")
    return tmp_path / "ca.crt", tmp_path / "server.crt", tmp_path / "server.key"


def test_tls_error_for_an_untrusted_server(make_server, name, tmp_path):
    from conftest import free_port, redis_server

    ca, cert, key = _certificates(tmp_path)
    tls_port = free_port()
    # Always redis-server: the Valkey binary of the second pass has no TLS.
    make_server("--tls-port", str(tls_port), "--tls-cert-file", str(cert), "--tls-key-file", str(key),
                "--tls-ca-cert-file", str(ca), "--tls-auth-clients", "no", binary=redis_server())
    untrusting = fencelock.Client(f"rediss://127.0.0.1:{tls_port}", command_timeout=2.0)
    with pytest.raises(fencelock.TlsError) as caught:
        untrusting.lock(name, wait=0).acquire()
    assert caught.value.lock == name and caught.value.server == f"127.0.0.1:{tls_port}"
    # With the CA trusted, the same server grants the lock.
    trusting = fencelock.Client(f"rediss://127.0.0.1:{tls_port}", tls_ca_file=str(ca))
    guard = trusting.lock(name, wait=0).acquire()
    assert guard.release() is True
