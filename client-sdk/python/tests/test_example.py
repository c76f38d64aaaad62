"""The FastAPI order-service example, run for real under uvicorn against the
real trustmsg, MariaDB and PostgreSQL, and Kafka."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import httpx

from trustmsg import MessageStatus

from .conftest import DB, Kit, read_topic, signed_post, suffix

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "order_service.py"


def load_example() -> Any:
    spec = importlib.util.spec_from_file_location("order_service_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_order_service_example(kit: Kit, db: DB, serve_asgi: Any) -> None:
    example = load_example()
    p = kit.register("orders")
    settings = example.Settings(
        trustmsg_url=kit.url,
        biz_id=p.biz_id,
        token=p.token,
        signing_secret=p.secret,
        database_url=db.url,
        topic=p.topic,
    )
    base = serve_asgi(example.create_app(settings))
    kit.admin(
        "PUT",
        f"/v1/producers/{p.biz_id}",
        {"verify_url": base + "/trustmsg/check", "topics": [p.topic], "first_verify_after_ms": 1000},
    )
    order_id = suffix()
    with httpx.Client(base_url=base, timeout=30) as http:
        created = http.post(
            "/orders", json={"order_id": order_id, "customer": "customer-7", "amount_cents": 4200}
        )
        assert created.status_code == 201, created.text
        body = created.json()
        assert body["outcome"] == "committed"
        assert http.get(f"/orders/{order_id}").json()["amount_cents"] == 4200

        declined_id = suffix()
        declined = http.post(
            "/orders", json={"order_id": declined_id, "customer": "c", "amount_cents": 10**7}
        )
        assert declined.status_code == 402
        assert http.get(f"/orders/{declined_id}").status_code == 404

        # A client's retry of the placed order: already placed, nothing written.
        retried = http.post(
            "/orders", json={"order_id": order_id, "customer": "customer-7", "amount_cents": 4200}
        )
        assert retried.status_code == 200, retried.text
        assert retried.json() == {
            "order_id": order_id,
            "message_id": body["message_id"],
            "outcome": "already_placed",
        }
        # A retry of the declined order: refused for good (409), never a 503.
        declined_again = http.post(
            "/orders", json={"order_id": declined_id, "customer": "c", "amount_cents": 10**7}
        )
        assert declined_again.status_code == 409, declined_again.text
        assert "refused" in declined_again.json()["detail"]
        again = http.post("/orders", json={"order_id": order_id, "customer": "customer-7", "amount_cents": 1})
        assert again.status_code == 409
        assert "prepare_conflict" in again.json()["detail"]
        assert (
            http.post("/orders", json={"order_id": "x", "customer": "c", "amount_cents": 0}).status_code
            == 422
        )

    with kit.client(p) as client:
        assert client.get(f"order-{declined_id}-created").status == MessageStatus.ROLLED_BACK
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert len(recs) == 1
    assert recs[0].key == b"customer-7"
    assert json.loads(recs[0].value) == {"order_id": order_id, "customer": "customer-7", "amount_cents": 4200}
    assert recs[0].header("trustmsg-message-id") == str(body["message_id"])

    # Its check-back endpoint answers from the barrier, as trustmsg would ask it.
    call = json.dumps(
        {
            "biz_id": p.biz_id,
            "message_key": f"order-{order_id}-created",
            "message_id": body["message_id"],
            "attempt": 1,
            "prepared_at": "2026-01-01T00:00:00Z",
        }
    ).encode()
    assert signed_post(base + "/trustmsg/check", p.secret, call) == (
        200,
        {"message_id": body["message_id"], "decision": "commit"},
    )


def test_quickstart_runs_and_is_the_readme_example(kit: Kit, postgres_db: DB) -> None:
    import os
    import subprocess

    quickstart = EXAMPLE.parent / "quickstart.py"
    readme = (EXAMPLE.parent.parent / "README.md").read_text(encoding="utf-8")
    assert quickstart.read_text(encoding="utf-8").split('"""', 2)[2].strip() in readme
    p = kit.register("quick")
    order_id = f"order-{suffix()}"
    env = dict(
        os.environ,
        TRUSTMSG_URL=kit.url,
        TRUSTMSG_DEMO_BIZ_ID=p.biz_id,
        TRUSTMSG_DEMO_TOKEN=p.token,
        DATABASE_URL=postgres_db.url,
        ORDER_ID=order_id,
        ORDERS_TOPIC=p.topic,
    )
    done = subprocess.run(
        [sys.executable, str(quickstart)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    outcome, message_id = done.stdout.split()
    assert outcome == "committed"
    recs = read_topic(kit.kafka, p.topic, lambda rs: len(rs) >= 1)
    assert recs[0].header("trustmsg-message-id") == message_id
    assert recs[0].value == b'{"total_cents":4200}'
    assert postgres_db.query("SELECT total_cents FROM orders WHERE id = %s", (order_id,)) == [(4200,)]
