"""Django: the barrier, the inbox and the local message table on Django's
own connection (``django.db.connections[alias]``), inside
``transaction.atomic``. ``pip install "trustmsg[django]"``.

Add ``"trustmsg.django"`` to ``INSTALLED_APPS`` and ``python manage.py
migrate`` creates the tables (the barrier, the inbox, the local message
table: the contract kit's SQL, as :func:`trustmsg.create_tables` writes
it), as django-outbox-pattern's app does for its outbox. Then::

    from trustmsg import django as tm

    with tm.transaction(client, Message("order-42", "orders", payload)) as tx:
        Order.objects.create(id=42, total_cents=4200)        # in the same atomic block

    with transaction.atomic():                              # your own block
        order = Order.objects.create(id=43, total_cents=100)
        tm.enqueue(Message("order-43", "orders", payload))   # the outbox row, same transaction

    tm.process("billing", record, lambda: Charge.objects.create(order_id=43))   # the inbox

The local transaction of :func:`transaction` is Django's
``transaction.atomic(using=alias)``. Inside an atomic block of yours it is a
savepoint of it, and the commit is sent from ``transaction.on_commit`` once
your outermost block commits (``tx.outcome`` is ``pending_outer_commit``
until then); a rollback of your block sends nothing and check-back rolls
the message back. Django's connections belong to their thread: from async
views, wrap these calls in asgiref's ``sync_to_async``.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, TypeVar

from django.db import DEFAULT_DB_ALIAS, connections

from .. import barrier, inbox, outbox, schema
from ..message import Decision, Message
from ..transaction import Hook, Producer, Transaction

__all__ = ["connection", "create_tables", "decider", "enqueue", "process", "transaction"]

R = TypeVar("R")
T = TypeVar("T")


def connection(using: str = DEFAULT_DB_ALIAS) -> Any:
    """Django's connection of database ``using``: what every trustmsg call
    that takes a connection also takes (``client.transaction(message,
    connection())``, ``outbox.enqueue(connection(), message)``)."""
    return connections[using]


def transaction(
    client: Producer[R],
    message: Message,
    *,
    using: str = DEFAULT_DB_ALIAS,
    after_local_commit: Optional[Hook] = None,
) -> Transaction[R]:
    """The transaction helper on Django's connection ``using``: ``with
    tm.transaction(client, message) as tx:`` prepares, runs the block in
    ``transaction.atomic(using=using)`` with the barrier marker, commits and
    sends the commit (see :class:`trustmsg.Transaction` for what it raises).
    ``client`` is a :class:`trustmsg.Client` or a
    :class:`trustmsg.submit.Submitter`."""
    return Transaction(client, message, connections[using], after_local_commit=after_local_commit)


def enqueue(message: Message, *, using: str = DEFAULT_DB_ALIAS, table: str = outbox.TABLE) -> int:
    """Writes ``message`` as a row of the local message table on connection
    ``using``, in the transaction the caller has open (call it inside
    ``transaction.atomic``: outside one, Django's autocommit commits the
    row on its own). Returns the row's id."""
    return outbox.enqueue(connections[using], message, table=table)


def process(
    group: str, record: Any, work: Callable[[], T], *, using: str = DEFAULT_DB_ALIAS
) -> inbox.Processed[T]:
    """The inbox on connection ``using``: runs ``work()`` (your ORM calls)
    and writes the inbox row of ``record`` in one ``transaction.atomic``,
    unless consumer group ``group`` processed it already
    (``.repeat``). Inside an atomic block of yours, it is a savepoint of it."""
    return inbox.process(connections[using], group, record, lambda _conn: work())


def create_tables(*, using: str = DEFAULT_DB_ALIAS, outbox: bool = True) -> None:
    """The tables on connection ``using``, unless they exist (what the
    app's migration runs)."""
    schema.create_tables(connections[using], outbox=outbox)


def decider(using: str = DEFAULT_DB_ALIAS) -> Callable[[Any], Decision]:
    """A check-back decision function answering from the barrier of
    database ``using``, each call on a connection of its own
    (``connections.create_connection``): give it to
    :class:`trustmsg.wsgi.CheckBackWSGI` in ``wsgi.py``."""

    def connect() -> Any:
        return connections.create_connection(using)

    return barrier.decider(connect)
