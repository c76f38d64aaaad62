"""The producer's and consumer's tables, shipped with the package: the
barrier and the inbox (``sql/mysql.sql``, ``sql/postgres.sql``, the contract
kit's, the same for every trustmsg SDK) and the local message table
(``sql/outbox-mysql.sql``, ``sql/outbox-postgres.sql``, as ``trustmsg outbox
schema`` prints it)."""

from __future__ import annotations

from importlib import resources

from . import _db

__all__ = ["create_tables", "sql"]


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
    for script in scripts:
        for statement in _db.statements(sql(script)):
            db.begin()
            try:
                db.execute(statement)
            except BaseException:
                db.rollback()
                raise
            db.commit()
