"""Fixtures: the contract kit's environment (client-sdk/conformance/kit run),
real MariaDB and PostgreSQL connections, producers registered with the real
trustmsg, a Kafka reader, and real HTTP servers for check-back endpoints."""

from __future__ import annotations

import json
import os
import secrets
import socket
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import psycopg
import pymysql
import pytest
import uvicorn

import trustmsg

HERE = Path(__file__).resolve().parent
CONFORMANCE = HERE.parent.parent / "conformance"
REQUIRE_KIT = os.environ.get("TRUSTMSG_PY_REQUIRE_KIT") == "1"


def vectors_dir() -> Path:
    return Path(os.environ.get("TRUSTMSG_KIT_VECTORS", str(CONFORMANCE / "vectors")))


def vector(name: str) -> Any:
    return json.loads((vectors_dir() / name).read_text(encoding="utf-8"))


def kit_env(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        if REQUIRE_KIT:
            pytest.fail(f"{name} is not set: run under client-sdk/conformance/kit run -- …")
        pytest.skip(f"{name} is not set: run under client-sdk/conformance/kit run -- …")
    return value


def suffix() -> str:
    return secrets.token_hex(4)


# --- databases -----------------------------------------------------------


def mysql_connect(url: str, **kw: Any) -> pymysql.connections.Connection[Any]:
    u = urllib.parse.urlsplit(url)
    return pymysql.connect(
        host=u.hostname or "127.0.0.1",
        port=u.port or 3306,
        user=urllib.parse.unquote(u.username or "root"),
        password=urllib.parse.unquote(u.password or ""),
        database=u.path.lstrip("/"),
        charset="utf8mb4",
        **kw,
    )


def pg_dsn(url: str) -> str:
    u = urllib.parse.urlsplit(url)
    return urllib.parse.urlunsplit(u._replace(scheme="postgresql"))


def sa_url(dialect: str, url: str, driver: str) -> str:
    u = urllib.parse.urlsplit(url)
    scheme = {"mysql": f"mysql+{driver}", "postgres": f"postgresql+{driver}"}[dialect]
    return urllib.parse.urlunsplit(u._replace(scheme=scheme)) + (
        "?charset=utf8mb4" if dialect == "mysql" else ""
    )


@dataclass
class DB:
    """One producer database of the kit: MariaDB or PostgreSQL."""

    dialect: str
    url: str

    def connect(self) -> Any:
        if self.dialect == "mysql":
            return mysql_connect(self.url)
        return psycopg.connect(pg_dsn(self.url))

    def query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Reads on a connection of its own (what another session sees)."""
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
                rows = [tuple(r) for r in cur.fetchall()]
            conn.commit()
            return rows
        finally:
            conn.close()

    def run(self, sql: str, params: tuple[Any, ...] = ()) -> None:
        conn = self.connect()
        try:
            with conn.cursor() as cur:
                cur.execute(sql, params)
            conn.commit()
        finally:
            conn.close()

    def sqlalchemy_url(self) -> str:
        return sa_url(self.dialect, self.url, "pymysql" if self.dialect == "mysql" else "psycopg")

    def business_table(self) -> str:
        """A table of business rows of its own (the tests run at once on shared databases)."""
        name = f"orders_{suffix()}"
        if self.dialect == "mysql":
            self.run(f"CREATE TABLE {name} (id VARCHAR(64) PRIMARY KEY, note VARCHAR(64)) ENGINE=InnoDB")
        else:
            self.run(f"CREATE TABLE {name} (id VARCHAR(64) PRIMARY KEY, note VARCHAR(64))")
        return name


_created: set[str] = set()


def _database(dialect: str) -> DB:
    db = DB(dialect, kit_env("TRUSTMSG_KIT_MYSQL_URL" if dialect == "mysql" else "TRUSTMSG_KIT_POSTGRES_URL"))
    if dialect not in _created:
        conn = db.connect()
        try:
            trustmsg.create_tables(conn, outbox=True)
        finally:
            conn.close()
        _created.add(dialect)
    return db


@pytest.fixture(params=["mysql", "postgres"])
def db(request: pytest.FixtureRequest) -> DB:
    return _database(str(request.param))


@pytest.fixture
def mysql_db() -> DB:
    return _database("mysql")


@pytest.fixture
def postgres_db() -> DB:
    return _database("postgres")


# --- the service ---------------------------------------------------------


@dataclass
class Producer:
    biz_id: str
    token: str
    secret: str
    topic: str


@dataclass
class Kit:
    url: str
    proxy_url: str
    admin_token: str
    kafka: str
    submit_topic: str
    outbox_biz_id: str
    outbox_topic_prefix: str

    def admin(self, method: str, path: str, body: Optional[dict[str, Any]] = None) -> Any:
        req = urllib.request.Request(
            self.url + path,
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"authorization": f"Bearer {self.admin_token}", "content-type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=30) as answer:
            data = answer.read()
        return json.loads(data) if data else None

    def register(self, name: str, verify_url: str = "http://127.0.0.1:9/none") -> Producer:
        """A producer of the test's own, with a topic of its own."""
        biz_id = f"py-{name}-{suffix()}"
        topic = f"py.{name}.{suffix()}"
        view = self.admin(
            "PUT",
            f"/v1/producers/{biz_id}",
            {"verify_url": verify_url, "topics": [topic], "first_verify_after_ms": 1000},
        )
        return Producer(biz_id, view["token"], view["signing_secret"], topic)

    def client(self, p: Producer, **kw: Any) -> trustmsg.Client:
        return trustmsg.Client(self.url, p.biz_id, p.token, **kw)

    def async_client(self, p: Producer, **kw: Any) -> trustmsg.AsyncClient:
        return trustmsg.AsyncClient(self.url, p.biz_id, p.token, **kw)

    def wait_status(
        self,
        client: trustmsg.Client,
        key: str,
        status: str,
        send_status: Optional[str] = None,
        secs: float = 30,
    ) -> trustmsg.MessageView:
        deadline = time.monotonic() + secs
        while True:
            # Not there yet is a state too: a record of the Kafka way in is
            # applied once trustmsg's consumer group has joined and read it.
            try:
                view: Optional[trustmsg.MessageView] = client.get(key)
            except trustmsg.NotFoundError:
                view = None
            if (
                view is not None
                and view.status == status
                and (send_status is None or view.send_status == send_status)
            ):
                return view
            if time.monotonic() > deadline:
                now = "not found" if view is None else f"still {view.status}/{view.send_status}"
                raise AssertionError(f"{key}: {now}, wanted {status}/{send_status}")
            time.sleep(0.2)


@pytest.fixture(scope="session")
def kit() -> Kit:
    return Kit(
        url=kit_env("TRUSTMSG_KIT_URL"),
        proxy_url=kit_env("TRUSTMSG_KIT_PROXY_URL"),
        admin_token=kit_env("TRUSTMSG_KIT_ADMIN_TOKEN"),
        kafka=kit_env("TRUSTMSG_KIT_KAFKA"),
        submit_topic=kit_env("TRUSTMSG_KIT_SUBMIT_TOPIC"),
        outbox_biz_id=kit_env("TRUSTMSG_KIT_OUTBOX_BIZ_ID"),
        outbox_topic_prefix=kit_env("TRUSTMSG_KIT_OUTBOX_TOPIC_PREFIX"),
    )


# --- Kafka ---------------------------------------------------------------


@dataclass
class Record:
    key: Optional[bytes]
    value: bytes
    headers: list[tuple[str, Optional[bytes]]]

    def header(self, name: str) -> Optional[str]:
        for n, v in self.headers:
            if n == name:
                return None if v is None else v.decode()
        return None


def consume(brokers: str, topic: str, until: Callable[[list[Any]], bool], secs: float = 30.0) -> list[Any]:
    """The confluent-kafka messages of ``topic`` from the beginning, until
    ``until(messages)`` holds (fails after ``secs``). The topic appears with
    its first record: its metadata is asked again until then."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": brokers,
            "group.id": f"py-test-{suffix()}",
            "enable.auto.commit": False,
            "allow.auto.create.topics": False,
        }
    )
    out: list[Any] = []
    deadline = time.monotonic() + secs
    try:
        while True:
            md = consumer.list_topics(topic, timeout=5)
            t = md.topics.get(topic)
            if t is not None and t.error is None and t.partitions:
                consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in t.partitions])
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: no such topic after {secs} s")
            time.sleep(0.2)
        while not until(out):
            if time.monotonic() > deadline:
                raise AssertionError(f"{topic}: {len(out)} record(s) after {secs} s: {[records(out)]!r}")
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            error = msg.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    continue
                raise AssertionError(f"Kafka: {error}")
            out.append(msg)
    finally:
        consumer.close()
    return out


def records(messages: list[Any]) -> list[Record]:
    return [Record(m.key(), m.value() or b"", list(m.headers() or [])) for m in messages]


def read_topic(
    brokers: str, topic: str, until: Callable[[list[Record]], bool], secs: float = 30.0
) -> list[Record]:
    """Like :func:`consume`, as :class:`Record`s."""
    return records(consume(brokers, topic, lambda ms: until(records(ms)), secs))


# --- real HTTP servers ---------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def serve_asgi() -> Iterator[Callable[[Any], str]]:
    """Serves an ASGI app with uvicorn on 127.0.0.1; returns its base URL."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(app: Any) -> str:
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            if time.monotonic() > deadline:
                raise AssertionError("uvicorn did not start")
            time.sleep(0.02)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(10)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _ThreadingWSGIServer(WSGIServer):
    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        t = threading.Thread(target=self._handle, args=(request, client_address), daemon=True)
        t.start()

    def _handle(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)


@pytest.fixture
def serve_wsgi() -> Iterator[Callable[[Any], str]]:
    """Serves a WSGI app (threaded wsgiref) on 127.0.0.1; returns its base URL."""
    servers: list[tuple[WSGIServer, threading.Thread]] = []

    def start(app: Any) -> str:
        server = make_server(
            "127.0.0.1", 0, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler
        )
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        servers.append((server, thread))
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server, thread in servers:
        server.shutdown()
        server.server_close()
        thread.join(10)


def signed_post(url: str, secret: str, body: bytes, *, timestamp: Optional[int] = None) -> tuple[int, Any]:
    """POSTs a check-back call as trustmsg would: signed, now (or at ``timestamp``)."""
    ts = int(time.time()) if timestamp is None else timestamp
    wid = f"chk_{suffix()}"
    headers = {
        "content-type": "application/json",
        "webhook-id": wid,
        "webhook-timestamp": str(ts),
        "webhook-signature": trustmsg.checkback.sign(secret, wid, ts, body),
    }
    return post(url, body, headers)


def post(url: str, body: bytes, headers: dict[str, str]) -> tuple[int, Any]:
    req = urllib.request.Request(url, data=body, method="POST", headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"null")
