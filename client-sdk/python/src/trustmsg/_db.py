"""The producer's database as the SDK uses it, whatever the driver: PyMySQL
and psycopg 3 connections, SQLAlchemy connections and sessions (sync and
asyncio). Every statement is run with its values bound as parameters (the
drivers' ``%s`` placeholders); nothing is ever formatted into SQL but the
name of a table that was checked to be a plain identifier."""

from __future__ import annotations

import asyncio
import functools
import sys
from collections.abc import Sequence
from typing import Any, Callable, Optional, Protocol, TypeVar

MYSQL = "mysql"
POSTGRES = "postgres"

Row = tuple[Any, ...]
T = TypeVar("T")


class SyncDB(Protocol):
    dialect: str

    def begin(self) -> None: ...
    def commit(self) -> None: ...
    def rollback(self) -> None: ...
    def execute(self, sql: str, params: Sequence[object] = ()) -> int: ...
    def fetchone(self, sql: str, params: Sequence[object] = ()) -> Optional[Row]: ...


class AsyncDB(Protocol):
    dialect: str

    async def begin(self) -> None: ...
    async def commit(self) -> None: ...
    async def rollback(self) -> None: ...
    async def execute(self, sql: str, params: Sequence[object] = ()) -> int: ...
    async def fetchone(self, sql: str, params: Sequence[object] = ()) -> Optional[Row]: ...


def _module(obj: object) -> str:
    return type(obj).__module__ or ""


def _busy(what: str) -> ValueError:
    return ValueError(
        f"the {what} is inside a `with conn.transaction()` block or a failed transaction: the local "
        "transaction must be one the helper can COMMIT (end the block, or roll the failed one back)"
    )


def _sa_dialect(name: str) -> str:
    if name in ("mysql", "mariadb"):
        return MYSQL
    if name == "postgresql":
        return POSTGRES
    raise ValueError(
        f"SQLAlchemy dialect {name!r} is not supported: trustmsg supports MySQL/MariaDB and PostgreSQL"
    )


def _as_row(row: Any) -> Optional[Row]:
    """A fetched row as a tuple, whether the cursor gives tuples or dicts."""
    if row is None:
        return None
    return tuple(row.values()) if isinstance(row, dict) else tuple(row)


class _CursorRows:
    """``execute`` and ``fetchone`` through a cursor of ``self.conn`` (a
    DB-API connection whose ``cursor()`` is a context manager)."""

    conn: Any

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        with self.conn.cursor() as cur:
            cur.execute(sql, tuple(params))
            return int(cur.rowcount)

    def fetchone(self, sql: str, params: Sequence[object] = ()) -> Optional[Row]:
        with self.conn.cursor() as cur:
            cur.execute(sql, tuple(params))
            return _as_row(cur.fetchone())


class PyMySQLDB:
    dialect = MYSQL

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def begin(self) -> None:
        from pymysql.constants import SERVER_STATUS

        # A transaction the connection has open already is joined: it becomes
        # the local transaction (a BEGIN would silently commit it).
        if not self.conn.server_status & SERVER_STATUS.SERVER_STATUS_IN_TRANS:
            self.conn.begin()

    def commit(self) -> None:
        self.conn.commit()

    def rollback(self) -> None:
        self.conn.rollback()

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        with self.conn.cursor() as cur:
            return int(cur.execute(sql, tuple(params)))

    def fetchone(self, sql: str, params: Sequence[object] = ()) -> Optional[Row]:
        with self.conn.cursor() as cur:
            cur.execute(sql, tuple(params))
            return _as_row(cur.fetchone())


def _psycopg_joins(conn: Any) -> bool:
    """True when the psycopg connection has a transaction open to join (a
    statement ran without autocommit); False when it is idle; refused inside
    a ``conn.transaction()`` block (its COMMIT is the block's) or a failed one."""
    from psycopg import pq

    status = conn.info.transaction_status
    if getattr(conn, "_num_transactions", 0) or status not in (
        pq.TransactionStatus.IDLE,
        pq.TransactionStatus.INTRANS,
    ):
        raise _busy("psycopg connection")
    return bool(status == pq.TransactionStatus.INTRANS)


class PsycopgDB(_CursorRows):
    dialect = POSTGRES

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._tx: Any = None

    def begin(self) -> None:
        if _psycopg_joins(self.conn):
            self._tx = None
            return
        self._tx = self.conn.transaction()
        self._tx.__enter__()

    def commit(self) -> None:
        tx, self._tx = self._tx, None
        if tx is None:
            self.conn.commit()
        else:
            tx.__exit__(None, None, None)

    def rollback(self) -> None:
        import psycopg

        tx, self._tx = self._tx, None
        if tx is None:
            self.conn.rollback()
        else:
            tx.__exit__(psycopg.Rollback, psycopg.Rollback(), None)


class SAConnectionDB:
    """An SQLAlchemy ``Connection`` or ``Session``."""

    def __init__(self, conn: Any, session: bool) -> None:
        self.conn = conn
        self.session = session
        bind = conn.get_bind() if session else conn
        self.dialect = _sa_dialect(bind.dialect.name)
        self._tx: Any = None

    def _connection(self) -> Any:
        return self.conn.connection() if self.session else self.conn

    def begin(self) -> None:
        # A transaction already begun (SQLAlchemy begins one at the first
        # statement) is joined: it becomes the local transaction.
        self._tx = self.conn.get_transaction() if self.conn.in_transaction() else self.conn.begin()

    def commit(self) -> None:
        tx, self._tx = self._tx, None
        tx.commit()

    def rollback(self) -> None:
        tx, self._tx = self._tx, None
        if tx is not None:
            tx.rollback()

    def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        return int(self._connection().exec_driver_sql(sql, tuple(params)).rowcount)

    def fetchone(self, sql: str, params: Sequence[object] = ()) -> Optional[Row]:
        row = self._connection().exec_driver_sql(sql, tuple(params)).fetchone()
        return None if row is None else tuple(row)


class _DjangoRollback(Exception):
    """Handed to ``Atomic.__exit__`` to make it roll back."""


def _django_wrapper(conn: object) -> bool:
    if "django.db" not in sys.modules:
        return False
    from django.db.backends.base.base import BaseDatabaseWrapper

    return isinstance(conn, BaseDatabaseWrapper)


class DjangoDB(_CursorRows):
    """A Django connection (``django.db.connections[alias]``, a
    ``DatabaseWrapper``) on its MySQL/MariaDB or PostgreSQL backend.

    The local transaction is Django's own ``transaction.atomic(using=alias)``,
    so the ORM's calls in the block run in it and see ``in_atomic_block``.
    Begun inside an atomic block the caller has open, it is a savepoint of
    that block: ``joined`` is then True and the real COMMIT is the outermost
    block's, which the transaction helper waits for with
    ``transaction.on_commit`` (:meth:`defer`). A connection of its own (from
    ``connections.create_connection``, for barrier checks) is driven with
    Django's ``set_autocommit``/``commit``/``rollback``."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        vendor = getattr(conn, "vendor", "")
        if vendor == "mysql":
            self.dialect = MYSQL
        elif vendor == "postgresql":
            self.dialect = POSTGRES
        else:
            raise ValueError(
                f"Django database backend {vendor!r} is not supported: trustmsg supports MySQL/MariaDB "
                "and PostgreSQL"
            )
        self._atomic: Any = None
        self._manual = False
        self.joined = False

    def _shared(self) -> bool:
        from django.db import connections

        return bool(connections[self.conn.alias] is self.conn)

    def begin(self) -> None:
        if self._shared():
            from django.db import transaction

            self.joined = bool(self.conn.in_atomic_block)
            self._atomic = transaction.atomic(using=self.conn.alias)
            self._atomic.__enter__()
        else:
            self.conn.set_autocommit(False)
            self._manual = True

    def commit(self) -> None:
        atomic, self._atomic = self._atomic, None
        if atomic is not None:
            atomic.__exit__(None, None, None)
        elif self._manual:
            self._manual = False
            self.conn.commit()
            self.conn.set_autocommit(True)

    def rollback(self) -> None:
        atomic, self._atomic = self._atomic, None
        if atomic is not None:
            atomic.__exit__(_DjangoRollback, _DjangoRollback(), None)
        elif self._manual:
            self._manual = False
            try:
                self.conn.rollback()
            finally:
                self.conn.set_autocommit(True)

    def defer(self, fn: Callable[[], None]) -> bool:
        """Runs ``fn`` once the outermost atomic block commits (Django's
        ``on_commit``) and says True, when this transaction joined one;
        False (nothing registered) when its own COMMIT was the real one."""
        if not self.joined:
            return False
        from django.db import transaction

        transaction.on_commit(fn, using=self.conn.alias)
        return True


class AsyncPsycopgDB:
    dialect = POSTGRES

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._tx: Any = None

    async def begin(self) -> None:
        if _psycopg_joins(self.conn):
            self._tx = None
            return
        self._tx = self.conn.transaction()
        await self._tx.__aenter__()

    async def commit(self) -> None:
        tx, self._tx = self._tx, None
        if tx is None:
            await self.conn.commit()
        else:
            await tx.__aexit__(None, None, None)

    async def rollback(self) -> None:
        import psycopg

        tx, self._tx = self._tx, None
        if tx is None:
            await self.conn.rollback()
        else:
            await tx.__aexit__(psycopg.Rollback, psycopg.Rollback(), None)

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        async with self.conn.cursor() as cur:
            await cur.execute(sql, tuple(params))
            return int(cur.rowcount)

    async def fetchone(self, sql: str, params: Sequence[object] = ()) -> Optional[Row]:
        async with self.conn.cursor() as cur:
            await cur.execute(sql, tuple(params))
            return _as_row(await cur.fetchone())


class AsyncSADB:
    """An SQLAlchemy ``AsyncConnection`` or ``AsyncSession``."""

    def __init__(self, conn: Any, session: bool) -> None:
        self.conn = conn
        self.session = session
        bind = conn.get_bind() if session else conn
        self.dialect = _sa_dialect(bind.dialect.name)
        self._tx: Any = None

    async def _connection(self) -> Any:
        return await self.conn.connection() if self.session else self.conn

    async def begin(self) -> None:
        self._tx = self.conn.get_transaction() if self.conn.in_transaction() else await self.conn.begin()

    async def commit(self) -> None:
        tx, self._tx = self._tx, None
        await tx.commit()

    async def rollback(self) -> None:
        tx, self._tx = self._tx, None
        if tx is not None:
            await tx.rollback()

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        conn = await self._connection()
        return int((await conn.exec_driver_sql(sql, tuple(params))).rowcount)

    async def fetchone(self, sql: str, params: Sequence[object] = ()) -> Optional[Row]:
        conn = await self._connection()
        row = (await conn.exec_driver_sql(sql, tuple(params))).fetchone()
        return None if row is None else tuple(row)


class ThreadedDB:
    """A synchronous connection used from asyncio: each call in a worker
    thread, one after the other, so the event loop never blocks on it."""

    def __init__(self, db: SyncDB) -> None:
        self.db = db
        self.dialect = db.dialect

    async def _run(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(None, functools.partial(fn, *args))

    async def begin(self) -> None:
        await self._run(self.db.begin)

    async def commit(self) -> None:
        await self._run(self.db.commit)

    async def rollback(self) -> None:
        await self._run(self.db.rollback)

    async def execute(self, sql: str, params: Sequence[object] = ()) -> int:
        return await self._run(self.db.execute, sql, params)

    async def fetchone(self, sql: str, params: Sequence[object] = ()) -> Optional[Row]:
        return await self._run(self.db.fetchone, sql, params)


SUPPORTED = (
    "a PyMySQL or psycopg 3 connection, an SQLAlchemy Connection or Session, or a Django connection "
    "(django.db.connections[alias]) "
    "(AsyncConnection/AsyncSession and psycopg's AsyncConnection for asyncio)"
)


def sync_db(conn: object) -> SyncDB:
    """The adapter of a synchronous connection or session."""
    if isinstance(conn, (PyMySQLDB, PsycopgDB, SAConnectionDB, DjangoDB)):
        return conn
    if _django_wrapper(conn):
        return DjangoDB(conn)
    mod = _module(conn)
    if mod.startswith("pymysql"):
        return PyMySQLDB(conn)
    if mod == "psycopg" or mod.startswith("psycopg."):
        import psycopg

        if isinstance(conn, psycopg.Connection):
            return PsycopgDB(conn)
    if mod.startswith("sqlalchemy"):
        from sqlalchemy.engine import Connection
        from sqlalchemy.orm import Session

        if isinstance(conn, Session):
            return SAConnectionDB(conn, session=True)
        if isinstance(conn, Connection):
            return SAConnectionDB(conn, session=False)
    raise TypeError(f"{type(conn).__module__}.{type(conn).__name__} is not {SUPPORTED}")


def async_db(conn: object) -> AsyncDB:
    """The adapter of an asyncio connection or session; a synchronous one is
    run in worker threads."""
    if _django_wrapper(conn):
        raise TypeError(
            "a Django connection belongs to its thread: use the synchronous helpers "
            "(trustmsg.django, under asgiref's sync_to_async from async code)"
        )
    mod = _module(conn)
    if mod == "psycopg" or mod.startswith("psycopg."):
        import psycopg

        if isinstance(conn, psycopg.AsyncConnection):
            return AsyncPsycopgDB(conn)
    if mod.startswith("sqlalchemy"):
        from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

        if isinstance(conn, AsyncSession):
            return AsyncSADB(conn, session=True)
        if isinstance(conn, AsyncConnection):
            return AsyncSADB(conn, session=False)
    return ThreadedDB(sync_db(conn))


def fresh_connect(conn: object) -> Optional[Callable[[], Any]]:
    """A way to open a new connection to the database of ``conn`` (a
    synchronous connection or session), for asking the barrier when ``conn``
    itself broke; None when it cannot be told. PyMySQL and psycopg are
    opened again with the same parameters; SQLAlchemy from the bind's engine."""
    if _django_wrapper(conn):
        alias: str = getattr(conn, "alias", "default")

        def django_connect() -> Any:
            from django.db import connections

            return connections.create_connection(alias)

        return django_connect
    mod = _module(conn)
    if mod.startswith("pymysql"):
        c: Any = conn

        def pymysql_connect() -> Any:
            return type(c)(
                host=c.host,
                port=c.port,
                user=c.user,
                password=c.password,
                database=c.db,
                unix_socket=c.unix_socket,
                charset=c.charset,
                ssl=c.ctx if getattr(c, "_ssl_required", False) else None,
                connect_timeout=10,
            )

        return pymysql_connect
    if mod == "psycopg" or mod.startswith("psycopg."):
        import psycopg

        if isinstance(conn, psycopg.Connection):
            pg: Any = conn
            dsn, password = pg.info.dsn, pg.info.password

            def psycopg_connect() -> Any:
                return type(pg).connect(dsn, password=password, connect_timeout=10)

            return psycopg_connect
        return None
    if mod.startswith("sqlalchemy"):
        from sqlalchemy.engine import Connection, Engine
        from sqlalchemy.orm import Session

        bind: Any = conn.get_bind() if isinstance(conn, Session) else conn
        if isinstance(bind, Connection):
            bind = bind.engine
        if isinstance(bind, Engine):
            return bind.connect
    return None


def afresh_connect(conn: object) -> Optional[Callable[[], Any]]:
    """The asyncio twin of :func:`fresh_connect`, for asyncio connections and
    sessions: a coroutine function opening a new psycopg ``AsyncConnection``
    or SQLAlchemy ``AsyncConnection`` (closed with ``await c.close()``);
    None for anything else."""
    mod = _module(conn)
    if mod == "psycopg" or mod.startswith("psycopg."):
        import psycopg

        if isinstance(conn, psycopg.AsyncConnection):
            pg: Any = conn
            dsn, password = pg.info.dsn, pg.info.password

            async def psycopg_connect() -> Any:
                return await type(pg).connect(dsn, password=password, connect_timeout=10)

            return psycopg_connect
    if mod.startswith("sqlalchemy"):
        from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, AsyncSession

        if isinstance(conn, (AsyncSession, AsyncConnection)):
            bind: Any = conn.bind if isinstance(conn, AsyncSession) else conn.engine
            if isinstance(bind, AsyncConnection):
                bind = bind.engine
            if isinstance(bind, AsyncEngine):
                engine = bind

                async def sa_connect() -> Any:
                    return await engine.connect()

                return sa_connect
    return None


def is_unique_violation(e: BaseException) -> bool:
    """A duplicate key, whatever the driver (and through SQLAlchemy's wrapper)."""
    # SQLAlchemy keeps the driver's error as .orig, Django as __cause__.
    for err in (e, getattr(e, "orig", None), e.__cause__):
        if err is None:
            continue
        if getattr(err, "sqlstate", None) == "23505":
            return True
        mod = _module(err)
        if mod.startswith("pymysql") and err.args and err.args[0] == 1062:
            return True
    return False


def statements(script: str) -> list[str]:
    """The statements of an SQL file: full-line comments dropped, split at ``;``."""
    lines = [line for line in script.splitlines() if not line.strip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]


def text(value: object) -> str:
    """A text column as str, whether the driver gave str or bytes."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8")
    return str(value)
