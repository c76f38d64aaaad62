"""An order and its message, committed together (README.md's example)."""

import os

import psycopg

import trustmsg
from trustmsg import Message

# `. trustmsg-dev/env` after `trustmsg dev` sets TRUSTMSG_*; DATABASE_URL is your PostgreSQL.
env = os.environ
client = trustmsg.Client(env["TRUSTMSG_URL"], env["TRUSTMSG_DEMO_BIZ_ID"], env["TRUSTMSG_DEMO_TOKEN"])
with psycopg.connect(env["DATABASE_URL"]) as conn:
    trustmsg.create_tables(conn)  # the barrier and the inbox, once
    conn.execute("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY, total_cents BIGINT NOT NULL)")
    conn.commit()
    order_id = env.get("ORDER_ID", "order-1")
    message = Message(order_id, env.get("ORDERS_TOPIC", "orders"), b'{"total_cents":4200}', key="customer-7")
    with client.transaction(message, conn) as tx:  # prepare; BEGIN; the barrier marker
        conn.execute("INSERT INTO orders (id, total_cents) VALUES (%s, %s)", (order_id, 4200))
    # COMMIT locally, then in trustmsg: the record is on its way to Kafka.
    print(tx.outcome.value if tx.outcome else None, tx.message.id if tx.message else None)
client.close()
