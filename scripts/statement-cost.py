#!/usr/bin/env python3
"""What each statement of a message's life costs the database, per row.

Usage: scripts/statement-cost.py TRUSTMSG_BINARY [ROWS] [VARIANT] [BATCH] [CLIENTS] [SHAPE] [PAYLOAD]

Creates a database on the local MariaDB/MySQL server (root, no password,
127.0.0.1, port 3306 or $STATEMENT_COST_PORT: a server of its own gives the
server's CPU time to these statements alone), migrates it with
`TRUSTMSG_BINARY migrate`, then runs each
kind of statement the service writes over ROWS rows (default 10000), in
batches of BATCH rows (default 500), from CLIENTS connections at once
(default 1; the service writes from two), alone: the prepare's INSERT, the commit's UPDATE, a claim's
lease UPDATE, a whole claim (its SELECT … FOR UPDATE SKIP LOCKED and lease
UPDATE in one transaction), the SENT mark's UPDATE. For each it prints the database
server's CPU time (its process's, from /proc, so run it on a machine where
nothing else uses the server), its page changes and its redo bytes per row,
purge waited out and counted. VARIANT drops secondary indexes first, to
price them: all (default), no_topic_sent, no_state, no_due, none, or
folded (the state index and both due indexes as one, over a stored column).
SHAPE `service` writes the commit and the SENT mark as the service writes
them (ids listed with their (id, status, version) guards, the commit's IF()s,
the marks as a derived table joined on (id, version)) instead of over an id
range (`simple`, the default); `tvc`, `in` and `span` write the service's
commit and the mark in other forms (a table value constructor; an id list
with ELT(FIELD()) for the offsets; that over the ids' span). Shapes other
than `simple` skip the claims, as the lifecycle's hand-off does.
PAYLOAD is each row's payload in bytes (default 256): written where the
migrated schema's prepare would keep it, in the row, or in
`message_payloads` for a content longer than 2 KiB (migration 0018; a
claim then also reads it from there, as the service's does). It prints
each statement's wall time per row too. For 900 kB payloads use few rows:
`statement-cost.py BINARY 300 all 300 1 simple 900000`.
docs/performance.md has the figures.
"""
import os
import re
import subprocess
import sys
import threading
import time

binary = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
variant = sys.argv[3] if len(sys.argv) > 3 else "all"
DB = "trustmsg_statement_cost"
PORT = int(os.environ.get("STATEMENT_COST_PORT", "3306"))
# The server listening on PORT (`ss` names the process).
listening = subprocess.run(["ss", "-Hltnp", f"sport = :{PORT}"], capture_output=True,
                           text=True).stdout
pid = re.search(r"pid=(\d+)", listening).group(1)
CLIENT = ["mysql", "--protocol=tcp", "-h127.0.0.1", f"-P{PORT}", "-uroot", "-N"]


def cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


def sql(text, db=DB):
    return subprocess.run(CLIENT + [db], input=text.encode(), check=True,
                          capture_output=True).stdout.decode(errors="replace")


def status():
    out = sql("SHOW GLOBAL STATUS WHERE variable_name IN "
              "('Innodb_lsn_current', 'Innodb_buffer_pool_write_requests')", db="")
    return {line.split()[0]: int(line.split()[1]) for line in out.strip().splitlines()}


def settle():
    for _ in range(600):
        n = sql("SELECT COUNT FROM information_schema.INNODB_METRICS "
                "WHERE NAME = 'trx_rseg_history_len'", db="")
        if int(n.strip()) < 50:
            return
        time.sleep(0.1)


sql(f"DROP DATABASE IF EXISTS {DB}; CREATE DATABASE {DB}", db="")
subprocess.run([binary, "migrate", "--database-url", f"mysql://root@127.0.0.1:{PORT}/{DB}"],
               check=True, capture_output=True)
drops = {
    "all": [],
    "no_topic_sent": ["idx_messages_topic_sent"],
    "no_state": ["idx_messages_state"],
    "no_due": ["idx_messages_verify_due", "idx_messages_send_due"],
    "none": ["idx_messages_topic_sent", "idx_messages_state", "idx_messages_verify_due",
             "idx_messages_send_due"],
    # The three indexes that follow a message's state and due times folded
    # into one, over a stored column that is the due time while the
    # message waits and the finish time once it is done (an experiment:
    # the service does not read such a column).
    "folded": ["idx_messages_state", "idx_messages_verify_due", "idx_messages_send_due"],
}[variant]
for index in drops:
    sql(f"ALTER TABLE messages DROP KEY {index}")
if variant == "folded":
    sql("ALTER TABLE messages ADD COLUMN state_at DATETIME(3) AS (CASE "
        "WHEN status = 'PREPARED' THEN next_verify_at "
        "WHEN status = 'COMMITTED' AND send_status = 'PENDING' THEN next_send_at "
        "ELSE updated_at END) STORED, "
        "ADD KEY idx_messages_folded (status, send_status, state_at, biz_id)")
BATCH = int(sys.argv[4]) if len(sys.argv) > 4 else 500
PAYLOAD = int(sys.argv[7]) if len(sys.argv) > 7 else 256
payload = f"'{'x' * PAYLOAD}'" if PAYLOAD <= 4096 else f"REPEAT('x', {PAYLOAD})"
# Where the migrated schema's prepare keeps this content (its headers are "{}").
APART = bool(sql("SELECT COUNT(*) FROM information_schema.columns WHERE table_schema = "
                 f"'{DB}' AND table_name = 'messages' AND column_name = 'payload_apart'")
             .strip() != "0") and PAYLOAD + 2 > 2048


CLIENTS = int(sys.argv[5]) if len(sys.argv) > 5 else 1
SHAPE = sys.argv[6] if len(sys.argv) > 6 else "simple"


def batches(statement):
    return [statement(lo, min(lo + BATCH, N)) + ";" for lo in range(0, N, BATCH)]


def run(statements, count):
    """The statements dealt round-robin to `count` connections that run at once."""
    clients = [subprocess.Popen(CLIENT + [DB], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL)
               for _ in range(count)]
    def feed(client, share):
        client.stdin.write("\n".join(share).encode())
        client.stdin.close()

    feeders = [threading.Thread(target=feed, args=(client, statements[i::len(clients)]))
               for i, client in enumerate(clients)]
    for feeder in feeders:
        feeder.start()
    for feeder in feeders:
        feeder.join()
    for client in clients:
        if client.wait() != 0:
            sys.exit("a client failed")


def rows(lo, hi):
    in_row = "''" if APART else payload
    apart = ",TRUE" if APART else ""
    return ",".join(
        f"('bench','k{i}','trustmsg-bench',NULL,{in_row},'{{}}',UNHEX(REPEAT('ab',32)),"
        "'PREPARED',UTC_TIMESTAMP(3)+INTERVAL 3600 SECOND,UTC_TIMESTAMP(3),UTC_TIMESTAMP(3),"
        f"REPEAT(X'00',40){apart})" for i in range(lo, hi))


def prepare(lo, hi):
    """The prepare's INSERT, with its content's where the content is kept apart."""
    insert = ("INSERT INTO messages (biz_id, message_key, topic, record_key, payload, headers, "
              "content_digest, status, next_verify_at, created_at, updated_at, headroom"
              f"{', payload_apart' if APART else ''}) VALUES {rows(lo, hi)}")
    if not APART:
        return insert
    return (f"BEGIN; {insert}; INSERT INTO message_payloads (message_id, payload, headers) "
            f"SELECT id, {payload}, '{{}}' FROM messages WHERE id > {lo} AND id <= {hi}; COMMIT")


def contents(lo, hi):
    """What a claim of rows whose contents are apart reads after locking them."""
    if not APART:
        return ""
    return (f" SELECT message_id, payload, headers FROM message_payloads "
            f"WHERE message_id > {lo} AND message_id <= {hi};")


COLUMNS = ("id, biz_id, message_key, topic, record_key, payload, headers, content_digest, "
           "status, send_status, tombstone, version, verify_attempts, send_attempts, last_error, "
           "next_verify_at, next_send_at, kafka_partition, kafka_offset, created_at, updated_at, "
           "decided_at, sent_at, UTC_TIMESTAMP(3) AS claimed_at")
DUE = "state_at" if variant == "folded" else "next_send_at"
NOW = "'2026-11-25 12:00:00.000'"


def service_commit(lo, hi):
    """A producers' commit batch as `MySqlStore::decide_together` writes it."""
    ids = ",".join(str(i) for i in range(lo + 1, hi + 1))
    guards = ",".join(f"({i},'PREPARED',0)" for i in range(lo + 1, hi + 1))
    return (
        "UPDATE messages SET status = 'COMMITTED', send_status = 'PENDING', "
        "version = version + 1, verify_attempts = IF('COMMITTED' = 'PREPARED', 0, "
        "verify_attempts + 0), last_error = COALESCE(NULL, last_error), "
        f"next_verify_at = IF('COMMITTED' = 'PREPARED', {NOW}, NULL), "
        "verify_overdue_alerted = IF('COMMITTED' = 'PREPARED', FALSE, verify_overdue_alerted), "
        f"requeued_at = IF('COMMITTED' = 'PREPARED', {NOW}, requeued_at), "
        f"next_send_at = IF('COMMITTED' = 'COMMITTED', IF(deliver_at > {NOW}, deliver_at, "
        f"'2026-11-25 12:00:30.000'), NULL), decided_at = IF('COMMITTED' IN ('COMMITTED', "
        f"'ROLLED_BACK', 'VERIFY_FAILED'), {NOW}, decided_at), updated_at = {NOW}, "
        f"headroom = LEFT(headroom, 16) WHERE id IN ({ids}) AND (id, status, version) IN ({guards})")


# What the service's SENT mark sets, over the marks joined as `s`.
MARK_SET = ("SET m.send_status = 'SENT', m.next_send_at = NULL, m.sent_at = UTC_TIMESTAMP(3), "
            "m.updated_at = UTC_TIMESTAMP(3), m.send_attempts = m.send_attempts + 1, "
            "m.kafka_partition = s.kafka_partition, m.kafka_offset = s.kafka_offset, "
            "m.version = m.version + 1, m.headroom = NULL "
            "WHERE m.status = 'COMMITTED' AND m.send_status = 'PENDING'")


def tvc_mark(lo, hi):
    """The marks as one table value constructor behind a row that names
    the columns and joins nothing (ids start at 1)."""
    marks = ",".join(f"({i},1,0,{i})" for i in range(lo + 1, hi + 1))
    return (
        "UPDATE messages m JOIN (SELECT 0 AS id, 0 AS version, 0 AS kafka_partition, "
        f"0 AS kafka_offset UNION ALL VALUES {marks}) s ON m.id = s.id AND m.version = s.version "
        + MARK_SET)


def in_mark(lo, hi):
    """The marks as an id list with their (id, version) guards, each row's
    offset picked from a list by its id's place in the other."""
    ids = ",".join(str(i) for i in range(lo + 1, hi + 1))
    guards = ",".join(f"({i},1)" for i in range(lo + 1, hi + 1))
    return (
        "UPDATE messages SET send_status = 'SENT', next_send_at = NULL, "
        "sent_at = UTC_TIMESTAMP(3), updated_at = UTC_TIMESTAMP(3), "
        "send_attempts = send_attempts + 1, kafka_partition = 0, "
        f"kafka_offset = ELT(FIELD(id, {ids}), {ids}), version = version + 1, headroom = NULL "
        f"WHERE id IN ({ids}) AND (id, version) IN ({guards}) "
        "AND status = 'COMMITTED' AND send_status = 'PENDING'")


def span_mark(lo, hi):
    """As `in_mark`, over the span of its ids instead of the ids' list."""
    return in_mark(lo, hi).replace(f"WHERE id IN ({','.join(str(i) for i in range(lo + 1, hi + 1))})",
                                   f"WHERE id BETWEEN {lo + 1} AND {hi}")


def service_mark(lo, hi):
    """A batch of SENT marks as `mark_sent_statement` writes it (after the
    commit and no claim, the version is 1, as in the lifecycle's handoff)."""
    marks = " UNION ALL ".join(
        (f"SELECT {i} AS id, 1 AS version, 0 AS kafka_partition, {i} AS kafka_offset"
         if i == lo + 1 else f"SELECT {i}, 1, 0, {i}") for i in range(lo + 1, hi + 1))
    return (
        f"UPDATE messages m JOIN ({marks}) s ON m.id = s.id AND m.version = s.version "
        + MARK_SET)


steps = [
    ("prepare INSERT", batches(prepare)),
    ("commit UPDATE", batches(service_commit if SHAPE != "simple" else lambda lo, hi: (
        "UPDATE messages SET status='COMMITTED', send_status='PENDING', version=version+1, "
        "next_verify_at=NULL, next_send_at=UTC_TIMESTAMP(3)+INTERVAL 40 SECOND, "
        "decided_at=UTC_TIMESTAMP(3), updated_at=UTC_TIMESTAMP(3), headroom=LEFT(headroom,16) "
        f"WHERE id > {lo} AND id <= {hi}"))),
    ("claim lease UPDATE", batches(lambda lo, hi: (
        "UPDATE messages SET next_send_at=UTC_TIMESTAMP(3)+INTERVAL 30 SECOND, "
        f"version=version+1 WHERE id > {lo} AND id <= {hi}"))),
    # As the forwarder claims: in one transaction, the due rows read and
    # locked in due order, then their lease pushed out.
    ("claim (SELECT + lease)", batches(lambda lo, hi: (
        f"BEGIN; SELECT {COLUMNS} FROM messages "
        f"WHERE {DUE} <= UTC_TIMESTAMP(3) + INTERVAL 1 HOUR AND status = 'COMMITTED' "
        f"AND send_status = 'PENDING' ORDER BY {DUE} LIMIT {hi - lo} FOR UPDATE SKIP LOCKED; "
        "UPDATE messages SET next_send_at=UTC_TIMESTAMP(3)+INTERVAL 2 HOUR, "
        f"version=version+1 WHERE id > {lo} AND id <= {hi};{contents(lo, hi)} COMMIT"))),
    ("SENT UPDATE", batches({"service": service_mark, "tvc": tvc_mark, "in": in_mark, "span": span_mark}.get(SHAPE) or (lambda lo, hi: (
        "UPDATE messages SET send_status='SENT', next_send_at=NULL, sent_at=UTC_TIMESTAMP(3), "
        "updated_at=UTC_TIMESTAMP(3), send_attempts=send_attempts+1, kafka_partition=1, "
        "kafka_offset=12345, version=version+1, headroom=NULL "
        f"WHERE id > {lo} AND id <= {hi}")))),
]
if SHAPE != "simple":
    # As in the lifecycle, where the commit hands its message to the
    # forwarder: no claim between the commit and the mark.
    steps = [step for step in steps if not step[0].startswith("claim")]
for name, text in steps:
    settle()
    before, cpu0 = status(), cpu()
    # A whole claim leases a range of ids, not the rows it locked, so two
    # at once would deadlock: claims run from one connection.
    clients = 1 if name.startswith("claim") else CLIENTS
    began = time.monotonic()
    run(text, clients)
    wall = time.monotonic() - began
    settle()
    cpu1, after = cpu(), status()
    pages = after["Innodb_buffer_pool_write_requests"] - before["Innodb_buffer_pool_write_requests"]
    redo = after["Innodb_lsn_current"] - before["Innodb_lsn_current"]
    print(f"{variant:14} x{clients} {PAYLOAD}B{' apart' if APART else ''} {name:22} "
          f"database CPU {(cpu1 - cpu0) / N * 1e6:8.1f} µs/row  wall {wall / N * 1e6:8.1f} µs/row  "
          f"page changes {pages / N:6.1f}/row  redo {redo / N:7.0f} B/row")
sent = int(sql("SELECT COUNT(*) FROM messages WHERE send_status = 'SENT'").strip())
if sent != N:
    sys.exit(f"only {sent} of {N} rows were marked SENT: the statements did not match")
sql(f"DROP DATABASE {DB}", db="")
