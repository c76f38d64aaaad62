"""The producer campaign's order service (client-sdk/conformance/campaign.md),
written from this SDK's README: FastAPI, SQLAlchemy, the transaction helper
with its barrier, the check-back endpoint, and the test hook at the crash point.

    TRUSTMSG_URL=... TRUSTMSG_BIZ_ID=... TRUSTMSG_TOKEN=tm_... TRUSTMSG_SIGNING_SECRET=whsec_... \\
    DATABASE_URL=mysql://root@127.0.0.1:3306/shop ORDERS_TOPIC=orders PORT=8000 \\
    python examples/campaign_service.py
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Optional

import sqlalchemy as sa
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from sqlalchemy.orm import Session

import trustmsg
from trustmsg import Message, barrier
from trustmsg.asgi import CheckBackASGI

env = os.environ


def sqlalchemy_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    if scheme in ("mysql", "mariadb"):
        return f"mysql+pymysql://{rest}{'&' if '?' in rest else '?'}charset=utf8mb4"
    return f"postgresql+psycopg://{rest}"


engine = sa.create_engine(
    sqlalchemy_url(env["DATABASE_URL"]), pool_pre_ping=True, pool_size=20, max_overflow=20
)
client = trustmsg.Client(env["TRUSTMSG_URL"], env["TRUSTMSG_BIZ_ID"], env["TRUSTMSG_TOKEN"])
TOPIC = env["ORDERS_TOPIC"]


def die() -> None:
    """A hard crash: no cleanup, no answer (what the campaign asks for)."""
    os.kill(os.getpid(), signal.SIGKILL)


class BusinessStepFailed(Exception):
    pass


class Order(BaseModel):
    order_id: str
    amount_cents: int
    fail: bool = False
    crash_after_local_commit: bool = False
    crash_before_answer: bool = False


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    with engine.connect() as conn:
        trustmsg.create_tables(conn)
        conn.execute(
            sa.text(
                "CREATE TABLE IF NOT EXISTS orders "
                "(order_id VARCHAR(64) PRIMARY KEY, amount_cents BIGINT NOT NULL)"
            )
        )
        conn.commit()
    yield


app = FastAPI(lifespan=lifespan)
app.routes.append(
    CheckBackASGI(env["TRUSTMSG_SIGNING_SECRET"], barrier.decider(engine)).route("/trustmsg/check")
)


@app.get("/health")
def health() -> dict[str, str]:
    return {"status": "ok"}


def place(order: Order) -> tuple[int, dict[str, object]]:
    payload = json.dumps({"order_id": order.order_id, "amount_cents": order.amount_cents})
    message = Message(f"order-{order.order_id}", TOPIC, payload, key=order.order_id)
    hook = die if order.crash_after_local_commit else None
    try:
        with Session(engine) as db, client.transaction(message, db, after_local_commit=hook) as tx:
            db.execute(
                sa.text("INSERT INTO orders (order_id, amount_cents) VALUES (:id, :amount)"),
                {"id": order.order_id, "amount": order.amount_cents},
            )
            if order.fail:
                raise BusinessStepFailed()
    except BusinessStepFailed:
        return 422, {"status": "failed"}  # rolled back here and in trustmsg
    except trustmsg.AlreadyCommittedError:
        return 200, {"status": "already_placed"}  # an earlier request placed it; its commit is sent
    except trustmsg.AlreadyRolledBackError:
        return 409, {"status": "refused"}  # rolled back before: this order id can never be placed
    except (trustmsg.UnavailableError, trustmsg.OutcomeUnknownError, sa.exc.OperationalError):
        return 503, {"status": "unavailable"}  # nothing stored (or check-back settles it): retry
    message_id: Optional[int] = tx.message.id if tx.message else None
    return 201, {"status": "placed", "message_id": message_id}


@app.post("/orders")
def orders(order: Order) -> JSONResponse:
    status, body = place(order)
    if order.crash_before_answer:
        die()
    return JSONResponse(body, status_code=status)


if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=int(env["PORT"]), log_level="warning")
