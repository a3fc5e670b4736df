"""The options of every call, checked before the native module sees them: a wrong type, or a
name the call does not know, raises the package's :class:`fencelock.InvalidArgument` (for a
client's options, :class:`fencelock.ConfigError`) naming the option and the lock, not a
``TypeError`` of the native layer's. The native module checks the values (a negative wait,
zero permits)."""

from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional, Type

from .errors import ConfigError, Error, InvalidArgument


def _shown(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def _seconds(value: Any) -> Optional[str]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return None
    return f"must be a number of seconds (or None), not {_shown(value)}"


def _flag(value: Any) -> Optional[str]:
    return None if isinstance(value, bool) else f"must be True or False, not {_shown(value)}"


def _count(value: Any) -> Optional[str]:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0xFFFFFFFF:
        return None
    return f"must be a whole number, not {_shown(value)}"


def _text(value: Any) -> Optional[str]:
    return None if isinstance(value, str) else f"must be a string, not {_shown(value)}"


def _pem(value: Any) -> Optional[str]:
    if isinstance(value, (str, bytes, bytearray, os.PathLike)):
        return None
    return f"must be a path, or the PEM as bytes, not {_shown(value)}"


def _shortfall(value: Any) -> Optional[str]:
    return None if value in ("fail", "warn") else f'must be "fail" or "warn", not {_shown(value)}'


Check = Callable[[Any], Optional[str]]

#: A lock request's options (the native module has their defaults).
LOCK: Dict[str, Check] = {
    "ttl": _seconds,
    "wait": _seconds,
    "max_hold": _seconds,
    "auto_renew": _flag,
    "queue_timeout": _seconds,
    "permits": _count,
    "lock_delay": _seconds,
    "take": _count,
    "label": _text,
}
#: The plain lock's options (``client.lock``'s).
PLAIN: Dict[str, Check] = {
    option: LOCK[option] for option in ("ttl", "wait", "max_hold", "auto_renew", "lock_delay", "label")
}
#: The options that are counts (a whole number that fits 32 bits).
_COUNTS = frozenset(("permits", "take"))

#: A client's options.
CLIENT: Dict[str, Check] = {
    "key_prefix": _text,
    "command_timeout": _seconds,
    "instance_timeout": _seconds,
    "tls_ca": _pem,
    "tls_client_cert": _pem,
    "tls_client_key": _pem,
    "master_username": _text,
    "master_password": _text,
    "wait_for_replicas": _count,
    "replica_timeout": _seconds,
    "replica_shortfall": _shortfall,
}

#: The options of the other calls that take some.
MULTI = {"ttl": _seconds, "wait": _seconds, "label": _text}
def _tick(value: Any) -> Optional[str]:
    from ._values import Tick

    return None if isinstance(value, Tick) else f"must be a fencelock.Tick, not {_shown(value)}"


ONCE = {"lock": _text, "ttl": _seconds, "wait": _seconds, "label": _text, "keep": _seconds, "tick": _tick,
        "attempts": _count}
REENTRANT = {"max_reentry": _count}


def check(lock: Optional[str], options: Dict[str, Any], allowed: Dict[str, Check],
          error: Type[Error] = InvalidArgument) -> Dict[str, Any]:
    """``options`` if each is one of ``allowed`` and of its type (``None`` stands for the
    default); else ``error`` naming the first that is not."""
    for option, value in options.items():
        verdict: Optional[str]
        if option not in allowed:
            takes = f"the options: {', '.join(allowed)}" if allowed else "this call takes none"
            verdict = f"is not an option here ({takes})"
        elif value is None:
            continue
        else:
            verdict = allowed[option](value)
        if verdict is not None:
            reason = f"{option} {verdict}"
            if error is ConfigError:
                raise ConfigError(f"invalid fencelock configuration: {reason}", reason=reason, option=option)
            raise error(f"invalid argument for lock {lock!r}: {reason}", lock=lock, reason=reason, option=option)
    return options


def unknown(lock: Optional[str], options: Dict[str, Any], allowed: Dict[str, Check]) -> None:
    """Refuses ``options``, the keywords a call's signature did not take (a ``**`` catch-all,
    for :class:`fencelock.InvalidArgument` rather than Python's ``TypeError``), naming the
    first."""
    check(lock, options, allowed)


def name(value: Any, what: str = "name") -> str:
    """``value`` if it is a string, else :class:`fencelock.InvalidArgument`."""
    if not isinstance(value, str):
        reason = f"{what} must be a string, not {_shown(value)}"
        raise InvalidArgument(f"invalid argument: {reason}", lock=None, reason=reason, option=what)
    return value


#: The exact types each lock option's check lets through without a word (a bool is not a
#: number of seconds, nor a count): what a request made in a loop is checked against, with no
#: call per option; anything else goes through ``LOCK``'s checks, which name the option.
_NUMBER = frozenset((int, float))
_PLAIN_TYPES: Dict[str, Any] = {
    "ttl": _NUMBER, "wait": _NUMBER, "max_hold": _NUMBER, "lock_delay": _NUMBER,
    "queue_timeout": _NUMBER, "auto_renew": frozenset((bool,)), "permits": frozenset((int,)),
    "take": frozenset((int,)), "label": frozenset((str,)),
}


def lock_options(lock: str, options: Dict[str, Any]) -> Dict[str, Any]:
    """A lock request's options, checked, without those left as ``None`` (the native module's
    defaults)."""
    given = {}
    for option, value in options.items():
        if value is None:
            continue
        if type(value) not in _PLAIN_TYPES.get(option, ()) or (
            type(value) is int and option in _COUNTS and not 0 <= value <= 0xFFFFFFFF
        ):
            check(lock, options, LOCK)  # raises, naming the option
        given[option] = value
    return given
