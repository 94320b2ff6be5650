"""Sending one call of the client: the attempts, the waits between them and
what they cost.

A call is a pipeline of small steps: `call` → `exchange` (the attempts and
the waits) → one `httpx` request → `decode` (an error answer or a body that
is no JSON becomes an exception, `_errors`). What it promises:

- 408, 429, 500, 502, 503, 504, 529 and transport errors are retried with
  exponential backoff and full jitter, honouring `retry-after-ms` (preferred)
  or `retry-after`, up to `max_retries` times; 400, 401, 403, 404, 409 and
  413 never are. An answer's `x-should-retry: true|false` overrides that
  rule, as the SDKs let it. A URL httpx cannot send to is never retried.
- Every attempt is counted in `ClientStats`.
- With a `StartWait` (a mount's start), until the API first answers: each
  attempt waits at most `START_ATTEMPT_TIMEOUT`, every one that gets no
  answer is announced (the URL, why, attempt n of m), and all of them
  together take at most the start's bound; then a TransportError says so.
  After the first answer, or once the bound is reached, calls are sent as
  above.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal, TypedDict, Unpack

import httpx
import trio

from .._exceptions import StoreError, TransportError
from ._errors import error_from, retry_after_seconds, transport_reason

log = logging.getLogger("memfs.client")

HttpMethod = Literal["GET", "POST", "DELETE"]
"""The methods the Memory Store API uses."""


class Request(TypedDict, total=False):
    """What a call carries besides its method and URL: query parameters, a
    JSON body, and headers added to (or replacing) the client's own."""

    params: dict[str, str] | None
    json: Any
    headers: dict[str, str] | None


RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})

_NEVER_RETRIED = (httpx.UnsupportedProtocol, httpx.InvalidURL)
"""Errors no later attempt can mend: the URL itself is unusable."""


@dataclass
class ClientStats:
    """What the client sent: `requests` counts HTTP attempts (retries
    included), `retries` the attempts after the first, `by_method` attempts per
    HTTP method, `by_operation` calls per client method, `by_status` answers
    per status code (0 for no answer), `by_outcome` attempts per (client
    method, status code or "transport_error"), and `bytes_up` / `bytes_down`
    the request and answer bodies."""

    requests: int = 0
    retries: int = 0
    by_method: Counter[str] = field(default_factory=Counter)
    by_operation: Counter[str] = field(default_factory=Counter)
    by_status: Counter[int] = field(default_factory=Counter)
    by_outcome: Counter[tuple[str, str]] = field(default_factory=Counter)
    bytes_up: int = 0
    bytes_down: int = 0

    def reset(self) -> None:
        self.requests = self.retries = self.bytes_up = self.bytes_down = 0
        for counter in (self.by_method, self.by_operation, self.by_status, self.by_outcome):
            counter.clear()


@dataclass(frozen=True)
class RetryPolicy:
    """How often a call is retried and how long the waits between attempts are."""

    max_retries: int = 6
    backoff_base: float = 0.2
    backoff_max: float = 10.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """The wait before attempt `attempt + 1`: what the answer asked for
        (at most three times `backoff_max`), else full jitter up to
        `backoff_base * 2**attempt`, capped at `backoff_max`."""
        if retry_after is not None:
            return min(retry_after, self.backoff_max * 3)
        return random.uniform(0, min(self.backoff_max, self.backoff_base * 2**attempt))


def should_retry(response: httpx.Response) -> bool:
    """Whether an answer is worth another attempt: an error answer's
    `x-should-retry: true|false` decides, else its status is in RETRY_STATUSES."""
    if response.status_code < 400:
        return False
    header: str = response.headers.get("x-should-retry", "").strip().lower()
    if header in ("true", "false"):
        return header == "true"
    return response.status_code in RETRY_STATUSES


START_ATTEMPT_TIMEOUT = 5.0
"""Seconds one attempt waits for an answer while a mount's start waits for
the API: short, so that a silent API is reported within a few seconds."""


@dataclass
class StartWait:
    """A mount's start: the API's first answer is awaited at most `within`
    seconds in all, in attempts of at most `START_ATTEMPT_TIMEOUT` each, each
    attempt without an answer handed to `announce` as one sentence."""

    within: float
    announce: Callable[[str], None]
    made: int = 0
    """Attempts made so far, by every call sent meanwhile."""
    deadline: float | None = None
    over: bool = False
    """The API answered, or the bound was reached."""

    @property
    def attempts(self) -> int:
        """How many attempts fit in the bound."""
        return max(1, math.ceil(self.within / START_ATTEMPT_TIMEOUT))

    def attempt_timeout(self) -> float:
        if self.deadline is None:
            self.deadline = time.monotonic() + self.within
        return max(0.05, min(START_ATTEMPT_TIMEOUT, self.deadline - time.monotonic()))


@dataclass
class Answer:
    """The last HTTP answer of one call, and how many attempts it took."""

    response: httpx.Response
    attempts: int


@dataclass(eq=False)
class Sender:
    """Sends the client's calls through one httpx client (one connection pool)."""

    http: httpx.AsyncClient
    _: KW_ONLY
    base_url: str
    timeout: float
    policy: RetryPolicy
    stats: ClientStats
    start: StartWait | None = None

    async def call(
        self, operation: str, method: HttpMethod, url: str, **request: Unpack[Request]
    ) -> Any:
        """The decoded body of a successful answer; a StoreError otherwise."""
        return self.decode(await self.exchange(operation, method, url, **request))

    async def exchange(
        self,
        operation: str,
        method: HttpMethod,
        url: str,
        *,
        params: dict[str, str] | None = None,
        json: Any = None,
        headers: dict[str, str] | None = None,
    ) -> Answer:
        """Send one call, retrying what may be retried. `headers` are added to
        (or replace) the client's own for this call.

        Returns the final answer (a success, an answer that is not retried, or
        the last retryable one once retries ran out); raises TransportError
        when the last attempt got no answer at all.
        """
        self.stats.by_operation[operation] += 1
        attempt = 0
        sent = False
        while True:
            start = self.start if self.start is not None and not self.start.over else None
            timeout = start.attempt_timeout() if start is not None else None
            try:
                response = await self._attempt(
                    operation, method, url, params, json, headers, retry=sent, timeout=timeout
                )
            except (httpx.HTTPError, httpx.InvalidURL) as e:
                sent = True
                if start is not None and timeout is not None:
                    await self._wait_at_start(start, e, timeout)
                    continue  # the start's attempts are not the call's retries
                if attempt >= self.policy.max_retries or isinstance(e, _NEVER_RETRIED):
                    raise error_from(
                        exc=e, base_url=self.base_url, timeout=self.timeout, attempts=attempt + 1
                    )
                reason = transport_reason(e, self.timeout)
                await self._wait(attempt, None, f"{method} {url}: {reason}")
            else:
                sent = True
                if start is not None:
                    start.over = True
                if attempt >= self.policy.max_retries or not should_retry(response):
                    return Answer(response, attempt + 1)
                status = response.status_code
                retry_after = retry_after_seconds(response)
                await self._wait(attempt, retry_after, f"{method} {url} answered {status}")
            attempt += 1

    async def _attempt(
        self,
        operation: str,
        method: HttpMethod,
        url: str,
        params: dict[str, str] | None,
        json: Any,
        headers: dict[str, str] | None,
        *,
        retry: bool,
        timeout: float | None = None,
    ) -> httpx.Response:
        """One HTTP request, counted; `timeout` replaces the client's own."""
        if retry:
            self.stats.retries += 1
        self.stats.requests += 1
        self.stats.by_method[method] += 1
        started = time.monotonic()
        try:
            response = await self.http.request(
                method,
                url,
                params=params,
                json=json,
                headers=headers,
                timeout=httpx.USE_CLIENT_DEFAULT if timeout is None else timeout,
            )
        except (httpx.HTTPError, httpx.InvalidURL):
            self.stats.by_status[0] += 1
            self.stats.by_outcome[(operation, "transport_error")] += 1
            raise
        self.stats.by_status[response.status_code] += 1
        self.stats.by_outcome[(operation, str(response.status_code))] += 1
        self.stats.bytes_up += len(response.request.content)
        self.stats.bytes_down += len(response.content)
        log.debug(
            "%s %s -> %d in %.1f ms",
            method,
            url,
            response.status_code,
            (time.monotonic() - started) * 1000,
        )
        return response

    async def _wait(self, attempt: int, retry_after: float | None, what: str) -> None:
        delay = self.policy.delay(attempt, retry_after)
        log.info("%s; retrying in %.2f s", what, delay)
        await trio.sleep(delay)

    async def _wait_at_start(self, start: StartWait, exc: BaseException, timeout: float) -> None:
        """After an attempt of a mount's start that got no answer: announce it
        and wait before the next one; TransportError once the attempts or the
        bound are used up (or the URL is unusable)."""
        start.made += 1
        reason = transport_reason(exc, round(timeout, 1))
        assert start.deadline is not None
        left = start.deadline - time.monotonic()
        if start.made >= start.attempts or left <= 0.05 or isinstance(exc, _NEVER_RETRIED):
            start.over = True
            waited = start.within - left
            raise TransportError(
                f"cannot reach the API at {self.base_url}: {reason}; gave up after "
                f"{start.made} attempts in {waited:.0f} s (start-timeout {start.within:g} s)"
            )
        start.announce(
            f"waiting for the API at {self.base_url}: {reason} "
            f"(attempt {start.made} of {start.attempts})"
        )
        await trio.sleep(min(self.policy.delay(start.made - 1, None), left))

    def decode(self, answer: Answer) -> Any:
        """The JSON body of a success; the error answer as its exception."""
        response = answer.response
        if response.status_code >= 400 or response.status_code < 200:
            raise error_from(response=response, attempts=answer.attempts)
        try:
            return response.json()
        except (ValueError, UnicodeDecodeError):
            raise StoreError(
                f"the store at {self.base_url} answered {response.status_code} with a body that is not JSON"
            )
