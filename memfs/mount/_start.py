"""What a mount's start says when the API refuses it outright, in one
sentence: a refused token names where it came from (never the token), and a
404 from a URL that ends in `/v1` names the base URL to give instead. The
supervisor says the same when its own requests meet them first."""

from __future__ import annotations

from urllib.parse import urlsplit

from .._exceptions import AuthenticationFailed, NotFound, StoreError


def start_refusal(error: StoreError, *, api_url: str, credential_source: str) -> str | None:
    """The sentence for `error` met at a mount's start, when it is a refusal
    no later attempt can mend; None for any other error."""
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
