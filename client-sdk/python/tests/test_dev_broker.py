"""``trustmsg dev``'s in-process Kafka broker (librdkafka's mock cluster)
read and written by the SDK's own Kafka client, confluent-kafka: the
quickstart's `trustmsg tail` step done from Python. Dev mode is started here
on its own (not the kit's), its env file read, a message sent through the
HTTP API and one through the Kafka way in (the Submitter), both read back
from the topic; the process is ended by its pid."""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import trustmsg
from trustmsg import Message, MessageStatus
from trustmsg.submit import Submitter

from .conftest import kit_env, read_topic, suffix


@pytest.fixture
def dev(tmp_path: Path) -> Iterator[dict[str, str]]:
    binary = os.environ.get("TRUSTMSG_BIN") or kit_env("TRUSTMSG_KIT_BIN")
    data = tmp_path / "dev"
    log = (tmp_path / "dev.log").open("wb")
    proc = subprocess.Popen(
        [binary, "dev", "--data", str(data), "--listen", "127.0.0.1:0", "--kafka-listen", "127.0.0.1:0"],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        env_file = data / "env"
        deadline = time.monotonic() + 30
        while not (env_file.exists() and "TRUSTMSG_SUBMIT_TOPIC" in env_file.read_text()):
            assert proc.poll() is None, (tmp_path / "dev.log").read_text()
            assert time.monotonic() < deadline, "trustmsg dev wrote no env file in 30 s"
            time.sleep(0.1)
        env: dict[str, str] = {}
        for line in env_file.read_text().splitlines():
            if line.startswith("export "):
                name, _, value = line[len("export ") :].partition("=")
                env[name] = shlex.split(value)[0]
        yield env
    finally:
        proc.terminate()  # by its pid: only the process this test started
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)
        log.close()


def test_confluent_kafka_reads_and_writes_trustmsg_devs_broker(dev: dict[str, str]) -> None:
    over_http, over_kafka = f"order-{suffix()}", f"order-{suffix()}"
    topic = "orders"  # the demo producer's topic
    with trustmsg.Client(
        dev["TRUSTMSG_URL"], dev["TRUSTMSG_DEMO_BIZ_ID"], dev["TRUSTMSG_DEMO_TOKEN"]
    ) as client:
        client.prepare(Message(over_http, topic, b'{"total_cents":4200}', key="customer-7"))
        assert client.commit(over_http).status == MessageStatus.COMMITTED
        with Submitter(
            dev["TRUSTMSG_BROKERS"],
            dev["TRUSTMSG_SUBMIT_TOPIC"],
            dev["TRUSTMSG_DEMO_BIZ_ID"],
            dev["TRUSTMSG_DEMO_SIGNING_SECRET"],
        ) as submitter:
            submitter.prepare(Message(over_kafka, topic, b"by kafka"))
            submitter.commit(over_kafka)
        records = read_topic(
            dev["TRUSTMSG_BROKERS"],
            topic,
            lambda rs: {over_http, over_kafka} <= {r.header("trustmsg-message-key") for r in rs},
            secs=60,
        )
        got = {r.header("trustmsg-message-key"): r for r in records}
        assert got[over_http].key == b"customer-7" and got[over_http].value == b'{"total_cents":4200}'
        assert got[over_http].header("trustmsg-message-id") == str(client.get(over_http).id)
        assert got[over_kafka].value == b"by kafka"
