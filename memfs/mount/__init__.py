"""One store's mount: the store process that wires client, cache,
filesystem and sync loop (`python -m memfs.mount`), and the mount folder's
life. Importing this package loads neither pyfuse3 nor httpx.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from .._exceptions import AuthenticationFailed, NotFound, StoreError
from ._folder import MountEntry as MountEntry
from ._folder import force_unmount as force_unmount
from ._folder import is_stale_mount as is_stale_mount
from ._folder import memfs_mounts as memfs_mounts
from ._folder import mount_table as mount_table
from ._folder import mounted_source as mounted_source
from ._folder import remove_mount_folder as remove_mount_folder


def start_refusal(error: StoreError, *, api_url: str, credential_source: str) -> str | None:
    """The one sentence for `error` met at a mount's start (by the store
    process or the supervisor), when it is a refusal no later attempt can
    mend; None for any other error. A refused token names where it came from,
    never the token; a 404 from a URL ending in `/v1` names the base URL."""
    if isinstance(error, AuthenticationFailed):
        source = f" from {credential_source}" if credential_source else ""
        return (
            f"the API at {api_url} refused the token{source} (401): give a valid token "
            "for this API URL"
        )
    url = api_url.rstrip("/")
    if isinstance(error, NotFound) and urlsplit(url).path.endswith("/v1"):
        return f"the API URL {api_url} looks like it includes /v1: give the base URL, {url[:-3]}"
    return None
