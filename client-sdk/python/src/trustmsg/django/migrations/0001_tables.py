"""The barrier, the inbox and the local message table, from the SQL the
package ships (the contract kit's, the same for every trustmsg SDK).
``CREATE TABLE IF NOT EXISTS``: tables made before by ``create_tables`` are
kept. Not reversed: the tables hold the markers check-back answers from."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def create(apps: Any, schema_editor: Any) -> None:
    from trustmsg.schema import create_tables

    create_tables(schema_editor.connection, outbox=True)


class Migration(migrations.Migration):
    initial = True
    dependencies: list[tuple[str, str]] = []
    # Not in an atomic block of the migration's: MySQL's DDL commits at once,
    # which would end the savepoint Django wraps a RunPython in there.
    operations = [migrations.RunPython(create, migrations.RunPython.noop, atomic=False)]
