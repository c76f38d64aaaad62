"""The HTTP client of trustmsg's producer API, synchronous (:class:`Client`)
and asyncio (:class:`AsyncClient`), on httpx.

Every producer call is idempotent on the server (the same prepare twice is a
200 with the same view, the same decision twice a 200), so a call whose answer
was lost is repeated safely: network errors and 5xx are retried with
exponential backoff and jitter. 4xx answers are final and never retried,
because repeating them cannot change the answer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import urllib.parse
import warnings
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Optional

import httpx

from . import _validate as v
from ._retry import RetryPolicy
from ._version import __version__
from .errors import (
    AlreadyRolledBackError,
    ConflictError,
    UnavailableError,
    UnexpectedResponseError,
    error_from_status,
)
from .message import Message, MessageStatus, MessageView, not_prepared_error

if TYPE_CHECKING:
    from .transaction import AsyncTransaction, Transaction

__all__ = ["AsyncClient", "Client"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 10.0
RETRIED_STATUSES = frozenset({500, 502, 503, 504})


class _Retry(Exception):
    """One attempt's passing failure: worth another try."""

    def __init__(
        self, message: str, status: Optional[int], code: Optional[str], retry_after: Optional[float]
    ):
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.retry_after = retry_after


class _Base:
    def __init__(
        self,
        base_url: str,
        biz_id: str,
        token: str,
        retry: Optional[RetryPolicy],
        raise_on_decided: bool = True,
    ) -> None:
        parsed = urllib.parse.urlsplit(base_url) if isinstance(base_url, str) else None
        if parsed is None or parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"{base_url!r} is not an http(s) base URL, e.g. http://127.0.0.1:8080")
        if not isinstance(token, str) or not token:
            raise ValueError("token must be the producer's bearer token (a non-empty str)")
        self._base = base_url.rstrip("/")
        self._biz_id = v.check_biz_id(biz_id)
        self._token = token
        self._retry = retry if retry is not None else RetryPolicy()
        if not raise_on_decided:
            warnings.warn(
                "raise_on_decided=False is deprecated: prepare raises AlreadyCommittedError, "
                "AlreadyRolledBackError or NotPreparedError for a message decided before; catch those",
                DeprecationWarning,
                stacklevel=4,
            )
        self._raise_on_decided = raise_on_decided

    @property
    def biz_id(self) -> str:
        """The producer's id."""
        return self._biz_id

    @property
    def base_url(self) -> str:
        return self._base

    def __repr__(self) -> str:
        return f"{type(self).__name__}(base_url={self._base!r}, biz_id={self._biz_id!r}, token='***')"

    def _headers(self, extra: Optional[dict[str, str]] = None) -> dict[str, str]:
        h = {"authorization": f"Bearer {self._token}", "user-agent": f"trustmsg-python/{__version__}"}
        if extra:
            h.update(extra)
        return h

    def _prepared(self, data: Any) -> MessageView:
        view = MessageView.from_json(data)
        if self._raise_on_decided:
            error = not_prepared_error(view, "it is not PREPARED, run no local work for it")
            if error is not None:
                raise error
        return view

    @staticmethod
    def _decided(data: Any, want: MessageStatus) -> MessageView:
        """A commit's or rollback's 200 is the message in the state asked
        for; any other state (an older trustmsg answering 200 with the
        opposite decision) is the refusal it stands for, raised."""
        view = MessageView.from_json(data)
        if view.status == want:
            return view
        what = f"{view.message_key!r} is {view.status}, not {want}"
        if view.status == MessageStatus.ROLLED_BACK:
            raise AlreadyRolledBackError(f"{what}: it was rolled back before", status=200, view=view)
        if view.status == MessageStatus.COMMITTED:
            raise ConflictError(f"{what}: it was committed before", code="already_committed", status=200)
        raise UnexpectedResponseError(f"{what} after the call", status=200)

    def _url(self, *segments: str) -> str:
        return self._base + "/" + "/".join(urllib.parse.quote(s, safe="") for s in segments)

    def _decision_body(self, message_key: str) -> bytes:
        body = {"biz_id": self._biz_id, "message_key": v.check_message_key(message_key)}
        return json.dumps(body).encode()

    @staticmethod
    def _answer(response: httpx.Response) -> Any:
        """The parsed body of a 2xx, or raises the final error / _Retry."""
        status = response.status_code
        if 200 <= status < 300:
            try:
                return response.json()
            except ValueError:
                raise UnexpectedResponseError(
                    f"the answer is not JSON: {response.text[:200]!r}", status=status
                ) from None
        code: Optional[str] = None
        message = ""
        try:
            body = response.json()
            code = body["error"]["code"]
            message = body["error"].get("message", "")
        except (ValueError, KeyError, TypeError, AttributeError):
            text = response.text.strip()[:200]
            message = f"HTTP {status}: {text}" if text else f"HTTP {status}"
        if status in RETRIED_STATUSES:
            retry_after: Optional[float] = None
            header = response.headers.get("retry-after", "").strip()
            if header.isdigit():
                retry_after = float(header)
            raise _Retry(message, status, code, retry_after)
        raise error_from_status(status, code, message)

    def _unavailable(self, last: _Retry, attempts: int) -> UnavailableError:
        return UnavailableError(last.message, attempts=attempts, status=last.status, code=last.code)


class Client(_Base):
    """A trustmsg producer over HTTP: its ``biz_id``, its bearer ``token`` and
    the service's ``base_url`` (a path prefix is kept).

    Thread-safe (httpx's pool is); use it as a context manager or call
    :meth:`close`. Redirects are never followed (the token must not travel
    elsewhere). ``http_client`` replaces the default httpx client (10 s
    timeout) for TLS settings, proxies and the like.

    >>> with Client("http://127.0.0.1:8080", "shop", "tm_...") as client:   # doctest: +SKIP
    ...     client.prepare(Message("order-42", "orders", b'{"order":42}'))
    ...     client.commit("order-42")
    """

    def __init__(
        self,
        base_url: str,
        biz_id: str,
        token: str,
        *,
        retry: Optional[RetryPolicy] = None,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: Optional[httpx.Client] = None,
        raise_on_decided: bool = True,
    ) -> None:
        super().__init__(base_url, biz_id, token, retry, raise_on_decided)
        self._own_http = http_client is None
        self._http = http_client or httpx.Client(timeout=timeout, follow_redirects=False)

    def close(self) -> None:
        if self._own_http:
            self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, t: Optional[type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()

    def prepare(self, message: Message) -> MessageView:
        """``POST /v1/messages/prepare``: stores the message as PREPARED.
        The same content again answers the same view while it is
        ``PREPARED``. A message decided before raises, so that no caller
        runs its local work for it by mistake: :class:`AlreadyCommittedError`
        (trustmsg answered 200 ``COMMITTED``; ``.view``),
        :class:`AlreadyRolledBackError` (409 ``already_rolled_back``, or
        ``rolled_back`` when the rollback came before any prepare),
        :class:`NotPreparedError` (``VERIFY_FAILED``). Other content under
        the same key is a :class:`ConflictError` (``prepare_conflict``).
        ``Client(..., raise_on_decided=False)`` (deprecated) returns the
        ``COMMITTED``/``VERIFY_FAILED`` view instead, as before 0.2."""
        body = json.dumps(message.to_request(self._biz_id)).encode()
        return self._prepared(
            self._call("POST", self._url("v1", "messages", "prepare"), body, message.trace_headers())
        )

    def commit(self, message_key: str) -> MessageView:
        """``POST /v1/messages/commit``: decides for delivery. Again is a 200;
        after a rollback an :class:`AlreadyRolledBackError` (``already_rolled_back``);
        for an unknown message a :class:`NotFoundError`."""
        return self._decided(
            self._call("POST", self._url("v1", "messages", "commit"), self._decision_body(message_key)),
            MessageStatus.COMMITTED,
        )

    def rollback(self, message_key: str) -> MessageView:
        """``POST /v1/messages/rollback``: decides against delivery. Again is
        a 200; after a commit a :class:`ConflictError` (``already_committed``)."""
        return self._decided(
            self._call("POST", self._url("v1", "messages", "rollback"), self._decision_body(message_key)),
            MessageStatus.ROLLED_BACK,
        )

    def get(self, message_key: str) -> MessageView:
        """``GET /v1/messages/{biz_id}/{message_key}``: the message as it is now."""
        url = self._url("v1", "messages", self._biz_id, v.check_message_key(message_key))
        return MessageView.from_json(self._call("GET", url, None))

    def transaction(
        self,
        message: Message,
        connection: object,
        *,
        after_local_commit: Optional[Callable[[], object]] = None,
        connect: Optional[Any] = None,
    ) -> Transaction[MessageView]:
        """The transaction helper: ``with client.transaction(message, conn) as tx:``
        prepares, runs the block in a local transaction of ``conn`` with the
        barrier marker (only when the message is PREPARED), then commits
        locally and in trustmsg. ``after_local_commit`` is called right after
        the local COMMIT, before the decision is sent (a test hook: raising
        there is a crash at the worst moment). See :class:`trustmsg.Transaction`."""
        from .transaction import Transaction

        return Transaction(self, message, connection, after_local_commit=after_local_commit, connect=connect)

    def _call(
        self, method: str, url: str, body: Optional[bytes], extra: Optional[dict[str, str]] = None
    ) -> Any:
        headers = self._headers(extra)
        if body is not None:
            headers["content-type"] = "application/json"
        attempt = 0
        while True:
            attempt += 1
            try:
                try:
                    response = self._http.request(method, url, content=body, headers=headers)
                except httpx.TransportError as e:
                    raise _Retry(f"{type(e).__name__}: {e}", None, None, None) from e
                return self._answer(response)
            except _Retry as r:
                if attempt > self._retry.max_retries:
                    raise self._unavailable(r, attempt) from r.__cause__
                delay = self._retry.delay(attempt - 1, r.retry_after)
                log.warning("%s %s failed (%s); retrying in %.2f s", method, url, r.message, delay)
                time.sleep(delay)


class AsyncClient(_Base):
    """The asyncio twin of :class:`Client`: the same calls, awaited.

    >>> async with AsyncClient("http://127.0.0.1:8080", "shop", "tm_...") as client:  # doctest: +SKIP
    ...     await client.prepare(Message("order-42", "orders", b"{}"))
    """

    def __init__(
        self,
        base_url: str,
        biz_id: str,
        token: str,
        *,
        retry: Optional[RetryPolicy] = None,
        timeout: float = DEFAULT_TIMEOUT,
        http_client: Optional[httpx.AsyncClient] = None,
        raise_on_decided: bool = True,
    ) -> None:
        super().__init__(base_url, biz_id, token, retry, raise_on_decided)
        self._own_http = http_client is None
        self._http = http_client or httpx.AsyncClient(timeout=timeout, follow_redirects=False)

    async def aclose(self) -> None:
        if self._own_http:
            await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, t: Optional[type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        await self.aclose()

    async def prepare(self, message: Message) -> MessageView:
        """See :meth:`Client.prepare`."""
        body = json.dumps(message.to_request(self._biz_id)).encode()
        return self._prepared(
            await self._call("POST", self._url("v1", "messages", "prepare"), body, message.trace_headers())
        )

    async def commit(self, message_key: str) -> MessageView:
        """See :meth:`Client.commit`."""
        return self._decided(
            await self._call("POST", self._url("v1", "messages", "commit"), self._decision_body(message_key)),
            MessageStatus.COMMITTED,
        )

    async def rollback(self, message_key: str) -> MessageView:
        """See :meth:`Client.rollback`."""
        return self._decided(
            await self._call(
                "POST", self._url("v1", "messages", "rollback"), self._decision_body(message_key)
            ),
            MessageStatus.ROLLED_BACK,
        )

    async def get(self, message_key: str) -> MessageView:
        """See :meth:`Client.get`."""
        url = self._url("v1", "messages", self._biz_id, v.check_message_key(message_key))
        return MessageView.from_json(await self._call("GET", url, None))

    def transaction(
        self,
        message: Message,
        connection: object,
        *,
        after_local_commit: Optional[Callable[[], object]] = None,
        connect: Optional[Any] = None,
    ) -> AsyncTransaction[MessageView]:
        """``async with client.transaction(message, conn) as tx:``; see
        :meth:`Client.transaction` and :class:`trustmsg.AsyncTransaction`
        (an ``async def`` ``after_local_commit`` is awaited)."""
        from .transaction import AsyncTransaction

        return AsyncTransaction(
            self, message, connection, after_local_commit=after_local_commit, connect=connect
        )

    async def _call(
        self, method: str, url: str, body: Optional[bytes], extra: Optional[dict[str, str]] = None
    ) -> Any:
        headers = self._headers(extra)
        if body is not None:
            headers["content-type"] = "application/json"
        attempt = 0
        while True:
            attempt += 1
            try:
                try:
                    response = await self._http.request(method, url, content=body, headers=headers)
                except httpx.TransportError as e:
                    raise _Retry(f"{type(e).__name__}: {e}", None, None, None) from e
                return self._answer(response)
            except _Retry as r:
                if attempt > self._retry.max_retries:
                    raise self._unavailable(r, attempt) from r.__cause__
                delay = self._retry.delay(attempt - 1, r.retry_after)
                log.warning("%s %s failed (%s); retrying in %.2f s", method, url, r.message, delay)
                await asyncio.sleep(delay)
