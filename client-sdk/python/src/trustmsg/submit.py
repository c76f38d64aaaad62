"""The Kafka way in: prepare, commit and rollback submitted as signed records
to trustmsg's submit topic (``docs/kafka-submit.md``), with confluent-kafka.

A :class:`Submitter` call returns once Kafka has **acknowledged** the record
(``enable.idempotence=true``, ``acks=all``): durable in Kafka, not yet
applied by trustmsg. What trustmsg cannot apply goes to the dead-letter topic
``<submit topic>.dlq`` with the HTTP API's error code; a message whose
decision never arrives is settled by check-back, so a producer on this way in
answers check-back from its barrier too. What the signature cannot express
(a line break in a field or header, an ``=`` in a header name) and headers in
the reserved ``trustmsg-`` namespace are refused before anything is sent.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable, Optional, Union

from . import _validate as v
from .checkback import secret_key
from .errors import InvalidRequestError, NotAcknowledgedError
from .message import Message

if TYPE_CHECKING:
    from .transaction import Transaction

__all__ = ["SubmitRecord", "Submitted", "Submitter", "signing_input", "submit_record"]

OPS = ("prepare", "commit", "rollback")
OP, BIZ_ID, MESSAGE_KEY, TOPIC, KEY, SIGNATURE = (
    "trustmsg-op",
    "trustmsg-biz-id",
    "trustmsg-message-key",
    "trustmsg-topic",
    "trustmsg-key",
    "trustmsg-signature",
)
DELIVER_AT, DELIVER_AFTER_MS = "trustmsg-deliver-at", "trustmsg-deliver-after-ms"
_OWN_SETTINGS = (
    "bootstrap.servers",
    "metadata.broker.list",
    "enable.idempotence",
    "acks",
    "request.required.acks",
)


def _line(value: str, what: str) -> bytes:
    if "\n" in value or "\r" in value:
        raise InvalidRequestError(
            f"{what} holds a line break: the record's signature could not tell it apart",
            code="invalid_request",
        )
    return value.encode("utf-8")


def signing_input(
    op: str,
    biz_id: str,
    message_key: str,
    topic: str = "",
    key: Optional[str] = None,
    headers: Optional[Mapping[str, str]] = None,
    value: bytes = b"",
) -> bytes:
    """The exact bytes a record's signature covers: the lines op, biz_id,
    message_key, topic, key (empty when absent), each other header as
    ``name=value`` in byte order of the names, each ending in ``\\n``, then
    the value. Raises :class:`InvalidRequestError` for what would be ambiguous."""
    if op not in OPS:
        raise InvalidRequestError(f"op must be one of {OPS}, not {op!r}", code="invalid_request")
    out = bytearray()
    for field, what in (
        (op, "op"),
        (biz_id, "biz_id"),
        (message_key, "message_key"),
        (topic, "topic"),
        (key or "", "key"),
    ):
        out += _line(field, what) + b"\n"
    for name, val in sorted((headers or {}).items(), key=lambda kv: kv[0].encode("utf-8")):
        if "=" in name:
            raise InvalidRequestError(
                f"header name {name!r} holds '=': the record's signature could not tell it apart",
                code="invalid_request",
            )
        out += _line(name, f"header name {name!r}") + b"=" + _line(val, f"header {name!r}") + b"\n"
    return bytes(out) + bytes(value)


def sign_record(secret: str, data: bytes) -> str:
    """``v1,<base64 HMAC-SHA256>`` of ``data`` with the signing secret's key."""
    return "v1," + base64.b64encode(hmac.new(secret_key(secret), data, hashlib.sha256).digest()).decode(
        "ascii"
    )


@dataclass(frozen=True)
class SubmitRecord:
    """A record for the submit topic: keyed by the message key."""

    key: bytes
    value: bytes
    headers: list[tuple[str, Union[str, bytes, None]]]


def submit_record(
    secret: str,
    op: str,
    biz_id: str,
    message_key: str,
    topic: str = "",
    key: Optional[str] = None,
    headers: Optional[Mapping[str, str]] = None,
    value: bytes = b"",
) -> SubmitRecord:
    """The signed record of one operation (``topic``, ``key``, ``headers`` and
    ``value`` for a prepare only)."""
    signature = sign_record(secret, signing_input(op, biz_id, message_key, topic, key, headers, value))
    h: list[tuple[str, Union[str, bytes, None]]] = [
        (OP, op.encode()),
        (BIZ_ID, biz_id.encode()),
        (MESSAGE_KEY, message_key.encode()),
    ]
    if op == "prepare":
        h.append((TOPIC, topic.encode()))
        if key is not None:
            h.append((KEY, key.encode()))
    for name, val in sorted((headers or {}).items(), key=lambda kv: kv[0].encode("utf-8")):
        h.append((name, val.encode("utf-8")))
    h.append((SIGNATURE, signature.encode()))
    return SubmitRecord(key=message_key.encode("utf-8"), value=bytes(value), headers=h)


@dataclass(frozen=True)
class Submitted:
    """Where Kafka wrote the record."""

    partition: int
    offset: int


class Submitter:
    """Submits prepare, commit and rollback to trustmsg's submit topic as
    producer ``biz_id``, signed with its ``signing_secret`` (``whsec_…``).

    ``config`` adds librdkafka settings (``message.timeout.ms``, security);
    the brokers, ``enable.idempotence=true`` and ``acks=all`` are the
    Submitter's own. Thread-safe. A call Kafka does not acknowledge within
    ``message.timeout.ms`` (default 30 s) raises :class:`NotAcknowledgedError`;
    submitting again is safe.
    """

    def __init__(
        self,
        bootstrap_servers: str,
        topic: str,
        biz_id: str,
        signing_secret: str,
        *,
        config: Optional[Mapping[str, Any]] = None,
    ) -> None:
        from confluent_kafka import Producer

        secret_key(signing_secret)  # a secret that cannot sign would fail every call
        self.topic = v.check_topic(topic)
        self.biz_id = v.check_biz_id(biz_id)
        self._secret = signing_secret
        settings: dict[str, Any] = {"message.timeout.ms": 30000}
        for name, value in (config or {}).items():
            if name in _OWN_SETTINGS:
                raise ValueError(
                    f"Kafka setting {name!r} is the Submitter's own (brokers, idempotence, acks=all)"
                )
            settings[name] = value
        settings.update({"bootstrap.servers": bootstrap_servers, "enable.idempotence": True, "acks": "all"})
        self._timeout = float(settings["message.timeout.ms"]) / 1000 + 5
        self._producer = Producer(settings)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Submitter(topic={self.topic!r}, biz_id={self.biz_id!r}, signing_secret='***')"

    def prepare(self, message: Message) -> Submitted:
        """Submits the prepare of ``message`` (its delivery time and trace
        context as the contract's headers)."""
        headers = dict(message.headers)
        if message.deliver_at is not None:
            headers[DELIVER_AT] = message.deliver_at_text() or ""
        if message.deliver_after_ms is not None:
            headers[DELIVER_AFTER_MS] = str(message.deliver_after_ms)
        headers.update(message.trace_headers())
        return self._send(
            submit_record(
                self._secret,
                "prepare",
                self.biz_id,
                message.message_key,
                message.topic,
                message.key,
                headers,
                message.payload_bytes,
            )
        )

    def transaction(
        self,
        message: Message,
        connection: object,
        *,
        after_local_commit: Optional[Callable[[], object]] = None,
        connect: Optional[Any] = None,
    ) -> Transaction[Submitted]:
        """The transaction helper over the Kafka way in: ``with
        submitter.transaction(message, conn) as tx:`` submits the prepare, runs
        the block in a local transaction with the barrier marker, then submits
        the commit (the rollback when the block raises). A record Kafka did not
        acknowledge leaves the decision to check-back
        (``Outcome.COMMIT_LEFT_TO_CHECK_BACK``); what trustmsg refuses shows in
        the dead-letter topic, never here: a Kafka acknowledgement says
        nothing of the message's status, so unlike :meth:`trustmsg.Client.transaction`
        it cannot refuse a message decided before, nor check it is still
        PREPARED before the local COMMIT (the barrier still refuses: its
        markers raise AlreadyCommittedError / AlreadyRolledBackError)."""
        from .transaction import Transaction

        return Transaction(self, message, connection, after_local_commit=after_local_commit, connect=connect)

    def commit(self, message_key: str) -> Submitted:
        return self._send(
            submit_record(self._secret, "commit", self.biz_id, v.check_message_key(message_key))
        )

    def rollback(self, message_key: str) -> Submitted:
        return self._send(
            submit_record(self._secret, "rollback", self.biz_id, v.check_message_key(message_key))
        )

    def _send(self, record: SubmitRecord) -> Submitted:
        done = threading.Event()
        result: dict[str, Any] = {}

        def delivered(err: Any, msg: Any) -> None:
            result["err"], result["msg"] = err, msg
            done.set()

        with self._lock:
            self._producer.produce(
                self.topic, key=record.key, value=record.value, headers=record.headers, on_delivery=delivered
            )
        # librdkafka reports every record within message.timeout.ms; the
        # deadline only guards against a callback that never comes.
        deadline = time.monotonic() + self._timeout
        while not done.is_set() and time.monotonic() < deadline:
            self._producer.poll(0.05)
        err = result.get("err")
        if not done.is_set() or err is not None:
            raise NotAcknowledgedError(
                f"Kafka did not acknowledge the record: {err or 'no answer'}", attempts=1
            )
        msg = result["msg"]
        return Submitted(partition=int(msg.partition()), offset=int(msg.offset()))

    def flush(self, timeout: float = 30.0) -> int:
        """Waits for every record in flight; the number still in flight."""
        return int(self._producer.flush(timeout))

    def close(self) -> None:
        self.flush()

    def __enter__(self) -> Submitter:
        return self

    def __exit__(
        self, t: Optional[type[BaseException]], e: Optional[BaseException], tb: Optional[TracebackType]
    ) -> None:
        self.close()
