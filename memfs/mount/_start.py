"""What a mount's start says when the API refuses it outright, in one
sentence each: a refused token names where it came from (never the token),
and a 404 from a URL that ends in `/v1` names the base URL to give instead
(memfs adds `/v1/...` itself). The supervisor says the same when its own
requests meet them first."""

from __future__ import annotations

from urllib.parse import urlsplit

from .._exceptions import AuthenticationFailed, NotFound, StoreError


def base_url_without_v1(api_url: str) -> str | None:
    """`api_url` without a trailing `/v1` path segment; None when it has none."""
    url = api_url.rstrip("/")
    if urlsplit(url).path.endswith("/v1"):
        return url[: -len("/v1")]
    return None


def start_refusal(error: StoreError, *, api_url: str, credential_source: str) -> str | None:
    """The sentence for `error` met at a mount's start, when it is a refusal
    no later attempt can mend; None for any other error."""
    if isinstance(error, AuthenticationFailed):
        source = f" from {credential_source}" if credential_source else ""
        return (
            f"the API at {api_url} refused the token{source} (401): give a valid token "
            "for this API URL"
        )
    if isinstance(error, NotFound):
        base = base_url_without_v1(api_url)
        if base is not None:
            return f"the API URL {api_url} looks like it includes /v1: give the base URL, {base}"
    return None
