"""The Memory Store API's rules as pure code, shared by the client and the
server so the two cannot drift apart; nothing here does I/O (see
docs/design.md for its modules). Here too, memfs's own modes that layers
from the command line down to the sync name between them, so that
memfs.control, which carries them, need not load the sync."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from ._paths import MARKER_NAME as MARKER_NAME
from ._paths import MARKER_PATH as MARKER_PATH
from ._paths import MAX_NAME_BYTES as MAX_NAME_BYTES
from ._paths import MAX_PATH_BYTES as MAX_PATH_BYTES
from ._paths import MAX_PATH_SEGMENTS as MAX_PATH_SEGMENTS
from ._paths import check_name as check_name
from ._paths import is_ancestor as is_ancestor
from ._paths import join_path as join_path
from ._paths import listed_path_problem as listed_path_problem
from ._paths import marker_content as marker_content
from ._paths import normalize_path as normalize_path
from ._paths import normalize_prefix as normalize_prefix
from ._paths import parent_path as parent_path
from ._paths import path_segments as path_segments
from ._paths import slugify as slugify
from ._session import ACCESS_READ_ONLY as ACCESS_READ_ONLY
from ._session import ACCESS_READ_WRITE as ACCESS_READ_WRITE
from ._session import MAX_STORES_PER_SESSION as MAX_STORES_PER_SESSION
from ._session import STORE_ID_FORM as STORE_ID_FORM
from ._session import Resource as Resource
from ._session import WorkItem as WorkItem
from ._session import check_store_id as check_store_id
from ._session import encode_work_item_secret as encode_work_item_secret
from ._session import parse_resources as parse_resources
from ._session import parse_work_item as parse_work_item
from ._session import parse_work_item_secret as parse_work_item_secret
from ._session import session_id_problem as session_id_problem
from ._session import shown_store_id as shown_store_id
from ._session import store_id_problem as store_id_problem
from ._wire import ANTHROPIC_VERSION as ANTHROPIC_VERSION
from ._wire import ANTHROPIC_VERSIONS as ANTHROPIC_VERSIONS
from ._wire import BETA as BETA
from ._wire import DEFAULT_API_URL as DEFAULT_API_URL
from ._wire import MAX_CONTENT_BYTES as MAX_CONTENT_BYTES
from ._wire import MAX_MEMORIES as MAX_MEMORIES
from ._wire import OLD_BETA as OLD_BETA
from ._wire import SERVE_DEFAULT_HOST as SERVE_DEFAULT_HOST
from ._wire import SERVE_DEFAULT_PORT as SERVE_DEFAULT_PORT
from ._wire import SERVE_TOKEN_ENV as SERVE_TOKEN_ENV
from ._wire import SESSIONS_BETA as SESSIONS_BETA
from ._wire import ActorType as ActorType
from ._wire import AuthHeader as AuthHeader
from ._wire import CreatedSession as CreatedSession
from ._wire import Memory as Memory
from ._wire import MemoryPrefix as MemoryPrefix
from ._wire import MemoryStore as MemoryStore
from ._wire import MemoryVersion as MemoryVersion
from ._wire import Page as Page
from ._wire import Session as Session
from ._wire import SessionResource as SessionResource
from ._wire import VersionOperation as VersionOperation
from ._wire import View as View
from ._wire import content_sha256 as content_sha256
from ._wire import error_class as error_class
from ._wire import error_envelope as error_envelope
from ._wire import parse_error_envelope as parse_error_envelope


class Deletions(enum.StrEnum):
    """What a local delete does in the store (`--sync-deletions`)."""

    ENABLED = "enabled"
    LOG_ONLY = "log_only"
    DISABLED = "disabled"


class Outcome(enum.StrEnum):
    SAVED = "saved"
    REFUSED = "refused"
    NOT_CONFIRMED = "not_confirmed"
    OVERRULED = "overruled"


@dataclass(frozen=True)
class Confirmation:
    """What became of one file `memfs sync FILE` named, field for field an
    object of `memfs sync FILE --json` (there `path` is the path as the user
    gave it; in the store process, the memory path)."""

    path: str
    outcome: str
    """An `Outcome`'s word."""
    memory_id: str | None = None
    sha256: str | None = None
    """Of what the store holds."""
    reason: str | None = None
    """Why it was refused or not confirmed."""
    kept_copy: str | None = None
    """Where an overruled file's local edit is kept (an absolute path)."""
