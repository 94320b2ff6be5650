"""The Memory Store API's rules as pure code, shared by the client and the
server so the two cannot drift apart; nothing here does I/O (see
docs/design.md for its modules). It re-exports what it imports."""

# mypy: implicit-reexport
# ruff: noqa: F401

from __future__ import annotations

from ._modes import Confirmation, Deletions, Outcome
from ._paths import (
    MARKER_NAME,
    MARKER_PATH,
    MAX_NAME_BYTES,
    MAX_PATH_BYTES,
    MAX_PATH_SEGMENTS,
    check_name,
    is_ancestor,
    join_path,
    listed_path_problem,
    marker_content,
    normalize_path,
    normalize_prefix,
    parent_path,
    path_segments,
    slugify,
)
from ._session import (
    ACCESS_READ_ONLY,
    ACCESS_READ_WRITE,
    MAX_STORES_PER_SESSION,
    STORE_ID_FORM,
    Resource,
    WorkItem,
    check_store_id,
    encode_work_item_secret,
    parse_resources,
    parse_work_item,
    parse_work_item_secret,
    session_id_problem,
    shown_store_id,
    store_id_problem,
)
from ._wire import (
    ANTHROPIC_VERSION,
    ANTHROPIC_VERSIONS,
    BETA,
    DEFAULT_API_URL,
    MAX_CONTENT_BYTES,
    MAX_MEMORIES,
    OLD_BETA,
    SERVE_DEFAULT_HOST,
    SERVE_DEFAULT_PORT,
    SERVE_TOKEN_ENV,
    SESSIONS_BETA,
    STATUS_ERRORS_BY_STATUS,
    STATUS_ERRORS_BY_TYPE,
    ActorType,
    AuthHeader,
    CreatedSession,
    Memory,
    MemoryPrefix,
    MemoryStore,
    MemoryVersion,
    Page,
    Session,
    SessionResource,
    VersionOperation,
    View,
    content_sha256,
    error_class,
    error_envelope,
    parse_error_envelope,
)
