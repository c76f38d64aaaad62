"""The barrier: exact check-back answers from the producer's own database.

Answering check-back with "is my order row there?" is wrong while the local
transaction is still running: the row is not visible yet, the answer is
rollback, and then the transaction commits. The barrier closes that gap with
one marker row per ``(biz_id, message_key)`` under a primary key:

- the local transaction inserts a ``commit`` marker
  (:class:`LocalTransaction` does it first thing);
- :func:`check` inserts a ``rollback`` marker unless one exists, then reads
  which marker is there.

Whoever inserts first wins and the database makes the other wait on the row
lock: a check-back that arrives while the local transaction is open waits
for it and answers what it did; a local transaction that comes after a
``rollback`` answer cannot insert its marker and cannot commit. Keys compare
byte for byte: ``"A"`` and ``"A "`` are two messages, and so are ``"A"`` and
``"a"``.

The tables are ``sql/mysql.sql`` and ``sql/postgres.sql`` of this package
(the contract kit's); :func:`create_tables` applies them.
"""

from __future__ import annotations

import asyncio as aio
import functools
import inspect
import logging
from types import TracebackType
from typing import Any, Callable, Optional, Union

from . import _db
from . import _validate as v
from .errors import AlreadyDecidedError, OutcomeUnknownError
from .message import Decision

__all__ = [
    "AsyncLocalTransaction",
    "LocalTransaction",
    "acheck",
    "acheck_with",
    "check",
    "decider",
    "fresh_connect",
]

log = logging.getLogger(__name__)

TABLE = "trustmsg_barrier"

_INSERT = "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (%s, %s, %s)"
# The spec'd INSERT IGNORE, spelled so that only the duplicate key is ignored
# (INSERT IGNORE would turn other errors into warnings).
_CHECK = {
    _db.MYSQL: "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (%s, %s, 'rollback') "
    "ON DUPLICATE KEY UPDATE op = op",
    _db.POSTGRES: "INSERT INTO trustmsg_barrier (biz_id, message_key, op) VALUES (%s, %s, 'rollback') "
    "ON CONFLICT (biz_id, message_key) DO NOTHING",
}
_READ = "SELECT op FROM trustmsg_barrier WHERE biz_id = %s AND message_key = %s"

#: Something that gives the barrier a connection of its own for each check:
#: an SQLAlchemy ``Engine``, or a callable returning a new PyMySQL / psycopg /
#: SQLAlchemy connection (closed after the check).
Connect = Union[Any, Callable[[], Any]]


def _keys(biz_id: str, message_key: str) -> tuple[str, str]:
    return v.check_biz_id(biz_id), v.check_message_key(message_key)


def _decision(op: object) -> Decision:
    d = _db.text(op)
    if d not in (Decision.COMMIT, Decision.ROLLBACK):
        raise RuntimeError(f"unexpected barrier marker {d!r} in {TABLE}")
    return Decision(d)


def _read_marker(db: _db.SyncDB, biz_id: str, message_key: str) -> Decision:
    db.begin()
    try:
        row = db.fetchone(_READ, (biz_id, message_key))
    finally:
        db.commit()
    if row is None:
        raise RuntimeError(f"the barrier marker of {message_key!r} vanished (purged?)")
    return _decision(row[0])


def check_on(conn: object, biz_id: str, message_key: str) -> Decision:
    """What the barrier answers for a message, on a connection that is not
    inside a transaction: inserts a ``rollback`` marker unless one exists
    (waiting while a local transaction holding the key is open), then answers
    the marker there, ``"commit"`` or ``"rollback"``."""
    biz_id, message_key = _keys(biz_id, message_key)
    db = _db.sync_db(conn)
    db.begin()
    try:
        db.execute(_CHECK[db.dialect], (biz_id, message_key))
    except BaseException:
        db.rollback()
        raise
    db.commit()
    # A new transaction: it sees the marker whoever committed it.
    return _read_marker(db, biz_id, message_key)


def _open(connect: Connect) -> tuple[Any, Callable[[], None]]:
    if type(connect).__module__.startswith("sqlalchemy") and hasattr(connect, "connect"):
        conn = connect.connect()
    elif callable(connect):
        conn = connect()
    else:
        raise TypeError("connect must be an SQLAlchemy Engine or a callable returning a new connection")
    return conn, conn.close


def check(connect: Connect, biz_id: str, message_key: str) -> Decision:
    """:func:`check_on` on a connection of its own (``connect``), closed after."""
    conn, close = _open(connect)
    try:
        return check_on(conn, biz_id, message_key)
    finally:
        close()


async def acheck(conn: object, biz_id: str, message_key: str) -> Decision:
    """The asyncio twin of :func:`check_on` (psycopg ``AsyncConnection``,
    SQLAlchemy ``AsyncConnection``; a synchronous connection runs in a thread)."""
    biz_id, message_key = _keys(biz_id, message_key)
    db = _db.async_db(conn)
    await db.begin()
    try:
        await db.execute(_CHECK[db.dialect], (biz_id, message_key))
    except BaseException:
        await db.rollback()
        raise
    await db.commit()
    await db.begin()
    try:
        row = await db.fetchone(_READ, (biz_id, message_key))
    finally:
        await db.commit()
    if row is None:
        raise RuntimeError(f"the barrier marker of {message_key!r} vanished (purged?)")
    return _decision(row[0])


def fresh_connect(conn: object, *, asyncio: bool = False) -> Optional[Connect]:
    """How to open another connection to the database of ``conn``: PyMySQL
    and psycopg are opened again with its parameters, SQLAlchemy from its
    bind's engine; None when it cannot be told. With ``asyncio``, an asyncio
    connection gives a coroutine function (see :func:`acheck_with`). Taken
    while ``conn`` is alive: the transaction helper asks the barrier there
    when the local COMMIT on ``conn`` failed with its outcome unknown."""
    try:
        if asyncio:
            open_async = _db.afresh_connect(conn)
            if open_async is not None:
                return open_async
        return _db.fresh_connect(conn)
    except Exception as e:  # noqa: BLE001 - a connection that cannot tell: no new one
        log.debug("no way to open another connection like %r: %s", conn, e)
        return None


async def acheck_with(connect: Connect, biz_id: str, message_key: str) -> Decision:
    """:func:`check` from asyncio on a connection of its own: ``connect`` is
    an SQLAlchemy ``AsyncEngine`` or a coroutine function returning a new
    asyncio connection (checked with :func:`acheck`, closed after), or what
    :func:`check` takes (run in a worker thread)."""
    if type(connect).__name__ == "AsyncEngine":
        engine: Any = connect
        async with engine.connect() as fresh:
            return await acheck(fresh, biz_id, message_key)
    if inspect.iscoroutinefunction(connect):
        fresh = await connect()
        try:
            return await acheck(fresh, biz_id, message_key)
        finally:
            await fresh.close()
    return await aio.get_running_loop().run_in_executor(
        None, functools.partial(check, connect, biz_id, message_key)
    )


def decider(connect: Connect) -> Callable[[Any], Decision]:
    """A check-back decision function answering from the barrier: give it to
    :class:`trustmsg.checkback.CheckBackASGI` / ``CheckBackWSGI``. Each call
    takes a connection of its own from ``connect``."""

    def decide(request: Any) -> Decision:
        return check(connect, request.biz_id, request.message_key)

    return decide


class LocalTransaction:
    """The local transaction with the barrier marker, on a connection the
    caller owns: ``BEGIN``, the ``commit`` marker, the block, ``COMMIT``;
    ``ROLLBACK`` when the block raises (the exception goes on as it is).

    Entering raises :class:`AlreadyDecidedError` when the barrier already
    holds a marker of this key (check-back answered rollback first, or the
    key was committed before); the transaction is then rolled back.

    Use it on its own when the decision is sent some other way (the Kafka
    way in, or not at all: check-back decides); :class:`trustmsg.Transaction`
    wraps it with prepare and commit.
    """

    def __init__(self, conn: object, biz_id: str, message_key: str) -> None:
        self.biz_id, self.message_key = _keys(biz_id, message_key)
        self.db = _db.sync_db(conn)
        self.committed = False

    def __enter__(self) -> LocalTransaction:
        self.db.begin()
        try:
            self.db.execute(_INSERT, (self.biz_id, self.message_key, Decision.COMMIT.value))
        except BaseException as e:
            self.db.rollback()
            if not _db.is_unique_violation(e):
                raise
            marker = _read_marker(self.db, self.biz_id, self.message_key)
            raise AlreadyDecidedError(
                f"the barrier already holds a {marker!r} marker for {self.message_key!r}"
                + (
                    ": check-back answered rollback before this transaction"
                    if marker == Decision.ROLLBACK
                    else ""
                ),
                decision=marker,
            ) from None
        return self

    def commit(self) -> None:
        """``COMMIT``. When it fails, the barrier (on the same connection, if
        it still works) tells whether the marker went in: committed after all,
        the failure raised as is (rolled back), or :class:`OutcomeUnknownError`."""
        try:
            self.db.commit()
        except Exception as commit_error:
            try:
                decision = check_on(self.db, self.biz_id, self.message_key)
            except Exception as check_error:  # noqa: BLE001 - any failure here means: unknown
                log.error(
                    "local COMMIT of %r failed (%s) and the barrier cannot tell (%s)",
                    self.message_key,
                    commit_error,
                    check_error,
                )
                raise OutcomeUnknownError(
                    f"the local COMMIT of {self.message_key!r} failed ({commit_error}) and its outcome is "
                    "unknown; check-back will ask the barrier"
                ) from commit_error
            if decision != Decision.COMMIT:
                raise
        self.committed = True

    def rollback(self) -> None:
        """``ROLLBACK``; a failure is logged, not raised (the transaction is gone either way)."""
        try:
            self.db.rollback()
        except Exception as e:  # noqa: BLE001
            log.warning("ROLLBACK of %r failed: %s", self.message_key, e)

    def __exit__(
        self, t: Optional[type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if t is None:
            self.commit()
        else:
            self.rollback()


class AsyncLocalTransaction:
    """The asyncio twin of :class:`LocalTransaction` (``async with``)."""

    def __init__(self, conn: object, biz_id: str, message_key: str) -> None:
        self.biz_id, self.message_key = _keys(biz_id, message_key)
        self.conn = conn
        self.db = _db.async_db(conn)
        self.committed = False

    async def __aenter__(self) -> AsyncLocalTransaction:
        await self.db.begin()
        try:
            await self.db.execute(_INSERT, (self.biz_id, self.message_key, Decision.COMMIT.value))
        except BaseException as e:
            await self.db.rollback()
            if not _db.is_unique_violation(e):
                raise
            await self.db.begin()
            try:
                row = await self.db.fetchone(_READ, (self.biz_id, self.message_key))
            finally:
                await self.db.commit()
            marker = _decision(row[0]) if row else Decision.UNKNOWN
            raise AlreadyDecidedError(
                f"the barrier already holds a {marker!r} marker for {self.message_key!r}"
                + (
                    ": check-back answered rollback before this transaction"
                    if marker == Decision.ROLLBACK
                    else ""
                ),
                decision=marker,
            ) from None
        return self

    async def commit(self) -> None:
        """See :meth:`LocalTransaction.commit`."""
        try:
            await self.db.commit()
        except Exception as commit_error:
            try:
                decision = await acheck(self.conn, self.biz_id, self.message_key)
            except Exception as check_error:  # noqa: BLE001
                log.error(
                    "local COMMIT of %r failed (%s) and the barrier cannot tell (%s)",
                    self.message_key,
                    commit_error,
                    check_error,
                )
                raise OutcomeUnknownError(
                    f"the local COMMIT of {self.message_key!r} failed ({commit_error}) and its outcome is "
                    "unknown; check-back will ask the barrier"
                ) from commit_error
            if decision != Decision.COMMIT:
                raise
        self.committed = True

    async def rollback(self) -> None:
        try:
            await self.db.rollback()
        except Exception as e:  # noqa: BLE001
            log.warning("ROLLBACK of %r failed: %s", self.message_key, e)

    async def __aexit__(
        self, t: Optional[type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        if t is None:
            await self.commit()
        else:
            await self.rollback()
