"""The Django integration (trustmsg.django) under the contract kit: a Django
order service's transaction helper, inbox and local message table on
Django's own connections and ``transaction.atomic``, on MariaDB (Django's
MySQL backend over PyMySQL) and PostgreSQL (psycopg 3), against the real
trustmsg and the kit's Kafka. Settings are configured here, once: the two
kit databases as aliases ``mysql`` and ``postgres``, the ``trustmsg.django``
app (its migration makes the tables) and an app with an ``Order`` model."""

from __future__ import annotations

import time
import urllib.parse
from typing import Any

import pytest

import trustmsg
from trustmsg import Decision, Message, MessageStatus, Outcome, SendStatus

from .conftest import DB, Kit, Record, consume, kit_env, read_topic, suffix

PAYLOAD = b'{"order":42,"total_cents":4200}'


def _settings(url: str, engine: str) -> dict[str, Any]:
    u = urllib.parse.urlsplit(url)
    out: dict[str, Any] = {
        "ENGINE": engine,
        "NAME": u.path.lstrip("/"),
        "USER": urllib.parse.unquote(u.username or ""),
        "PASSWORD": urllib.parse.unquote(u.password or ""),
        "HOST": u.hostname or "127.0.0.1",
        "PORT": str(u.port or ""),
    }
    if engine.endswith("mysql"):
        out["OPTIONS"] = {"charset": "utf8mb4"}
    return out


_ready: set[str] = set()


def _django(alias: str) -> None:
    """Django set up once per session; the app's migration and the Order
    table once per database."""
    import django
    from django.conf import settings

    if not settings.configured:
        import pymysql

        pymysql.install_as_MySQLdb()  # Django's MySQL backend on PyMySQL
        settings.configure(
            DATABASES={
                "default": {},
                "mysql": _settings(kit_env("TRUSTMSG_KIT_MYSQL_URL"), "django.db.backends.mysql"),
                "postgres": _settings(kit_env("TRUSTMSG_KIT_POSTGRES_URL"), "django.db.backends.postgresql"),
            },
            INSTALLED_APPS=["trustmsg.django", "tests.djangoapp"],
            USE_TZ=True,
            DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
        )
        django.setup()
    if alias in _ready:
        return
    from django.core.management import call_command
    from django.db import connections

    from .djangoapp.models import Order

    call_command("migrate", "trustmsg", database=alias, verbosity=0)
    with connections[alias].cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS py_django_orders")
    with connections[alias].schema_editor() as editor:
        editor.create_model(Order)
    _ready.add(alias)


@pytest.fixture(params=["mysql", "postgres"])
def alias(request: pytest.FixtureRequest) -> str:
    _django(str(request.param))
    return str(request.param)


def _db(alias: str) -> DB:
    return DB(alias, kit_env("TRUSTMSG_KIT_MYSQL_URL" if alias == "mysql" else "TRUSTMSG_KIT_POSTGRES_URL"))


def _orders(alias: str, *ids: str) -> list[tuple[str, str]]:
    from .djangoapp.models import Order

    return sorted(Order.objects.using(alias).filter(order_id__in=ids).values_list("order_id", "note"))


def _markers(alias: str, biz_id: str, key: str) -> list[str]:
    rows = _db(alias).query(
        "SELECT op FROM trustmsg_barrier WHERE biz_id = %s AND message_key = %s", (biz_id, key)
    )
    return [r[0].decode() if isinstance(r[0], bytes) else r[0] for r in rows]


class CardDeclined(Exception):
    pass


def test_S01_django_order_in_transaction_atomic_reaches_kafka(kit: Kit, alias: str) -> None:
    from trustmsg import django as tm

    from .djangoapp.models import Order

    p = kit.register("dj01")
    key = f"order-{suffix()}"
    with kit.client(p) as client:
        with tm.transaction(client, Message(key, p.topic, PAYLOAD, key="customer-7"), using=alias) as tx:
            from django.db import connections

            assert connections[alias].in_atomic_block, "the block runs in Django's atomic block"
            Order.objects.using(alias).create(order_id=key, note="paid")
        assert tx.outcome == Outcome.COMMITTED
        assert tx.message is not None and tx.message.status == MessageStatus.COMMITTED
        message_id = tx.message.id
        kit.wait_status(client, key, MessageStatus.COMMITTED, SendStatus.SENT)
    assert _orders(alias, key) == [(key, "paid")]
    assert _markers(alias, p.biz_id, key) == ["commit"]
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert len(recs) == 1
    assert recs[0].key == b"customer-7" and recs[0].value == PAYLOAD
    assert recs[0].header("trustmsg-message-id") == str(message_id)


def test_S01_django_helper_inside_an_outer_atomic_commits_on_commit(kit: Kit, alias: str) -> None:
    """Inside the caller's own ``transaction.atomic()``: the marker and the
    order commit with the outer block, and only then is the commit sent."""
    from django.db import transaction

    from trustmsg import django as tm

    from .djangoapp.models import Order

    p = kit.register("dj01o")
    key = f"order-{suffix()}"
    with kit.client(p) as client:
        with transaction.atomic(using=alias):
            Order.objects.using(alias).create(order_id=f"{key}-before", note="outer")
            with tm.transaction(client, Message(key, p.topic, PAYLOAD), using=alias) as tx:
                Order.objects.using(alias).create(order_id=key, note="paid")
            assert tx.outcome in (Outcome.PENDING_OUTER_COMMIT,)  # not narrowed: on_commit changes it
            assert client.get(key).status == MessageStatus.PREPARED, "sent before the real COMMIT"
            assert _orders(alias, key) == [(key, "paid")]  # this connection sees it ...
            assert _markers(alias, p.biz_id, key) == []  # ... another does not yet
        assert str(tx.outcome) == Outcome.COMMITTED  # set by on_commit
        assert client.get(key).status == MessageStatus.COMMITTED
    assert _orders(alias, key, f"{key}-before") == [(key, "paid"), (f"{key}-before", "outer")]
    assert _markers(alias, p.biz_id, key) == ["commit"]


def test_S02_django_order_whose_block_or_outer_atomic_fails_is_never_delivered(kit: Kit, alias: str) -> None:
    from django.db import connections, transaction

    from trustmsg import django as tm

    from .djangoapp.models import Order

    p = kit.register("dj02")
    failed, outer, later = f"order-{suffix()}", f"order-{suffix()}", f"order-{suffix()}"
    with kit.client(p) as client:
        with (
            pytest.raises(CardDeclined),
            tm.transaction(client, Message(failed, p.topic, b"x"), using=alias) as tx,
        ):
            Order.objects.using(alias).create(order_id=failed, note="paid")
            raise CardDeclined("card declined")
        assert tx.outcome == Outcome.ROLLED_BACK
        assert client.get(failed).status == MessageStatus.ROLLED_BACK
        # The helper's block succeeded, the caller's outer block failed after it.
        with pytest.raises(CardDeclined), transaction.atomic(using=alias):
            with tm.transaction(client, Message(outer, p.topic, b"x"), using=alias) as tx2:
                Order.objects.using(alias).create(order_id=outer, note="paid")
            raise CardDeclined("declined after")
        assert tx2.outcome == Outcome.PENDING_OUTER_COMMIT, "nothing sent: check-back decides"
        assert client.get(outer).status == MessageStatus.PREPARED
        assert not connections[alias].in_atomic_block
        with tm.transaction(client, Message(later, p.topic, b"later"), using=alias) as tx3:
            Order.objects.using(alias).create(order_id=later, note="paid")
        assert tx3.outcome == Outcome.COMMITTED
    assert _orders(alias, failed, outer, later) == [(later, "paid")]
    assert _markers(alias, p.biz_id, failed) == [] and _markers(alias, p.biz_id, outer) == []
    # What check-back will answer for the outer block's message: rollback.
    assert tm.decider(alias)(trustmsg.CheckRequest(p.biz_id, outer, 1, 1, "")) == Decision.ROLLBACK
    recs = read_topic(
        kit.kafka, p.topic, lambda rs: any(r.header("trustmsg-message-key") == later for r in rs)
    )
    assert [r.header("trustmsg-message-key") for r in recs] == [later]


class Crash(Exception):
    pass


def test_S03_django_order_stopped_after_its_local_commit_is_committed_by_check_back(
    kit: Kit, alias: str, serve_wsgi: Any
) -> None:
    """The Django service stops between its atomic block's COMMIT and the
    commit call; trustmsg's check-back reaches its ``wsgi.py`` (CheckBackWSGI
    in front of Django's application) and ``tm.decider`` answers commit
    from the barrier, each call on a connection of its own."""
    from django.core.wsgi import get_wsgi_application

    from trustmsg import django as tm
    from trustmsg.wsgi import CheckBackWSGI

    from .djangoapp.models import Order

    calls: list[trustmsg.CheckRequest] = []
    from_barrier = tm.decider(alias)

    def decide(request: trustmsg.CheckRequest) -> str:
        calls.append(request)
        return from_barrier(request)

    p = kit.register("dj03")
    url = serve_wsgi(CheckBackWSGI(p.secret, decide, fallback=get_wsgi_application())) + "/trustmsg/check"
    kit.admin(
        "PUT",
        f"/v1/producers/{p.biz_id}",
        {"verify_url": url, "topics": [p.topic], "first_verify_after_ms": 1000},
    )
    key = f"order-{suffix()}"

    def crash() -> None:
        raise Crash()

    with kit.client(p) as client:
        with (
            pytest.raises(Crash),
            tm.transaction(
                client, Message(key, p.topic, PAYLOAD), using=alias, after_local_commit=crash
            ) as tx,
        ):
            Order.objects.using(alias).create(order_id=key, note="paid")
        assert tx.outcome == Outcome.LEFT_TO_CHECK_BACK
        assert client.get(key).status == MessageStatus.PREPARED
        done = kit.wait_status(client, key, MessageStatus.COMMITTED, SendStatus.SENT, secs=30)
    assert calls, "trustmsg's check-back never reached the Django service"
    assert calls[0].message_key == key and calls[0].message_id == done.id
    assert _orders(alias, key) == [(key, "paid")]
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert [r.header("trustmsg-message-id") for r in recs] == [str(done.id)]


def test_S07_django_inbox_drops_a_redelivered_record_inside_atomic(kit: Kit, alias: str) -> None:
    from django.db import transaction

    from trustmsg import django as tm

    from .djangoapp.models import Order

    p = kit.register("dj07")
    first, failing = f"order-{suffix()}", f"order-{suffix()}"
    with kit.client(p) as client:
        for key in (first, failing):
            client.prepare(Message(key, p.topic, key.encode()))
            client.commit(key)
    msgs = consume(kit.kafka, p.topic, lambda ms: len(ms) >= 2)
    by_key = {Record(m.key(), m.value(), m.headers()).header("trustmsg-message-key"): m for m in msgs}
    group = f"billing-{suffix()}"
    charge = f"charge-{suffix()}"

    def work() -> str:
        Order.objects.using(alias).create(order_id=charge, note="once")
        return "charged"

    done = tm.process(group, by_key[first], work, using=alias)
    assert done == trustmsg.inbox.Processed(repeat=False, value="charged")
    with transaction.atomic(using=alias):  # a redelivery, inside the caller's own block
        assert tm.process(group, by_key[first], work, using=alias).repeat
    assert _orders(alias, charge) == [(charge, "once")]

    def failing_work() -> None:
        Order.objects.using(alias).create(order_id=f"{charge}-2", note="failed")
        raise CardDeclined("declined")

    with pytest.raises(CardDeclined):
        tm.process(group, by_key[failing], failing_work, using=alias)
    assert _orders(alias, charge, f"{charge}-2") == [(charge, "once")]
    ids = [
        int(r[0])
        for r in _db(alias).query("SELECT message_id FROM trustmsg_inbox WHERE consumer_group = %s", (group,))
    ]
    assert ids == [trustmsg.inbox.message_id(by_key[first].headers())]


def test_S09_django_outbox_row_is_written_in_transaction_atomic(kit: Kit, alias: str) -> None:
    """The row commits and rolls back with the order; on MariaDB the kit
    relays the table, so the committed one reaches Kafka."""
    from django.db import transaction

    from trustmsg import django as tm

    from .djangoapp.models import Order

    topic = f"{kit.outbox_topic_prefix}py.dj.{suffix()}"
    kept, dropped = f"order-{suffix()}", f"order-{suffix()}"
    with transaction.atomic(using=alias):
        Order.objects.using(alias).create(order_id=kept, note="paid")
        row_id = tm.enqueue(Message(kept, topic, PAYLOAD, key="customer-7"), using=alias)
    with pytest.raises(CardDeclined), transaction.atomic(using=alias):
        Order.objects.using(alias).create(order_id=dropped, note="paid")
        tm.enqueue(Message(dropped, topic, b"never"), using=alias)
        raise CardDeclined("declined")
    assert row_id > 0
    db = _db(alias)
    assert db.query("SELECT message_key FROM trustmsg_outbox WHERE id = %s", (row_id,)) == [(kept,)]
    assert db.query("SELECT id FROM trustmsg_outbox WHERE message_key = %s", (dropped,)) == []
    assert _orders(alias, kept, dropped) == [(kept, "paid")]
    if alias != "mysql":
        return  # the kit relays its MariaDB database's table only
    recs = read_topic(kit.kafka, topic, lambda rs: len(rs) >= 1)
    deadline = time.monotonic() + 30
    while db.query("SELECT status FROM trustmsg_outbox WHERE id = %s", (row_id,)) != [(2,)]:
        assert time.monotonic() < deadline, "the row was not marked relayed"
        time.sleep(0.2)
    assert [(r.key, r.value) for r in recs] == [(b"customer-7", PAYLOAD)]
