"""fencelock: fenced distributed locks on Redis, from Python.

The same locks as fencelock's Rust library and command-line tool, sharing one wire format
(``docs/PROTOCOL.md``): a lock taken here excludes a ``fencelock run`` job and a Rust holder,
and fences grow strictly across all three.

::

    import fencelock

    client = fencelock.Client("redis://127.0.0.1:6379")
    with client.lock("reports/nightly", ttl=10.0, wait=30.0) as guard:
        write_report(fence=guard.fence)      # a fence every write can be checked against
        if guard.lost.is_set():              # the lease was lost: stop
            ...

For asyncio, see :mod:`fencelock.aio`. The library's events go to Python's :mod:`logging`,
under the ``fencelock`` logger (set its level to see them: ``WARNING`` shows lost locks).
"""

from . import _native
from ._sync import (
    Client,
    Election,
    FencedStore,
    Guard,
    Leadership,
    LockRequest,
    MultiGuard,
    MultiLockRequest,
    Once,
    ReadWriteLock,
    ReentrantLock,
    ThreadingLock,
)
from ._values import Done, Gap, GaveUp, Holder, Leader, Listing, LockInfo, Ran, Tick, TooLate, Vacant, Waiter
from ._writes import Writes
from .errors import (
    AuthFailed,
    Busy,
    ClientClosed,
    ConfigError,
    Conflict,
    Error,
    Fenced,
    FencedWrongType,
    InvalidArgument,
    NoQuorum,
    NotHeld,
    NotLeader,
    NotReplicated,
    PermissionDenied,
    RandomSource,
    RedisError,
    SqlError,
    TimedOut,
    TlsError,
    Unreachable,
    Unsupported,
    WrongType,
)

__version__: str = _native.VERSION
#: The version of the wire format (docs/PROTOCOL.md) this package speaks.
PROTOCOL_VERSION: int = _native.PROTOCOL_VERSION

__all__ = [
    "Client",
    "FencedStore",
    "Guard",
    "LockRequest",
    "ReadWriteLock",
    "ReentrantLock",
    "ThreadingLock",
    "Writes",
    "Election",
    "Leadership",
    "Leader",
    "Vacant",
    "Gap",
    "LockInfo",
    "MultiLockRequest",
    "MultiGuard",
    "Once",
    "Done",
    "Ran",
    "Tick",
    "TooLate",
    "GaveUp",
    "Holder",
    "Waiter",
    "Listing",
    "NotLeader",
    "Error",
    "AuthFailed",
    "Busy",
    "ConfigError",
    "Conflict",
    "Fenced",
    "FencedWrongType",
    "InvalidArgument",
    "ClientClosed",
    "NoQuorum",
    "NotHeld",
    "NotReplicated",
    "PermissionDenied",
    "RandomSource",
    "RedisError",
    "SqlError",
    "TimedOut",
    "TlsError",
    "Unreachable",
    "Unsupported",
    "WrongType",
    "PROTOCOL_VERSION",
]
