"""The transaction helper: prepare → local transaction with the barrier
marker → commit (or rollback).

The order matters. The message is prepared *before* the local transaction,
so a crash at any later point leaves a PREPARED message that check-back
resolves from the barrier; a crash before prepare leaves nothing to resolve.
The decision is sent *after* the local transaction. When it cannot be
delivered (trustmsg unavailable after the retries) the helper does not raise:
the local change was made, and check-back will commit the message. What
happened is in :attr:`Transaction.outcome`.

    with client.transaction(Message("order-42", "orders", payload), conn) as tx:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO orders (id, state) VALUES (%s, %s)", (42, "paid"))
    print(tx.outcome, tx.message.status)

When the block raises, the local transaction is rolled back, trustmsg is
told to roll the message back, and the block's own exception goes on,
unchanged.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Awaitable
from types import TracebackType
from typing import Generic, Optional, Protocol, TypeVar

from .barrier import AsyncLocalTransaction, LocalTransaction
from .errors import AlreadyDecidedError, OutcomeUnknownError, TrustmsgError, UnavailableError
from .message import Decision, Message

__all__ = ["AsyncProducer", "AsyncTransaction", "Outcome", "Producer", "Transaction"]

R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)


class Producer(Protocol[R_co]):
    """What the helper needs of a way in to trustmsg: :class:`trustmsg.Client`
    (receipts are :class:`MessageView`) or :class:`trustmsg.submit.Submitter`
    (receipts are ``Submitted``: Kafka acknowledged, trustmsg applies later)."""

    @property
    def biz_id(self) -> str: ...
    def prepare(self, message: Message) -> R_co: ...
    def commit(self, message_key: str) -> R_co: ...
    def rollback(self, message_key: str) -> R_co: ...


class AsyncProducer(Protocol[R_co]):
    """The asyncio twin of :class:`Producer` (:class:`trustmsg.AsyncClient`)."""

    @property
    def biz_id(self) -> str: ...
    def prepare(self, message: Message) -> Awaitable[R_co]: ...
    def commit(self, message_key: str) -> Awaitable[R_co]: ...
    def rollback(self, message_key: str) -> Awaitable[R_co]: ...


log = logging.getLogger("trustmsg")


class Outcome(str, enum.Enum):
    """What a transaction helper did, once its block is over."""

    #: Local transaction committed, trustmsg committed the message.
    COMMITTED = "committed"
    #: Local transaction committed; the commit call could not be delivered.
    #: trustmsg's check-back will find the commit marker and commit it.
    COMMIT_LEFT_TO_CHECK_BACK = "commit_left_to_check_back"
    #: Local transaction committed but trustmsg refused the commit (e.g. the
    #: message had been rolled back by an operator). Needs a person: logged
    #: as an error, the refusal in :attr:`Transaction.decision_error`.
    COMMIT_REJECTED = "commit_rejected"
    #: The block raised (or the local transaction failed): rolled back
    #: locally and in trustmsg.
    ROLLED_BACK = "rolled_back"
    #: Rolled back locally; the rollback call could not be delivered:
    #: check-back will find no commit marker and roll it back.
    ROLLBACK_LEFT_TO_CHECK_BACK = "rollback_left_to_check_back"
    #: Rolled back locally but trustmsg refused the rollback.
    ROLLBACK_REJECTED = "rollback_rejected"
    #: Nothing was sent after prepare: the local outcome is unknown, or the
    #: key was already committed, or the block was interrupted
    #: (KeyboardInterrupt, task cancellation). Check-back decides.
    LEFT_TO_CHECK_BACK = "left_to_check_back"

    @property
    def local_committed(self) -> bool:
        return self in (Outcome.COMMITTED, Outcome.COMMIT_LEFT_TO_CHECK_BACK, Outcome.COMMIT_REJECTED)


class _State(Generic[R]):
    def __init__(self, message: Message) -> None:
        if not isinstance(message, Message):
            raise TypeError(f"message must be a trustmsg.Message, not {type(message).__name__}")
        self.message_to_send = message
        self.key = message.message_key
        self.outcome: Optional[Outcome] = None
        #: The receipt of the prepare, then of the commit or rollback: a
        #: MessageView from a Client, a Submitted from a Submitter.
        self.message: Optional[R] = None
        #: Why the commit or rollback call failed, when it did.
        self.decision_error: Optional[TrustmsgError] = None

    def _after_commit(self, view: Optional[R], error: Optional[TrustmsgError]) -> None:
        if error is None:
            self.message = view
            self.outcome = Outcome.COMMITTED
        elif isinstance(error, UnavailableError):
            log.warning(
                "trustmsg: commit of %r not delivered (%s); check-back will commit it", self.key, error
            )
            self.decision_error, self.outcome = error, Outcome.COMMIT_LEFT_TO_CHECK_BACK
        else:
            log.error(
                "trustmsg: the local transaction of %r committed but trustmsg refused the commit: %s",
                self.key,
                error,
            )
            self.decision_error, self.outcome = error, Outcome.COMMIT_REJECTED

    def _after_rollback(self, view: Optional[R], error: Optional[TrustmsgError]) -> None:
        if error is None:
            self.message = view
            self.outcome = Outcome.ROLLED_BACK
        elif isinstance(error, UnavailableError):
            log.warning(
                "trustmsg: rollback of %r not delivered (%s); check-back will roll it back", self.key, error
            )
            self.decision_error, self.outcome = error, Outcome.ROLLBACK_LEFT_TO_CHECK_BACK
        else:
            log.error(
                "trustmsg: the local transaction of %r rolled back but trustmsg refused the rollback: %s",
                self.key,
                error,
            )
            self.decision_error, self.outcome = error, Outcome.ROLLBACK_REJECTED


class Transaction(_State[R]):
    """``with client.transaction(message, conn) as tx:`` (see the module).

    ``conn`` is a PyMySQL or psycopg 3 connection, or an SQLAlchemy
    ``Connection`` or ``Session``: the helper begins and ends the local
    transaction itself (a transaction the connection has open already is
    joined and committed with the marker). Entering raises what
    prepare raises (nothing local happened then), or
    :class:`AlreadyDecidedError` when the barrier already has a marker of the
    key. After the block, :attr:`outcome` says what happened.
    """

    def __init__(self, client: Producer[R], message: Message, conn: object) -> None:
        super().__init__(message)
        self.client = client
        self.local = LocalTransaction(conn, client.biz_id, message.message_key)

    def __enter__(self) -> Transaction[R]:
        self.message = self.client.prepare(self.message_to_send)
        try:
            self.local.__enter__()
        except AlreadyDecidedError as e:
            if e.decision == Decision.ROLLBACK:
                self._rollback()
            else:
                self.outcome = Outcome.LEFT_TO_CHECK_BACK
            raise
        except Exception:
            self._rollback()
            raise
        return self

    def __exit__(
        self, t: Optional[type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if t is None:
            try:
                self.local.commit()
            except OutcomeUnknownError:
                self.outcome = Outcome.LEFT_TO_CHECK_BACK
                raise
            except Exception:
                self._rollback()
                raise
            try:
                view = self.client.commit(self.key)
            except TrustmsgError as err:
                self._after_commit(None, err)
            else:
                self._after_commit(view, None)
            return
        self.local.rollback()
        if isinstance(e, Exception):
            self._rollback()
        else:
            log.warning(
                "trustmsg: the block of %r was interrupted (%s); check-back will decide", self.key, t.__name__
            )
            self.outcome = Outcome.LEFT_TO_CHECK_BACK
        # Returning None: the block's exception goes on as it is.

    def _rollback(self) -> None:
        try:
            view = self.client.rollback(self.key)
        except TrustmsgError as err:
            self._after_rollback(None, err)
        else:
            self._after_rollback(view, None)


class AsyncTransaction(_State[R]):
    """``async with client.transaction(message, conn) as tx:``, the asyncio
    twin of :class:`Transaction`. ``conn`` is a psycopg ``AsyncConnection``,
    an SQLAlchemy ``AsyncConnection`` or ``AsyncSession``, or a synchronous
    connection (its statements then run in a worker thread)."""

    def __init__(self, client: AsyncProducer[R], message: Message, conn: object) -> None:
        super().__init__(message)
        self.client = client
        self.local = AsyncLocalTransaction(conn, client.biz_id, message.message_key)

    async def __aenter__(self) -> AsyncTransaction[R]:
        self.message = await self.client.prepare(self.message_to_send)
        try:
            await self.local.__aenter__()
        except AlreadyDecidedError as e:
            if e.decision == Decision.ROLLBACK:
                await self._rollback()
            else:
                self.outcome = Outcome.LEFT_TO_CHECK_BACK
            raise
        except Exception:
            await self._rollback()
            raise
        return self

    async def __aexit__(
        self, t: Optional[type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if t is None:
            try:
                await self.local.commit()
            except OutcomeUnknownError:
                self.outcome = Outcome.LEFT_TO_CHECK_BACK
                raise
            except Exception:
                await self._rollback()
                raise
            try:
                view = await self.client.commit(self.key)
            except TrustmsgError as err:
                self._after_commit(None, err)
            else:
                self._after_commit(view, None)
            return
        await self.local.rollback()
        if isinstance(e, Exception):
            await self._rollback()
        else:
            log.warning(
                "trustmsg: the block of %r was interrupted (%s); check-back will decide", self.key, t.__name__
            )
            self.outcome = Outcome.LEFT_TO_CHECK_BACK

    async def _rollback(self) -> None:
        try:
            view = await self.client.rollback(self.key)
        except TrustmsgError as err:
            self._after_rollback(None, err)
        else:
            self._after_rollback(view, None)
