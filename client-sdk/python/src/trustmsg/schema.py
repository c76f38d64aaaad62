"""The producer's and consumer's tables, shipped with the package: the
barrier and the inbox (``sql/mysql.sql``, ``sql/postgres.sql``, the contract
kit's, the same for every trustmsg SDK) and the local message table
(``sql/outbox-mysql.sql``, ``sql/outbox-postgres.sql``, as ``trustmsg outbox
schema`` prints it)."""

from __future__ import annotations

from importlib import resources

from . import _db

__all__ = ["create_tables", "sql"]

#: The advisory lock taken on PostgreSQL while the tables are created
#: ("trustmsg" as a bigint, the same key in every trustmsg SDK).
DDL_LOCK = "SELECT pg_advisory_xact_lock(8390898194479674215)"


def sql(name: str) -> str:
    """The text of a shipped SQL file: ``mysql.sql``, ``postgres.sql``,
    ``outbox-mysql.sql`` or ``outbox-postgres.sql``."""
    if name not in ("mysql.sql", "postgres.sql", "outbox-mysql.sql", "outbox-postgres.sql"):
        raise ValueError(f"no shipped SQL file {name!r}")
    return resources.files("trustmsg").joinpath("sql").joinpath(name).read_text(encoding="utf-8")


def create_tables(conn: object, *, outbox: bool = False) -> None:
    """Creates the barrier and inbox tables (and with ``outbox=True`` the
    local message table ``trustmsg_outbox``) unless they exist, in the
    database of ``conn`` (PyMySQL, psycopg 3 or SQLAlchemy; each statement
    is committed, a transaction it has open with it). Idempotent."""
    db = _db.sync_db(conn)
    scripts = [f"{db.dialect}.sql"] + ([f"outbox-{db.dialect}.sql"] if outbox else [])
    statements = [s for script in scripts for s in _db.statements(sql(script))]
    # On PostgreSQL one transaction behind the lock every trustmsg SDK takes:
    # two CREATE TABLE IF NOT EXISTS of one table at once can fail there
    # (23505 on pg_type), as two instances starting together do.
    batches = [[DDL_LOCK, *statements]] if db.dialect == "postgres" else [[s] for s in statements]
    for batch in batches:
        db.begin()
        try:
            for statement in batch:
                db.execute(statement)
        except BaseException:
            db.rollback()
            raise
        db.commit()
