"""The transaction helper: prepare → local transaction with the barrier
marker → commit (or rollback).

The order matters. The message is prepared *before* the local transaction,
so a crash at any later point leaves a PREPARED message that check-back
resolves from the barrier; a crash before prepare leaves nothing to resolve.
The block runs only when prepare answered ``PREPARED``: a message decided
before (a client's retry of an order that was placed, or refused) raises
:class:`~trustmsg.AlreadyCommittedError` or
:class:`~trustmsg.AlreadyRolledBackError` and runs nothing. What the barrier
already knows is sent at once: a commit marker left by an earlier attempt
that died after its local COMMIT is committed in trustmsg now, not at
check-back time.

The decision is sent *after* the local transaction. When it cannot be
delivered (trustmsg unavailable after the retries) the helper does not raise:
the local change was made, and check-back will commit the message
(:attr:`Transaction.outcome` says so). When trustmsg *refuses* it, the helper
raises (:class:`~trustmsg.CommitRejectedError`,
:class:`~trustmsg.RollbackRejectedError`): that needs a person.

    with client.transaction(Message("order-42", "orders", payload), conn) as tx:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO orders (id, state) VALUES (%s, %s)", (42, "paid"))
    print(tx.outcome, tx.message.status)

When the block raises, the local transaction is rolled back, trustmsg is
told to roll the message back, and the block's own exception goes on,
unchanged.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable
from types import TracebackType
from typing import Callable, Generic, Optional, Protocol, TypeVar

from .barrier import (
    AsyncLocalTransaction,
    Connect,
    LocalTransaction,
    acheck,
    acheck_with,
    check,
    check_on,
    fresh_connect,
)
from .errors import (
    AlreadyCommittedError,
    AlreadyDecidedError,
    AlreadyRolledBackError,
    CommitRejectedError,
    OutcomeUnknownError,
    RollbackRejectedError,
    TrustmsgError,
    UnavailableError,
)
from .message import Decision, Message, MessageStatus, MessageView, StrEnum, not_prepared_error

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


log = logging.getLogger(__name__)


class Outcome(StrEnum):
    """What a transaction helper did, once its block is over. A ``str`` enum
    (``enum.StrEnum`` on 3.11+): ``tx.outcome == "committed"`` holds."""

    #: Local transaction committed, trustmsg committed the message.
    COMMITTED = "committed"
    #: Local transaction committed; the commit call could not be delivered.
    #: trustmsg's check-back will find the commit marker and commit it.
    COMMIT_LEFT_TO_CHECK_BACK = "commit_left_to_check_back"
    #: Local transaction committed but trustmsg refused the commit: the
    #: helper raised :class:`~trustmsg.CommitRejectedError` (the outcome is
    #: set for whoever holds the transaction object).
    COMMIT_REJECTED = "commit_rejected"
    #: The block raised (or the local transaction failed): rolled back
    #: locally and in trustmsg.
    ROLLED_BACK = "rolled_back"
    #: Rolled back locally; the rollback call could not be delivered (or
    #: the barrier could not be asked first): check-back will find no
    #: commit marker and roll it back.
    ROLLBACK_LEFT_TO_CHECK_BACK = "rollback_left_to_check_back"
    #: The block raised and was rolled back, but another call with the same
    #: message (a duplicate request) committed it meanwhile: nothing was
    #: sent, the block's exception goes on.
    COMMITTED_BY_ANOTHER = "committed_by_another"
    #: Rolled back locally but trustmsg refused the rollback: the helper
    #: raised :class:`~trustmsg.RollbackRejectedError`.
    ROLLBACK_REJECTED = "rollback_rejected"
    #: Django: the block ran inside an atomic block the caller has open (a
    #: savepoint of it), so the local COMMIT is that block's: the commit is
    #: sent from ``transaction.on_commit`` (the outcome becomes
    #: ``committed`` then, or a :class:`~trustmsg.CommitRejectedError` is
    #: raised from the outer block's end). Rolled back instead, nothing is
    #: sent and check-back rolls the message back (no marker).
    PENDING_OUTER_COMMIT = "pending_outer_commit"
    #: Nothing was sent after prepare: the local outcome is unknown (and the
    #: barrier could not be asked), or the ``after_local_commit`` hook
    #: raised, or the block was interrupted (KeyboardInterrupt, task
    #: cancellation). Check-back decides.
    LEFT_TO_CHECK_BACK = "left_to_check_back"

    @property
    def local_committed(self) -> bool:
        return self in (Outcome.COMMITTED, Outcome.COMMIT_LEFT_TO_CHECK_BACK, Outcome.COMMIT_REJECTED)


#: ``after_local_commit``: called right after the local COMMIT, before the
#: decision is sent (an ``async def`` one is awaited by the asyncio helper).
Hook = Callable[[], object]


class _State(Generic[R]):
    def __init__(
        self, message: Message, after_local_commit: Optional[Hook], connect: Optional[Connect]
    ) -> None:
        if not isinstance(message, Message):
            raise TypeError(f"message must be a trustmsg.Message, not {type(message).__name__}")
        self.message_to_send = message
        self.key = message.message_key
        self.after_local_commit = after_local_commit
        self.connect = connect
        self.outcome: Optional[Outcome] = None
        #: The receipt of the prepare, then of the commit or rollback: a
        #: MessageView from a Client, a Submitted from a Submitter.
        self.message: Optional[R] = None
        #: Why the commit or rollback call was not delivered (an
        #: UnavailableError), when it was not; a refusal is raised instead.
        self.decision_error: Optional[TrustmsgError] = None

    def _prepared(self, view: R) -> None:
        """Goes on only when prepare answered PREPARED: a message already
        decided must run no local work (a retry would store an order whose
        message can never be sent, or store it twice)."""
        self.message = view
        if not isinstance(view, MessageView):
            return  # a Submitter's receipt: Kafka acknowledged, trustmsg applies it later
        error = not_prepared_error(view)
        if error is not None:
            raise error

    def _decided_meanwhile(self, view: object) -> bool:
        if not isinstance(view, MessageView) or view.status == MessageStatus.PREPARED:
            return False
        log.warning(
            "%r became %s while its local transaction ran (a duplicate call decided it): "
            "rolled back locally, nothing sent",
            self.key,
            view.status,
        )
        self.outcome = Outcome.ROLLED_BACK
        return True

    def _rolled_back_by_barrier(self, marker: AlreadyDecidedError) -> AlreadyRolledBackError:
        view = self.message if isinstance(self.message, MessageView) else None
        return AlreadyRolledBackError(
            f"the barrier holds the rollback marker of {self.key!r} (check-back answered rollback): "
            "nothing was run",
            status=None,
            view=view,
        )

    def _committed(self, view: Optional[R], error: Optional[TrustmsgError], found: bool) -> None:
        """After a commit call (``found``: for a commit marker found by a retry)."""
        if error is None:
            self.message, self.outcome = view, Outcome.COMMITTED
        elif isinstance(error, UnavailableError):
            log.warning("commit of %r not delivered (%s); check-back will commit it", self.key, error)
            self.decision_error, self.outcome = error, Outcome.COMMIT_LEFT_TO_CHECK_BACK
        else:
            log.error(
                "the local transaction of %r committed but trustmsg refused the commit: %s",
                self.key,
                error,
            )
            self.outcome = Outcome.COMMIT_REJECTED
            raise CommitRejectedError(
                f"the local transaction of {self.key!r} committed but trustmsg refused the commit: {error}",
                error=error,
                transaction=self,
            ) from error
        if found:
            raise AlreadyCommittedError(
                f"{self.key!r} was committed locally before (the barrier holds its commit marker): "
                "nothing was run, the commit was sent now",
                view=self.message,
                decision_error=self.decision_error,
            )

    def _rolled_back(
        self, view: Optional[R], error: Optional[TrustmsgError], work_error: BaseException
    ) -> None:
        if error is None:
            self.message, self.outcome = view, Outcome.ROLLED_BACK
        elif isinstance(error, UnavailableError):
            log.warning("rollback of %r not delivered (%s); check-back will roll it back", self.key, error)
            self.decision_error, self.outcome = error, Outcome.ROLLBACK_LEFT_TO_CHECK_BACK
        else:
            log.error(
                "the local transaction of %r rolled back but trustmsg refused the rollback: %s",
                self.key,
                error,
            )
            self.outcome = Outcome.ROLLBACK_REJECTED
            raise RollbackRejectedError(
                f"the local transaction of {self.key!r} rolled back ({work_error!r}) but trustmsg refused "
                f"the rollback: {error}",
                error=error,
                transaction=self,
                work_error=work_error,
            ) from error

    def _unknown(self, unknown: OutcomeUnknownError, check_error: BaseException) -> None:
        log.error(
            "the outcome of the local COMMIT of %r is unknown and the barrier cannot be asked "
            "on a new connection either (%s); check-back will decide",
            self.key,
            check_error,
        )
        self.outcome = Outcome.LEFT_TO_CHECK_BACK

    def _unsettled(self, check_error: BaseException) -> None:
        log.warning(
            "rolled back %r locally; the barrier cannot be asked (%s): check-back rolls it back",
            self.key,
            check_error,
        )
        self.outcome = Outcome.ROLLBACK_LEFT_TO_CHECK_BACK

    def _committed_by_another(self) -> None:
        log.info(
            "rolled back %r locally; another call with this message committed it: nothing sent",
            self.key,
        )
        self.outcome = Outcome.COMMITTED_BY_ANOTHER

    def _hook_failed(self, error: BaseException) -> None:
        log.warning(
            "after_local_commit of %r raised %r: no decision sent, check-back or a retry decides",
            self.key,
            error,
        )
        self.outcome = Outcome.LEFT_TO_CHECK_BACK


class Transaction(_State[R]):
    """``with client.transaction(message, conn) as tx:`` (see the module).

    ``conn`` is a PyMySQL or psycopg 3 connection, or an SQLAlchemy
    ``Connection`` or ``Session``: the helper begins and ends the local
    transaction itself (a transaction the connection has open already is
    joined and committed with the marker).

    Entering prepares the message and runs **no local work** unless
    trustmsg answered ``PREPARED``: it raises what prepare raises,
    :class:`~trustmsg.AlreadyRolledBackError` (prepare refused
    ``already_rolled_back``/``rolled_back``, or the barrier holds the
    rollback marker: the rollback is sent),
    :class:`~trustmsg.AlreadyCommittedError` (prepare answered
    ``COMMITTED``, or the barrier holds the commit marker: the commit is sent
    at once), or :class:`~trustmsg.NotPreparedError` (``VERIFY_FAILED``).

    Leaving asks trustmsg that the message is still ``PREPARED`` (a
    duplicate call may have rolled it back while this one waited on the
    marker: then the work is rolled back and the typed error raised), commits
    locally, calls ``after_local_commit`` (a test hook: when it raises, no
    decision is sent and its exception goes on), then commits in trustmsg.
    When the block raises, the rollback is sent before the local ROLLBACK
    (while the marker is held). A refused commit raises
    :class:`~trustmsg.CommitRejectedError`, a refused rollback
    :class:`~trustmsg.RollbackRejectedError`; a decision that could not be
    delivered is left to check-back (:attr:`outcome` says so). When the
    local COMMIT's outcome is unknown, the barrier is asked on a new
    connection (``connect``: an SQLAlchemy ``Engine`` or a callable returning
    a new connection; by default one opened like ``conn``) and its answer is
    sent.
    """

    def __init__(
        self,
        client: Producer[R],
        message: Message,
        conn: object,
        *,
        after_local_commit: Optional[Hook] = None,
        connect: Optional[Connect] = None,
    ) -> None:
        super().__init__(message, after_local_commit, connect)
        self.client = client
        self.local = LocalTransaction(conn, client.biz_id, message.message_key)
        if self.connect is None:
            self.connect = fresh_connect(conn)

    def __enter__(self) -> Transaction[R]:
        self._prepared(self.client.prepare(self.message_to_send))
        try:
            self.local.__enter__()
        except AlreadyDecidedError as e:
            if e.decision == Decision.ROLLBACK:
                self._rollback(e)
                raise self._rolled_back_by_barrier(e) from e
            self._commit(found=True)
            raise  # not reached: _commit(found=True) raises
        except Exception as e:
            self._settle(e)
            raise
        return self

    def __exit__(
        self, t: Optional[type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if t is None:
            self._recheck()
            try:
                self.local.commit()
            except OutcomeUnknownError as unknown:
                try:
                    if self.connect is None:
                        raise TypeError("no way to open another connection: pass connect=")
                    decision = check(self.connect, self.local.biz_id, self.key)
                except Exception as check_error:  # noqa: BLE001 - any failure here means: unknown
                    self._unknown(unknown, check_error)
                    raise unknown from unknown.__cause__  # the COMMIT's failure
                if decision != Decision.COMMIT:
                    self._rollback(unknown)
                    raise unknown.__cause__ or unknown from None
            except Exception as failed:
                self._rollback(failed)
                raise
            defer = getattr(self.local.db, "defer", None)
            if defer is not None and defer(self._after_local_commit):
                # Django: the block was a savepoint of an atomic block the
                # caller has open; its COMMIT is the real one (on_commit).
                self.outcome = Outcome.PENDING_OUTER_COMMIT
                return
            self._after_local_commit()
            return
        if isinstance(e, Exception):
            # Sent while the marker is still held: a duplicate call waiting
            # on it sees the message rolled back before it can commit.
            try:
                self._rollback(e)
            finally:
                self.local.rollback()
        else:
            self.local.rollback()
            log.warning("the block of %r was interrupted (%s); check-back will decide", self.key, t.__name__)
            self.outcome = Outcome.LEFT_TO_CHECK_BACK
        # Returning None: the block's exception goes on as it is.

    def _after_local_commit(self) -> None:
        if self.after_local_commit is not None:
            try:
                self.after_local_commit()
            except BaseException as hook_error:
                self._hook_failed(hook_error)
                raise
        self._commit(found=False)

    def _commit(self, found: bool) -> None:
        try:
            view = self.client.commit(self.key)
        except TrustmsgError as err:
            self._committed(None, err, found)
        else:
            self._committed(view, None, found)

    def _recheck(self) -> None:
        """Before the local COMMIT, the message must still be PREPARED: a
        duplicate call that held the marker before this one may have rolled
        it back (it sends its rollback before it lets the marker go). A
        Submitter cannot ask: nothing is checked."""
        get = getattr(self.client, "get", None)
        if get is None:
            return
        try:
            view = get(self.key)
        except Exception:
            self.local.rollback()
            self.outcome = Outcome.ROLLBACK_LEFT_TO_CHECK_BACK
            raise
        if self._decided_meanwhile(view):
            self.local.rollback()
            self._prepared(view)

    def _settle(self, work_error: BaseException) -> None:
        """After a local ROLLBACK: the rollback is sent once the barrier
        holds the rollback marker, so that no other call with this message
        (a duplicate request waiting on the marker) can commit it after."""
        try:
            try:
                decision = check_on(self.local.db, self.local.biz_id, self.key)
            except Exception:  # the connection may be what failed: ask on a new one
                if self.connect is None:
                    raise
                decision = check(self.connect, self.local.biz_id, self.key)
        except Exception as check_error:  # noqa: BLE001
            self._unsettled(check_error)
            return
        if decision == Decision.COMMIT:
            self._committed_by_another()
            return
        self._rollback(work_error)

    def _rollback(self, work_error: BaseException) -> None:
        try:
            view = self.client.rollback(self.key)
        except TrustmsgError as err:
            self._rolled_back(None, err, work_error)
        else:
            self._rolled_back(view, None, work_error)


class AsyncTransaction(_State[R]):
    """``async with client.transaction(message, conn) as tx:``, the asyncio
    twin of :class:`Transaction` (the same errors, the same hook; an
    ``async def`` hook is awaited). ``conn`` is a psycopg
    ``AsyncConnection``, an SQLAlchemy ``AsyncConnection`` or
    ``AsyncSession``, or a synchronous connection (its statements then run
    in a worker thread); ``connect`` may also be an SQLAlchemy ``AsyncEngine``."""

    def __init__(
        self,
        client: AsyncProducer[R],
        message: Message,
        conn: object,
        *,
        after_local_commit: Optional[Hook] = None,
        connect: Optional[Connect] = None,
    ) -> None:
        super().__init__(message, after_local_commit, connect)
        self.client = client
        self.local = AsyncLocalTransaction(conn, client.biz_id, message.message_key)
        if self.connect is None:
            self.connect = fresh_connect(conn, asyncio=True)

    async def __aenter__(self) -> AsyncTransaction[R]:
        self._prepared(await self.client.prepare(self.message_to_send))
        try:
            await self.local.__aenter__()
        except AlreadyDecidedError as e:
            if e.decision == Decision.ROLLBACK:
                await self._rollback(e)
                raise self._rolled_back_by_barrier(e) from e
            await self._commit(found=True)
            raise  # not reached: _commit(found=True) raises
        except Exception as e:
            await self._settle(e)
            raise
        return self

    async def __aexit__(
        self, t: Optional[type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if t is None:
            await self._arecheck()
            try:
                await self.local.commit()
            except OutcomeUnknownError as unknown:
                try:
                    if self.connect is None:
                        raise TypeError("no way to open another connection: pass connect=")
                    decision = await acheck_with(self.connect, self.local.biz_id, self.key)
                except Exception as check_error:  # noqa: BLE001
                    self._unknown(unknown, check_error)
                    raise unknown from unknown.__cause__  # the COMMIT's failure
                if decision != Decision.COMMIT:
                    await self._rollback(unknown)
                    raise unknown.__cause__ or unknown from None
            except Exception as failed:
                await self._rollback(failed)
                raise
            if self.after_local_commit is not None:
                try:
                    done = self.after_local_commit()
                    if inspect.isawaitable(done):
                        await done
                except BaseException as hook_error:
                    self._hook_failed(hook_error)
                    raise
            await self._commit(found=False)
            return
        if isinstance(e, Exception):
            try:
                await self._rollback(e)
            finally:
                await self.local.rollback()
        else:
            await self.local.rollback()
            log.warning("the block of %r was interrupted (%s); check-back will decide", self.key, t.__name__)
            self.outcome = Outcome.LEFT_TO_CHECK_BACK

    async def _commit(self, found: bool) -> None:
        try:
            view = await self.client.commit(self.key)
        except TrustmsgError as err:
            self._committed(None, err, found)
        else:
            self._committed(view, None, found)

    async def _arecheck(self) -> None:
        """See :meth:`Transaction._recheck`."""
        get = getattr(self.client, "get", None)
        if get is None:
            return
        try:
            view = await get(self.key)
        except Exception:
            await self.local.rollback()
            self.outcome = Outcome.ROLLBACK_LEFT_TO_CHECK_BACK
            raise
        if self._decided_meanwhile(view):
            await self.local.rollback()
            self._prepared(view)

    async def _settle(self, work_error: BaseException) -> None:
        """See :meth:`Transaction._settle`."""
        try:
            try:
                decision = await acheck(self.local.conn, self.local.biz_id, self.key)
            except Exception:
                if self.connect is None:
                    raise
                decision = await acheck_with(self.connect, self.local.biz_id, self.key)
        except Exception as check_error:  # noqa: BLE001
            self._unsettled(check_error)
            return
        if decision == Decision.COMMIT:
            self._committed_by_another()
            return
        await self._rollback(work_error)

    async def _rollback(self, work_error: BaseException) -> None:
        try:
            view = await self.client.rollback(self.key)
        except TrustmsgError as err:
            self._rolled_back(None, err, work_error)
        else:
            self._rolled_back(view, None, work_error)
