"""fencelock's exceptions: one class per kind of failure, each with the lock's name.

Every exception is a :class:`fencelock.Error` and carries ``lock`` (the lock's name, or
``None`` for a configuration error) and the fields of its kind as attributes. Messages name
the server where one is involved, never a password. Where a built-in exception means the same,
the class is also one of those: :class:`TimedOut` is a :class:`TimeoutError`,
:class:`Unreachable` a :class:`ConnectionError`, :class:`InvalidArgument` a
:class:`ValueError`.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
    "Error",
    "InvalidArgument",
    "ConfigError",
    "TimedOut",
    "Busy",
    "NotHeld",
    "NotLeader",
    "Unreachable",
    "NoQuorum",
    "TlsError",
    "NotReplicated",
    "AuthFailed",
    "PermissionDenied",
    "RedisError",
    "WrongType",
    "Fenced",
    "FencedWrongType",
    "Conflict",
    "RandomSource",
    "Unsupported",
]


class Error(Exception):
    """The base of every fencelock exception.

    Attributes:
        lock: the lock (or, for a fenced write, the resource) the error is about.
    """

    lock: Optional[str]

    def __new__(cls, message: str, **fields: Any) -> "Error":
        return super().__new__(cls, message)

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.lock = fields.pop("lock", None)
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), str(self), dict(self.__dict__)))


def _rebuild(cls: type, message: str, fields: dict) -> Error:
    return cls(message, **fields)


class InvalidArgument(Error, ValueError):
    """A bad argument (a name, a lease, a wait), refused before anything was sent.

    Attributes: ``reason``."""


class ConfigError(Error, ValueError):
    """A bad client configuration (a URL, a TLS file, an option). Attributes: ``reason``."""


class TimedOut(Error, TimeoutError):
    """The wait for the lock ran out. Attributes: ``waited`` (seconds)."""


class Busy(Error):
    """The lock is held by another owner and the request did not wait (``wait=0``).

    Attributes: ``remaining`` (seconds left on the holder's lease, if known)."""


class NotHeld(Error):
    """The lock is no longer held by this guard.

    Attributes: ``reason``: ``not_owner``, ``expired``, ``max_hold_reached`` or
    ``released``."""


class NotLeader(Error):
    """This process no longer leads the election (a proclaim after losing it).

    Attributes: ``election``, ``term`` (the refused leadership's), ``current`` (the election's
    term now, if someone leads)."""


class Unreachable(Error, ConnectionError):
    """Redis could not be reached, or did not answer in time.

    Attributes: ``server``, ``hint`` (what to check, when fencelock can tell)."""


class NoQuorum(Error):
    """Redlock: too few instances agreed. Attributes: ``command``, ``agreed``, ``needed``,
    ``total``."""


class TlsError(Error, ConnectionError):
    """The TLS handshake with Redis failed. Attributes: ``server``."""


class NotReplicated(Error):
    """The grant was not acknowledged by enough replicas and was given back.

    Attributes: ``server``, ``acknowledged``, ``wanted``."""


class AuthFailed(Error):
    """Redis refused the credentials. Attributes: ``server``."""


class PermissionDenied(Error):
    """The ACL user lacks a permission fencelock needs.

    Attributes: ``server``, ``command``, ``rule`` (the ACL rule that would allow it)."""


class RedisError(Error):
    """Redis refused a command. Attributes: ``server``, ``command``."""


class WrongType(Error):
    """A key of the lock holds something that is not a fencelock lock; it was left untouched.

    Attributes: ``key``, ``found``."""


class Fenced(Error):
    """A fenced write was refused: a newer fence was accepted by the resource.

    Attributes: ``resource``, ``fence`` (the refused one), ``accepted`` (the newer one)."""


class FencedWrongType(Error):
    """A fenced write's key holds another type; nothing was written.

    Attributes: ``resource``, ``key``, ``found``."""


class Conflict(Error):
    """The request conflicts with the lock's state.

    Attributes: ``conflict``: ``other_kind`` (the name is in use as another kind of lock),
    ``permits_mismatch``, ``upgrade`` (read to write), ``write_reentry`` or
    ``reentry_limit``."""


class RandomSource(Error):
    """The operating system's random source failed; no owner token could be made.

    Attributes: ``reason``."""


class Unsupported(Error):
    """The deployment cannot do what was asked. Attributes: ``reason``."""
