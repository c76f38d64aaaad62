"""The SDK's tables made by several instances at once."""

from __future__ import annotations

import threading
import urllib.parse
from typing import Optional

import psycopg

import trustmsg

from .conftest import kit_env, pg_dsn, suffix


def test_eight_instances_create_the_tables_at_once_on_an_empty_postgres_database() -> None:
    """Two CREATE TABLE IF NOT EXISTS of one table at once can fail on
    PostgreSQL's catalog (23505 on pg_type); every instance of a service
    that starts with create_tables must succeed, and the tables are there
    once."""
    url = kit_env("TRUSTMSG_KIT_POSTGRES_URL")
    name = f"py_ddl_{suffix()}"
    with psycopg.connect(pg_dsn(url), autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    db_url = pg_dsn(urllib.parse.urlunsplit(urllib.parse.urlsplit(url)._replace(path=f"/{name}")))
    try:
        errors: list[Optional[BaseException]] = []
        start = threading.Barrier(8)

        def instance() -> None:
            try:
                with psycopg.connect(db_url) as conn:
                    start.wait()
                    trustmsg.create_tables(conn, outbox=True)
                errors.append(None)
            except BaseException as e:  # reported below
                errors.append(e)

        threads = [threading.Thread(target=instance) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == [None] * 8, [e for e in errors if e is not None]
        with psycopg.connect(db_url) as conn:
            row = conn.execute(
                "SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public' AND tablename IN "
                "('trustmsg_barrier', 'trustmsg_inbox', 'trustmsg_outbox')"
            ).fetchone()
        assert row is not None and row[0] == 3
    finally:
        with psycopg.connect(pg_dsn(url), autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
