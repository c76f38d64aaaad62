#!/usr/bin/env python3
"""What each statement of a message's life costs the database, per row.

Usage: scripts/statement-cost.py TRUSTMSG_BINARY [ROWS] [VARIANT] [BATCH]

Creates a database on the local MariaDB/MySQL server (root, no password,
127.0.0.1:3306), migrates it with `TRUSTMSG_BINARY migrate`, then runs each
kind of statement the service writes over ROWS rows (default 10000), in
batches of BATCH rows (default 500), alone: the prepare's INSERT, the commit's UPDATE, a claim's
lease UPDATE, a whole claim (its SELECT … FOR UPDATE SKIP LOCKED and lease
UPDATE in one transaction), the SENT mark's UPDATE. For each it prints the database
server's CPU time (its process's, from /proc, so run it on a machine where
nothing else uses the server), its page changes and its redo bytes per row,
purge waited out and counted. VARIANT drops secondary indexes first, to
price them: all (default), no_topic_sent, no_state, no_due, none, or
folded (the state index and both due indexes as one, over a stored column).
docs/performance.md has the figures.
"""
import subprocess
import sys
import time

binary = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
variant = sys.argv[3] if len(sys.argv) > 3 else "all"
DB = "trustmsg_statement_cost"
pid = subprocess.run(["pidof", "mariadbd", "mysqld"], capture_output=True, text=True).stdout.split()[0]


def cpu():
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / 100.0


def sql(text, db=DB):
    return subprocess.run(["mysql", "-uroot", "-N", db], input=text.encode(), check=True,
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
subprocess.run([binary, "migrate", "--database-url", f"mysql://root@127.0.0.1:3306/{DB}"],
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
payload = "x" * 256
BATCH = int(sys.argv[4]) if len(sys.argv) > 4 else 500


def batches(statement):
    return ";\n".join(statement(lo, min(lo + BATCH, N)) for lo in range(0, N, BATCH)) + ";"


def rows(lo, hi):
    return ",".join(
        f"('bench','k{i}','trustmsg-bench',NULL,'{payload}','{{}}',UNHEX(REPEAT('ab',32)),"
        "'PREPARED',UTC_TIMESTAMP(3)+INTERVAL 3600 SECOND,UTC_TIMESTAMP(3),UTC_TIMESTAMP(3),"
        "REPEAT(X'00',40))" for i in range(lo, hi))


COLUMNS = ("id, biz_id, message_key, topic, record_key, payload, headers, content_digest, "
           "status, send_status, tombstone, version, verify_attempts, send_attempts, last_error, "
           "next_verify_at, next_send_at, kafka_partition, kafka_offset, created_at, updated_at, "
           "decided_at, sent_at, UTC_TIMESTAMP(3) AS claimed_at")
DUE = "state_at" if variant == "folded" else "next_send_at"
steps = [
    ("prepare INSERT", batches(lambda lo, hi: (
        "INSERT INTO messages (biz_id, message_key, topic, record_key, payload, headers, "
        "content_digest, status, next_verify_at, created_at, updated_at, headroom) "
        f"VALUES {rows(lo, hi)}"))),
    ("commit UPDATE", batches(lambda lo, hi: (
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
        f"version=version+1 WHERE id > {lo} AND id <= {hi}; COMMIT"))),
    ("SENT UPDATE", batches(lambda lo, hi: (
        "UPDATE messages SET send_status='SENT', next_send_at=NULL, sent_at=UTC_TIMESTAMP(3), "
        "updated_at=UTC_TIMESTAMP(3), send_attempts=send_attempts+1, kafka_partition=1, "
        "kafka_offset=12345, version=version+1, headroom=NULL "
        f"WHERE id > {lo} AND id <= {hi}"))),
]
for name, text in steps:
    settle()
    before, cpu0 = status(), cpu()
    sql(text)
    settle()
    cpu1, after = cpu(), status()
    pages = after["Innodb_buffer_pool_write_requests"] - before["Innodb_buffer_pool_write_requests"]
    redo = after["Innodb_lsn_current"] - before["Innodb_lsn_current"]
    print(f"{variant:14} {name:20} database CPU {(cpu1 - cpu0) / N * 1e6:6.1f} µs/row  "
          f"page changes {pages / N:5.1f}/row  redo {redo / N:6.0f} B/row")
sql(f"DROP DATABASE {DB}", db="")
