# Type stubs of the native module (crates/fencelock-py/src). Users use fencelock and
# fencelock.aio; this module is their implementation.
from typing import Any, Callable, List, Optional, Tuple

VERSION: str
PROTOCOL_VERSION: int

def _shutdown() -> None: ...

class Spec:
    name: str
    ttl: Optional[float]
    def __init__(
        self,
        kind: str,
        name: str,
        *,
        permits: int = 1,
        ttl: Optional[float] = None,
        wait: Optional[float] = None,
        queue_timeout: Optional[float] = None,
        max_hold: Optional[float] = None,
        auto_renew: bool = True,
        lock_delay: Optional[float] = None,
    ) -> None: ...

class Pending:
    def cancel(self) -> None: ...

Done = Callable[[bool, Any], None]

class Guard:
    name: str
    fence: int
    def is_held(self) -> bool: ...
    def remaining(self) -> float: ...
    def extend(self, ttl: float) -> None: ...
    def extend_async(self, ttl: float, done: Done) -> Pending: ...
    def release(self) -> bool: ...
    def release_async(self, done: Done) -> Pending: ...
    def lost_now(self) -> Optional[Tuple[str, str]]: ...
    def on_lost(self, callback: Callable[[str, str], None]) -> None: ...

class Reentrant:
    name: str
    def acquire(self, spec: Spec, try_only: bool = False) -> Optional[Guard]: ...
    def acquire_async(self, spec: Spec, done: Done, try_only: bool = False) -> Pending: ...

class Client:
    def __init__(
        self,
        topology: str,
        urls: List[str],
        master: Optional[str] = None,
        *,
        key_prefix: Optional[str] = None,
        command_timeout: Optional[float] = None,
        instance_timeout: Optional[float] = None,
        tls_ca_file: Optional[str] = None,
        tls_client_cert: Optional[str] = None,
        tls_client_key: Optional[str] = None,
        master_username: Optional[str] = None,
        master_password: Optional[str] = None,
    ) -> None: ...
    def server(self) -> str: ...
    def acquire(self, spec: Spec, try_only: bool = False) -> Optional[Guard]: ...
    def acquire_async(self, spec: Spec, done: Done, try_only: bool = False) -> Pending: ...
    def reentrant(self, name: str, max_reentry: Optional[int] = None) -> Reentrant: ...
    def fenced_apply(self, resource: str, fence: int, writes: List[tuple]) -> int: ...
    def fenced_apply_async(self, resource: str, fence: int, writes: List[tuple], done: Done) -> Pending: ...
    def fenced_accepted(self, resource: str) -> int: ...
