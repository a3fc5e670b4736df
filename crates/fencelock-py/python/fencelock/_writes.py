"""Fenced writes: what :meth:`FencedStore.apply` writes, built by chaining."""

from __future__ import annotations

from typing import Iterable, List, Tuple, Union

Value = Union[bytes, bytearray, memoryview, str]


def _bytes(value: Value) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


class Writes:
    """Writes applied together, only if the fence is not older than the resource's.

    Each method adds one write and returns the same object, so calls chain::

        fencelock.Writes().set("report:latest", data).incr_by("report:count", 1)

    Values are ``bytes`` or ``str`` (encoded as UTF-8).
    """

    __slots__ = ("_ops",)

    def __init__(self) -> None:
        self._ops: List[tuple] = []

    def set(self, key: str, value: Value) -> "Writes":
        """``SET key value``."""
        self._ops.append(("set", key, _bytes(value)))
        return self

    def set_with_ttl(self, key: str, value: Value, ttl: float) -> "Writes":
        """``SET key value PX ttl`` (``ttl`` in seconds)."""
        self._ops.append(("set_with_ttl", key, _bytes(value), float(ttl)))
        return self

    def delete(self, key: str) -> "Writes":
        """``DEL key``."""
        self._ops.append(("del", key))
        return self

    def hset(self, key: str, field: Value, value: Value) -> "Writes":
        """``HSET key field value``."""
        self._ops.append(("hset", key, _bytes(field), _bytes(value)))
        return self

    def hdel(self, key: str, field: Value) -> "Writes":
        """``HDEL key field``."""
        self._ops.append(("hdel", key, _bytes(field)))
        return self

    def incr_by(self, key: str, by: int) -> "Writes":
        """``INCRBY key by``."""
        self._ops.append(("incr_by", key, int(by)))
        return self

    def pexpire(self, key: str, ttl: float) -> "Writes":
        """``PEXPIRE key ttl`` (``ttl`` in seconds)."""
        self._ops.append(("pexpire", key, float(ttl)))
        return self

    def rpush(self, key: str, value: Value) -> "Writes":
        """``RPUSH key value``."""
        self._ops.append(("rpush", key, _bytes(value)))
        return self

    def lpush(self, key: str, value: Value) -> "Writes":
        """``LPUSH key value``."""
        self._ops.append(("lpush", key, _bytes(value)))
        return self

    def sadd(self, key: str, member: Value) -> "Writes":
        """``SADD key member``."""
        self._ops.append(("sadd", key, _bytes(member)))
        return self

    def srem(self, key: str, member: Value) -> "Writes":
        """``SREM key member``."""
        self._ops.append(("srem", key, _bytes(member)))
        return self

    def xadd(self, key: str, fields: Iterable[Tuple[Value, Value]]) -> "Writes":
        """``XADD key * field value ...``."""
        pairs = [(_bytes(f), _bytes(v)) for f, v in fields]
        self._ops.append(("xadd", key, pairs))
        return self

    def __len__(self) -> int:
        return len(self._ops)

    def __repr__(self) -> str:
        return f"<fencelock.Writes {[op[0] for op in self._ops]}>"
