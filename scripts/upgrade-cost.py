#!/usr/bin/env python3
"""What upgrading a large `messages` table past migration 0018 takes.

Usage: scripts/upgrade-cost.py OLD_BINARY NEW_BINARY [ROWS] [PAYLOAD] [LONG_EVERY]

Creates a database on the local MariaDB server (root, no password,
127.0.0.1, port 3306 or $STATEMENT_COST_PORT), migrates it with OLD_BINARY
(a build from before migration 0018), and fills `messages` with ROWS
finished rows (default 1,000,000) of PAYLOAD bytes (default 256), every
LONG_EVERY-th of them (default 10; 0: none) with a payload of 9,000 bytes
instead, long enough to be moved (MariaDB's sequence engine writes them,
100,000 per statement). Then it times what the upgrade takes:

- `NEW_BINARY migrate`: what applying the migrations takes (the part that
  could lock the table);
- `NEW_BINARY serve` until it logs that the move of the long contents is
  over (the walk of every row, a short transaction per chunk), while a
  probe updates one random row's state columns every 100 ms with its own
  client and records how long each UPDATE took: no row waits long for the
  move.

It prints both times, the rows walked and moved, and the probe's slowest
UPDATEs, then drops the database. docs/performance.md has the figures.
"""
import os
import random
import re
import socket
import subprocess
import sys
import threading
import time

old, new = sys.argv[1], sys.argv[2]
ROWS = int(sys.argv[3]) if len(sys.argv) > 3 else 1_000_000
PAYLOAD = int(sys.argv[4]) if len(sys.argv) > 4 else 256
LONG_EVERY = int(sys.argv[5]) if len(sys.argv) > 5 else 10
PORT = int(os.environ.get("STATEMENT_COST_PORT", "3306"))
DB = "trustmsg_upgrade_cost"
URL = f"mysql://root@127.0.0.1:{PORT}/{DB}"
CLIENT = ["mysql", "--protocol=tcp", "-h127.0.0.1", f"-P{PORT}", "-uroot", "-N"]


def sql(text, db=DB):
    return subprocess.run(CLIENT + [db], input=text.encode(), check=True,
                          capture_output=True).stdout.decode(errors="replace")


sql(f"DROP DATABASE IF EXISTS {DB}; CREATE DATABASE {DB}", db="")
subprocess.run([old, "migrate", "--database-url", URL], check=True, capture_output=True)
began = time.monotonic()
CHUNK = 100_000
long_case = (f"IF(seq % {LONG_EVERY} = 0, 9000, {PAYLOAD})" if LONG_EVERY else str(PAYLOAD))
for lo in range(1, ROWS + 1, CHUNK):
    hi = min(lo + CHUNK - 1, ROWS)
    sql("INSERT INTO messages (biz_id, message_key, topic, payload, headers, content_digest, "
        "status, send_status, version, created_at, updated_at, decided_at, sent_at, "
        "payload_bytes) "
        f"SELECT 'upgrade', CONCAT('k', seq), 'orders', REPEAT('x', {long_case}), '{{}}', "
        "UNHEX(REPEAT('ab', 32)), 'COMMITTED', 'SENT', 2, UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), "
        f"UTC_TIMESTAMP(3), UTC_TIMESTAMP(3), {long_case} FROM seq_{lo}_to_{hi}")
longs = f", every {LONG_EVERY}th of 9000 B" if LONG_EVERY else ""
print(f"{ROWS} rows written by {os.path.basename(old)} in {time.monotonic() - began:.1f} s "
      f"({PAYLOAD} B payloads{longs})", flush=True)

began = time.monotonic()
subprocess.run([new, "migrate", "--database-url", URL], check=True, capture_output=True)
print(f"`{os.path.basename(new)} migrate` (migration 0018): {time.monotonic() - began:.2f} s",
      flush=True)

probe_times = []
stop = threading.Event()


def probe():
    while not stop.is_set():
        row = random.randint(1, ROWS)
        t = time.monotonic()
        sql(f"UPDATE messages SET version = version + 1 WHERE id = {row}")
        probe_times.append(time.monotonic() - t)
        time.sleep(0.1)


with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    listen = f"127.0.0.1:{s.getsockname()[1]}"
began = time.monotonic()
service = subprocess.Popen(
    [new, "serve", "--database-url", URL, "--listen", listen, "--admin-token", "upgrade-cost",
     "--no-forwarder", "--no-verifier"],
    env={**os.environ, "TRUSTMSG_LOG": "info"}, stdout=subprocess.PIPE,
    stderr=subprocess.STDOUT, text=True)
prober = threading.Thread(target=probe)
prober.start()
done = None
for line in service.stdout:
    if "moved the long contents" in line:
        done = line.strip()
        break
took = time.monotonic() - began
stop.set()
prober.join()
service.terminate()
service.wait()
moved = sql("SELECT COUNT(*) FROM messages WHERE payload_apart").strip()
kept = sql("SELECT COUNT(*) FROM message_payloads").strip()
print(f"the move, from `serve` starting to its log line: {took:.1f} s ({moved} rows apart, "
      f"{kept} contents in message_payloads)")
line = re.sub(r"^.*?(moved the long)", r"\1", done or "none")
print(f"  its line: {line}")
probe_times.sort()
print(f"probe UPDATEs during the move: {len(probe_times)}, slowest "
      + ", ".join(f"{t * 1000:.0f} ms" for t in probe_times[-3:])
      + f", median {probe_times[len(probe_times) // 2] * 1000:.0f} ms (a mysql client each)")
sql(f"DROP DATABASE {DB}", db="")
