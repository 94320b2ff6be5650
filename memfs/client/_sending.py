"""Sending one call of the client: its attempts and the waits between them
(as docs/client.md says), what they cost, and the one place where httpx's
exceptions and error answers become memfs's exception tree."""

from __future__ import annotations

import errno
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

from .._exceptions import StatusError, StoreError, TransportError
from ..api import parse_error_envelope

log = logging.getLogger("memfs.client")

HttpMethod = Literal["GET", "POST", "DELETE"]


class Request(TypedDict, total=False):
    """`headers` are added to (or replace) the client's own."""

    params: dict[str, str] | None
    json: Any
    headers: dict[str, str] | None


RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504, 529})
_NEVER_RETRIED = (httpx.UnsupportedProtocol, httpx.InvalidURL)
START_ATTEMPT_TIMEOUT = 5.0
"""Seconds one attempt waits while a mount's start waits for the API."""


@dataclass
class ClientStats:
    """Attempts, by method and by (client method, status or "transport_error");
    calls by client method; answers by status (0: none); bodies' bytes."""

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
    max_retries: int = 6
    backoff_base: float = 0.2
    backoff_max: float = 10.0

    def delay(self, attempt: int, retry_after: float | None) -> float:
        """What the answer asked for (at most three times `backoff_max`), else
        full jitter up to `backoff_base * 2**attempt`, capped at `backoff_max`."""
        if retry_after is not None:
            return min(retry_after, self.backoff_max * 3)
        return random.uniform(0, min(self.backoff_max, self.backoff_base * 2**attempt))


def should_retry(response: httpx.Response) -> bool:
    if response.status_code < 400:
        return False
    header: str = response.headers.get("x-should-retry", "").strip().lower()
    if header in ("true", "false"):
        return header == "true"
    return response.status_code in RETRY_STATUSES


def _causes(exc: BaseException) -> list[BaseException]:
    """The exception, its causes and contexts, and the members of any group
    among them (trio reports failed connection attempts as a group)."""
    seen: list[BaseException] = []
    stack: list[BaseException | None] = [exc]
    while stack:
        current = stack.pop()
        if current is None or any(current is s for s in seen):
            continue
        seen.append(current)
        if isinstance(current, BaseExceptionGroup):
            stack.extend(current.exceptions)
        stack.extend([current.__cause__, current.__context__])
    return seen


def transport_reason(exc: BaseException, timeout: float) -> str:
    """A few words saying why no answer came, for a person to read."""
    if isinstance(exc, httpx.ConnectTimeout):
        return "the connection timed out"
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {timeout:g} s"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the connection closed before a whole answer came"
    if isinstance(exc, httpx.UnsupportedProtocol):
        return "the URL's scheme is not http or https"
    for cause in _causes(exc):
        if isinstance(cause, OSError) and cause.errno is not None:
            if cause.errno == errno.ECONNREFUSED:
                return "connection refused"
            if cause.errno == errno.ECONNRESET:
                return "connection reset"
            return (cause.strerror or str(cause)).lower()
    text = str(exc).lower()
    if "refused" in text or "all connection attempts failed" in text:
        return "connection refused"
    if "name or service not known" in text or "nodename nor servname" in text:
        return "the host name does not resolve"
    if isinstance(exc, httpx.ConnectError):
        return "cannot connect"
    if isinstance(exc, (httpx.ReadError, httpx.WriteError)):
        return "the connection was reset"
    return str(exc) or type(exc).__name__


def retry_after_seconds(response: httpx.Response) -> float | None:
    """`retry-after-ms` when it is a number, else `retry-after` (seconds)."""
    for name, unit in (("retry-after-ms", 1000), ("retry-after", 1)):
        try:
            number = float(response.headers.get(name, "nan"))
        except ValueError:
            continue
        if not math.isnan(number):
            return max(0.0, number) / unit
    return None


def transport_error(
    exc: BaseException, base_url: str, timeout: float, attempts: int = 1
) -> TransportError:
    """An httpx exception as a TransportError naming the URL and the reason."""
    tries = f" (after {attempts} attempts)" if attempts > 1 else ""
    return TransportError(f"cannot reach {base_url}: {transport_reason(exc, timeout)}{tries}")


def status_error(response: httpx.Response) -> StatusError:
    """An error answer as the StatusError its envelope stands for."""
    try:
        body: Any = response.json()
    except (ValueError, UnicodeDecodeError):
        body = None
    return parse_error_envelope(
        response.status_code,
        body,
        request_id=response.headers.get("request-id"),
        reason_phrase=response.reason_phrase,
        retry_after=retry_after_seconds(response),
    )


@dataclass
class StartWait:
    """A mount's start: the first answer is awaited at most `within` seconds."""

    within: float
    announce: Callable[[str], None]
    made: int = 0
    deadline: float | None = None
    over: bool = False
    """The API answered, or the bound was reached."""

    @property
    def attempts(self) -> int:
        return max(1, math.ceil(self.within / START_ATTEMPT_TIMEOUT))

    def attempt_timeout(self) -> float:
        if self.deadline is None:
            self.deadline = time.monotonic() + self.within
        return max(0.05, min(START_ATTEMPT_TIMEOUT, self.deadline - time.monotonic()))


@dataclass
class Answer:
    response: httpx.Response
    attempts: int


@dataclass(eq=False)
class Sender:
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
        self, operation: str, method: HttpMethod, url: str, **request: Unpack[Request]
    ) -> Answer:
        """Send one call, retrying what may be retried: the final answer, or
        TransportError when the last attempt got none."""
        self.stats.by_operation[operation] += 1
        attempt = 0
        sent = False
        while True:
            start = self.start if self.start is not None and not self.start.over else None
            timeout = start.attempt_timeout() if start is not None else None
            try:
                response = await self._attempt(operation, method, url, request, sent, timeout)
            except (httpx.HTTPError, httpx.InvalidURL) as e:
                sent = True
                if start is not None and timeout is not None:
                    await self._wait_at_start(start, e, timeout)
                    continue  # the start's attempts are not the call's retries
                if attempt >= self.policy.max_retries or isinstance(e, _NEVER_RETRIED):
                    raise transport_error(e, self.base_url, self.timeout, attempt + 1)
                reason = transport_reason(e, self.timeout)
                slow = isinstance(e, httpx.TimeoutException)
                await self._wait(attempt, None, f"{method} {url}: {reason}", slow)
            else:
                sent = True
                if start is not None:
                    start.over = True
                if attempt >= self.policy.max_retries or not should_retry(response):
                    return Answer(response, attempt + 1)
                retry_after = retry_after_seconds(response)
                what = f"{method} {url} answered {response.status_code}"
                await self._wait(attempt, retry_after, what, False)
            attempt += 1

    async def _attempt(
        self,
        operation: str,
        method: HttpMethod,
        url: str,
        request: Request,
        retry: bool,
        timeout: float | None,
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
                **request,
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
        elapsed = (time.monotonic() - started) * 1000
        log.debug("%s %s -> %d in %.1f ms", method, url, response.status_code, elapsed)
        return response

    async def _wait(self, attempt: int, retry_after: float | None, what: str, slow: bool) -> None:
        """`slow`: a whole timeout went by without an answer, which is said as a warning."""
        delay = self.policy.delay(attempt, retry_after)
        if slow:
            log.warning("%s; retrying in %.2f s", what, delay, extra={"event": "api_unanswered"})
        else:
            log.info("%s; retrying in %.2f s", what, delay)
        await trio.sleep(delay)

    async def _wait_at_start(self, start: StartWait, exc: BaseException, timeout: float) -> None:
        """Announce an attempt of a mount's start that got no answer and wait;
        TransportError once the attempts or the bound are used up."""
        start.made += 1
        reason = transport_reason(exc, round(timeout, 1))
        assert start.deadline is not None
        left = start.deadline - time.monotonic()
        if start.made >= start.attempts or left <= 0.05 or isinstance(exc, _NEVER_RETRIED):
            start.over = True
            raise TransportError(
                f"cannot reach the API at {self.base_url}: {reason}; gave up after "
                f"{start.made} attempts in {start.within - left:.0f} s "
                f"(start-timeout {start.within:g} s)"
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
            raise status_error(response)
        try:
            return response.json()
        except (ValueError, UnicodeDecodeError):
            raise StoreError(
                f"the store at {self.base_url} answered {response.status_code}"
                " with a body that is not JSON"
            )
