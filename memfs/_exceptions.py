"""Every exception memfs raises, in one tree.

Each layer raises its own branch; only `fs` maps them to errno values, and
only the CLI to exit statuses and sentences. The tree::

    MemfsError                       anything memfs itself raises
    ├── UsageError                   bad input from the person or the host
    │   ├── InvalidPath              a memory path the contract forbids (api)
    │   ├── InvalidSecret            a work item secret that does not decode (api)
    │   ├── InvalidResources         a resources array that is not the contract's (api)
    │   ├── InvalidStoreId           a store id that is not the API's form (api)
    │   ├── InvalidWorkItem          a work item that is not a session's, or not one at all (api)
    │   └── ConfigError              a flag, file or environment value memfs cannot use
    ├── StoreError                   the Memory Store API said no, or could not be reached (client)
    │   ├── TransportError           no answer after every retry: DNS, refused, reset, timeout
    │   └── StatusError              an error answer; `.status`, `.type`, `.message`, `.request_id`
    │       ├── InvalidRequest           400 invalid_request_error
    │       ├── AuthenticationFailed     401 authentication_error
    │       ├── BillingError             402 billing_error (the hosted API; treated like 403)
    │       ├── PermissionDenied         403 permission_error
    │       ├── NotFound                 404 not_found_error
    │       ├── PreconditionFailed       409 memory_precondition_failed_error
    │       ├── PathConflict             409 memory_path_conflict_error
    │       ├── Conflict                 409 conflict_error (any other conflicting change)
    │       ├── RequestTooLarge          413 request_too_large
    │       ├── RateLimited              429 rate_limit_error
    │       ├── ServerError              500 api_error (and any other 5xx)
    │       │   └── GatewayTimeout       504 timeout_error
    │       └── Overloaded               529 overloaded_error
    ├── CacheError                   the local cache refused an operation (cache)
    │   ├── NoSuchEntry              no file or folder at that path
    │   ├── EntryExists              something already stands at that path
    │   ├── NotADirectory            a file where a folder was needed
    │   ├── IsADirectory             a folder where a file was needed
    │   ├── DirectoryNotEmpty        rmdir or rename over a folder with entries
    │   ├── InvalidMove              a folder moved into itself
    │   ├── FileTooLarge             the content would pass 102,400 bytes
    │   ├── NameTooLong              a name over 255 bytes, a path over 1,024 or deeper than 20 names
    │   ├── StoreFull                a new file past the store's 2,000 memories
    │   ├── ContentUnavailable       content not cached and the store cannot be reached
    │   ├── CacheCorrupt             the journal or a content in it is unusable
    │   ├── CacheDiskFull            the cache's disk is full: a change could not be kept
    │   ├── ConflictCopyFailed       a conflict copy could not be written whole and durably
    │   │                            (the local version stays, its replacement waits)
    │   ├── CacheInUse               another process of the store holds the cache
    │   └── CacheLayoutRefused       a cache folder of a layout no release wrote
    └── MountError                   a store could not be mounted or unmounted, or reached (mount, supervisor, control)
        └── SyncError                a sync pass, or a request for one, failed (sync, control)
"""

from __future__ import annotations

from typing import Any


class MemfsError(Exception):
    """Base of everything memfs raises. `str()` is one readable sentence."""


class UsageError(MemfsError):
    """Bad input from a person or the host: the CLI exits 2 with the sentence."""


class InvalidPath(UsageError): ...


class InvalidSecret(UsageError): ...


class InvalidResources(UsageError): ...


class InvalidStoreId(UsageError): ...


class InvalidWorkItem(UsageError): ...


class ConfigError(UsageError): ...


class StoreError(MemfsError): ...


class TransportError(StoreError): ...


STATUS_ERRORS: list[type[StatusError]] = []
"""Every error answer the contract lists, one class a type, in the order defined."""


class StatusError(StoreError):
    """An error answer from the API, with the fields of its error envelope."""

    status: int = 0
    error_type: str = ""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        error_type: str | None = None,
        request_id: str | None = None,
        extra: dict[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status or self.status
        self.error_type = error_type or self.error_type
        self.request_id = request_id
        self.extra = dict(extra or {})
        self.retry_after = retry_after

    def __init_subclass__(cls, *, status: int, error_type: str) -> None:
        cls.status, cls.error_type = status, error_type
        STATUS_ERRORS.append(cls)

    @property
    def type(self) -> str:
        return self.error_type

    def __str__(self) -> str:
        return f"{self.message} ({self.status} {self.error_type})"


class InvalidRequest(StatusError, status=400, error_type="invalid_request_error"): ...


class AuthenticationFailed(StatusError, status=401, error_type="authentication_error"): ...


class BillingError(StatusError, status=402, error_type="billing_error"): ...


class PermissionDenied(StatusError, status=403, error_type="permission_error"): ...


class NotFound(StatusError, status=404, error_type="not_found_error"): ...


class PreconditionFailed(
    StatusError, status=409, error_type="memory_precondition_failed_error"
): ...


class PathConflict(StatusError, status=409, error_type="memory_path_conflict_error"):
    @property
    def conflicting_memory_id(self) -> str | None:
        return self.extra.get("conflicting_memory_id")

    @property
    def conflicting_path(self) -> str | None:
        return self.extra.get("conflicting_path")


class Conflict(StatusError, status=409, error_type="conflict_error"): ...


class RequestTooLarge(StatusError, status=413, error_type="request_too_large"): ...


class RateLimited(StatusError, status=429, error_type="rate_limit_error"): ...


class ServerError(StatusError, status=500, error_type="api_error"): ...


class GatewayTimeout(ServerError, status=504, error_type="timeout_error"): ...


class Overloaded(StatusError, status=529, error_type="overloaded_error"): ...


class CacheError(MemfsError): ...


class NoSuchEntry(CacheError): ...


class EntryExists(CacheError): ...


class NotADirectory(CacheError): ...


class IsADirectory(CacheError): ...


class DirectoryNotEmpty(CacheError): ...


class InvalidMove(CacheError): ...


class FileTooLarge(CacheError): ...


class NameTooLong(CacheError): ...


class StoreFull(CacheError): ...


class ContentUnavailable(CacheError): ...


class CacheCorrupt(CacheError): ...


class CacheDiskFull(CacheError): ...


class ConflictCopyFailed(CacheError): ...


class CacheInUse(CacheError): ...


class CacheLayoutRefused(CacheError): ...


class MountError(MemfsError): ...


class SyncError(MountError): ...
