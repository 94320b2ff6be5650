"""The Memory Store API's rules as pure code, shared by the client and the server,
so the two cannot drift apart. Nothing here does I/O.

- `_paths`: path rules, slugs, the marker;
- `_wire`: headers and limits, the wire's words (views, operations, actor
  types) and the objects answers hold;
- `_envelope`: the error envelope, and which exception each refusal is;
- `_session`: what a session hands `memfs mount` (resources, the secret);
- `_ids`: the form of a store id, checked before it names anything on disk.
"""

from __future__ import annotations

from ._envelope import (
    STATUS_ERRORS_BY_STATUS,
    STATUS_ERRORS_BY_TYPE,
    error_class,
    error_envelope,
    parse_error_envelope,
)
from ._ids import (
    MAX_STORE_ID_LENGTH,
    STORE_ID_FORM,
    STORE_ID_PREFIX,
    check_store_id,
    shown_store_id,
    store_id_problem,
)
from ._paths import (
    MARKER_NAME,
    MARKER_PATH,
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    check_name,
    is_ancestor,
    join_path,
    listed_path_problem,
    marker_content,
    normalize_path,
    normalize_prefix,
    parent_path,
    slugify,
)
from ._session import (
    ACCESS_READ_ONLY,
    ACCESS_READ_WRITE,
    MAX_STORES_PER_SESSION,
    Resource,
    WorkItemSecret,
    parse_resources,
    parse_work_item_secret,
)
from ._wire import (
    ANTHROPIC_VERSION,
    BETA,
    DEFAULT_API_URL,
    MAX_CONTENT_BYTES,
    MAX_MEMORIES,
    OLD_BETA,
    SERVE_DEFAULT_HOST,
    SERVE_DEFAULT_PORT,
    SERVE_TOKEN_ENV,
    ActorType,
    AuthHeader,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    Page,
    VersionOperation,
    View,
    content_sha256,
)

__all__ = [
    "AuthHeader",
    "ACCESS_READ_ONLY",
    "ACCESS_READ_WRITE",
    "ANTHROPIC_VERSION",
    "BETA",
    "DEFAULT_API_URL",
    "MARKER_NAME",
    "MARKER_PATH",
    "MAX_CONTENT_BYTES",
    "MAX_MEMORIES",
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "MAX_STORES_PER_SESSION",
    "MAX_STORE_ID_LENGTH",
    "OLD_BETA",
    "SERVE_DEFAULT_HOST",
    "SERVE_DEFAULT_PORT",
    "SERVE_TOKEN_ENV",
    "STATUS_ERRORS_BY_STATUS",
    "STATUS_ERRORS_BY_TYPE",
    "STORE_ID_FORM",
    "STORE_ID_PREFIX",
    "ActorType",
    "Memory",
    "MemoryPrefix",
    "MemoryStore",
    "MemoryVersion",
    "Page",
    "Resource",
    "VersionOperation",
    "View",
    "WorkItemSecret",
    "check_name",
    "check_store_id",
    "content_sha256",
    "error_class",
    "error_envelope",
    "is_ancestor",
    "join_path",
    "listed_path_problem",
    "marker_content",
    "normalize_path",
    "normalize_prefix",
    "parent_path",
    "parse_error_envelope",
    "parse_resources",
    "parse_work_item_secret",
    "shown_store_id",
    "slugify",
    "store_id_problem",
]
