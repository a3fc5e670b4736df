"""fencelock's exceptions: one class per kind of failure, each with the lock's name.

Every exception is a :class:`fencelock.Error` and carries ``code`` (the library's stable code
for the kind: ``busy``, ``timed_out``, ...), ``lock`` (the lock's name, or ``None`` for a
configuration error) and the fields of its kind as attributes. Messages name
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
    "ClientClosed",
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
    "SqlError",
    "Unsupported",
]


class Error(Exception):
    """The base of every fencelock exception.

    Attributes:
        lock: the lock (or, for a fenced write, the resource) the error is about.
    """

    lock: Optional[str]
    #: The error's stable code (the library's ``Error::code``): what a program matches on.
    code: str = "error"

    def __new__(cls, message: str, **fields: Any) -> "Error":
        return super().__new__(cls, message)

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(message)
        self.lock = fields.pop("lock", None)
        code = fields.pop("code", None)
        if code is not None and code != type(self).code:
            self.code = code
        for name, value in fields.items():
            setattr(self, name, value)

    def __reduce__(self) -> Any:
        return (_rebuild, (type(self), str(self), dict(self.__dict__)))


def _rebuild(cls: type, message: str, fields: dict) -> Error:
    return cls(message, **fields)


class InvalidArgument(Error, ValueError):
    """A bad argument (a name, a lease, a wait), refused before anything was sent.

    Attributes: ``reason``."""

    code = "invalid_argument"


class ClientClosed(InvalidArgument):
    """A call on a closed client (``close()``, ``aclose()``, the end of its ``with`` block), or
    on anything made from it, or a wait that its closing ended. Its code is ``closed`` (the
    library's ``Error::Closed``); it is an :class:`InvalidArgument` (the client is no longer a
    valid argument, as a closed file is not), and ``reason`` is ``"closed"``."""

    code = "closed"


class ConfigError(Error, ValueError):
    """A bad client configuration (a URL, a TLS file, an option). Attributes: ``reason``."""

    code = "config"


class TimedOut(Error, TimeoutError):
    """The wait for the lock ran out. Attributes: ``waited`` (seconds)."""

    code = "timed_out"


class Busy(Error):
    """The lock is held by another owner and the request did not wait (``wait=0``).

    Attributes: ``remaining`` (seconds left on the holder's lease, if known)."""

    code = "busy"


class NotHeld(Error):
    """The lock is no longer held by this guard.

    Attributes: ``reason``: ``not_owner``, ``expired``, ``max_hold_reached`` or
    ``released`` (the library's ``LostReason::code``)."""

    code = "not_held"


class NotLeader(Error):
    """This process no longer leads the election (a proclaim after losing it).

    Attributes: ``election``, ``term`` (the refused leadership's), ``current`` (the election's
    term now, if someone leads)."""

    code = "not_leader"


class Unreachable(Error, ConnectionError):
    """Redis could not be reached, or did not answer in time.

    Attributes: ``server``, ``hint`` (what to check, when fencelock can tell)."""

    code = "unreachable"


class NoQuorum(Error):
    """Redlock: too few instances agreed. Attributes: ``command``, ``agreed``, ``needed``,
    ``total``."""

    code = "no_quorum"


class TlsError(Error, ConnectionError):
    """The TLS handshake with Redis failed. Attributes: ``server``."""

    code = "tls"


class NotReplicated(Error):
    """The grant was not acknowledged by enough replicas and was given back.

    Attributes: ``server``, ``acknowledged``, ``wanted``."""

    code = "not_replicated"


class AuthFailed(Error):
    """Redis refused the credentials. Attributes: ``server``."""

    code = "auth_failed"


class PermissionDenied(Error):
    """The ACL user lacks a permission fencelock needs.

    Attributes: ``server``, ``command``, ``rule`` (the ACL rule that would allow it)."""

    code = "permission_denied"


class RedisError(Error):
    """Redis refused a command. Attributes: ``server``, ``command``."""

    code = "redis"


class WrongType(Error):
    """A key of the lock holds something that is not a fencelock lock; it was left untouched.

    Attributes: ``key``, ``found``."""

    code = "wrong_type"


class Fenced(Error):
    """A fenced write was refused: a newer fence was accepted by the resource.

    Attributes: ``resource``, ``fence`` (the refused one), ``accepted`` (the newer one)."""

    code = "fenced"


class FencedWrongType(Error):
    """A fenced write's key holds another type; nothing was written.

    Attributes: ``resource``, ``key``, ``found``."""

    code = "fenced_wrong_type"


class Conflict(Error):
    """The request conflicts with the lock's state.

    Attributes: ``conflict``: ``other_kind`` (the name is in use as another kind of lock),
    ``permits_mismatch``, ``upgrade`` (read to write), ``write_reentry`` or
    ``reentry_limit``."""

    code = "conflict"


class RandomSource(Error):
    """The operating system's random source failed; no owner token could be made.

    Attributes: ``reason``."""

    code = "random_source"


class SqlError(Error):
    """PostgreSQL refused a fence check (the Rust library's ``postgres`` feature; the Python
    package does not raise it). Attributes: ``resource``."""

    code = "sql"


class Unsupported(Error):
    """The deployment cannot do what was asked. Attributes: ``reason``."""

    code = "unsupported"


def _by_code() -> dict:
    classes = {}
    for name in __all__:
        cls = globals()[name]
        # The base class is no code's class.
        if cls is not Error and "code" in vars(cls):
            classes[cls.code] = cls
    return classes


#: Each code of the library's vocabulary (``_native.ERROR_CODES``) to its class.
_BY_CODE = _by_code()
