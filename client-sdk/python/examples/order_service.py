"""An order service on FastAPI: an order and its "order created" message,
committed together through trustmsg, with the check-back endpoint answering
from the barrier. Against ``trustmsg dev`` (its demo producer's check-back
URL is this service's, http://127.0.0.1:3000/trustmsg/check):

    trustmsg dev &
    . trustmsg-dev/env        # TRUSTMSG_URL, TRUSTMSG_DEMO_BIZ_ID, TRUSTMSG_DEMO_TOKEN (tm_...),
                              # TRUSTMSG_DEMO_SIGNING_SECRET (whsec_...), TRUSTMSG_BROKERS
    export TRUSTMSG_BIZ_ID=$TRUSTMSG_DEMO_BIZ_ID TRUSTMSG_TOKEN=$TRUSTMSG_DEMO_TOKEN \\
           TRUSTMSG_SIGNING_SECRET=$TRUSTMSG_DEMO_SIGNING_SECRET \\
           DATABASE_URL=mysql://root@127.0.0.1:3306/shop ORDERS_TOPIC=orders
    python examples/order_service.py          # listens on 127.0.0.1:3000 ($PORT)

    curl -X POST localhost:3000/orders -H 'content-type: application/json' \\
         -d '{"order_id": "42", "customer": "customer-7", "amount_cents": 4200}'

With a producer of your own, register it with ``verify_url``
http://<this host>:3000/trustmsg/check. ``DATABASE_URL`` may be
``mysql://`` (PyMySQL) or ``postgres://`` (psycopg).

``POST /orders`` answers 201 (placed now), 200 (placed by an earlier request
with this order id: a client's retry; nothing written now), 402 (payment
declined: nothing stored, the message rolled back), 409 (this order id was
refused before, or exists with other content: it can never be placed), 503
(trustmsg unreachable before anything was stored: retry).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Optional

import sqlalchemy as sa
from fastapi import Depends, FastAPI, HTTPException, Response
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

import trustmsg
from trustmsg import Message, barrier
from trustmsg.asgi import CheckBackASGI

#: Orders above this are declined by the (pretend) payment step.
CREDIT_LIMIT_CENTS = 100_000


@dataclass(frozen=True)
class Settings:
    trustmsg_url: str
    biz_id: str
    token: str
    signing_secret: str
    database_url: str
    topic: str

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        return cls(
            trustmsg_url=env["TRUSTMSG_URL"],
            biz_id=env["TRUSTMSG_BIZ_ID"],
            token=env["TRUSTMSG_TOKEN"],
            signing_secret=env["TRUSTMSG_SIGNING_SECRET"],
            database_url=env["DATABASE_URL"],
            topic=env.get("ORDERS_TOPIC", "orders"),
        )


def sqlalchemy_url(url: str) -> str:
    """mysql://… and postgres://… as SQLAlchemy URLs with PyMySQL / psycopg."""
    scheme, rest = url.split("://", 1)
    if scheme in ("mysql", "mariadb"):
        return f"mysql+pymysql://{rest}{'&' if '?' in rest else '?'}charset=utf8mb4"
    if scheme in ("postgres", "postgresql"):
        return f"postgresql+psycopg://{rest}"
    raise ValueError(f"DATABASE_URL must be mysql:// or postgres://, not {scheme}://")


class NewOrder(BaseModel):
    order_id: str = Field(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9-]+$")
    customer: str = Field(min_length=1, max_length=64)
    amount_cents: int = Field(gt=0)


class Created(BaseModel):
    order_id: str
    message_id: Optional[int]
    outcome: str


class PaymentDeclined(Exception):
    pass


def create_app(settings: Settings) -> FastAPI:
    engine = sa.create_engine(sqlalchemy_url(settings.database_url), pool_pre_ping=True)
    client = trustmsg.Client(settings.trustmsg_url, settings.biz_id, settings.token)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        with engine.connect() as conn:
            trustmsg.create_tables(conn)
            conn.execute(
                sa.text(
                    "CREATE TABLE IF NOT EXISTS shop_orders (id VARCHAR(64) PRIMARY KEY, "
                    "customer VARCHAR(64) NOT NULL, amount_cents BIGINT NOT NULL)"
                )
            )
            conn.commit()
        yield
        client.close()
        engine.dispose()

    app = FastAPI(title="order service", lifespan=lifespan)
    # trustmsg asks here when it never heard the commit (a crash, a lost call).
    app.routes.append(
        CheckBackASGI(settings.signing_secret, barrier.decider(engine)).route("/trustmsg/check")
    )

    def session() -> Iterator[Session]:
        with Session(engine) as s:
            yield s

    @app.post("/orders", status_code=201)
    def create_order(order: NewOrder, response: Response, db: Session = Depends(session)) -> Created:  # noqa: B008
        payload = json.dumps(
            {"order_id": order.order_id, "customer": order.customer, "amount_cents": order.amount_cents}
        )
        message = Message(f"order-{order.order_id}-created", settings.topic, payload, key=order.customer)
        try:
            with client.transaction(message, db) as tx:
                db.execute(
                    sa.text(
                        "INSERT INTO shop_orders (id, customer, amount_cents) "
                        "VALUES (:id, :customer, :amount)"
                    ),
                    {"id": order.order_id, "customer": order.customer, "amount": order.amount_cents},
                )
                if order.amount_cents > CREDIT_LIMIT_CENTS:
                    raise PaymentDeclined(f"{order.amount_cents} cents is over the credit limit")
        except PaymentDeclined as e:
            # The order row is rolled back and the message with it: nothing reaches Kafka.
            raise HTTPException(status_code=402, detail=str(e)) from e
        except trustmsg.AlreadyCommittedError as placed:
            # A retry of an order an earlier request placed (prepare answered
            # COMMITTED, or the helper found the local commit and sent it now).
            response.status_code = 200
            view = placed.view if isinstance(placed.view, trustmsg.MessageView) else None
            return Created(
                order_id=order.order_id, message_id=view.id if view else None, outcome="already_placed"
            )
        except trustmsg.AlreadyRolledBackError as e:
            # Its message was rolled back before (a declined payment the client
            # never heard of): this order id can never be placed. Not a 503.
            raise HTTPException(status_code=409, detail=f"order {order.order_id} was refused") from e
        except trustmsg.ConflictError as e:
            raise HTTPException(status_code=409, detail=f"order {order.order_id} exists ({e.code})") from e
        except trustmsg.UnavailableError as e:
            raise HTTPException(status_code=503, detail="trustmsg is unavailable; try again") from e
        if tx.message is None or tx.outcome is None:  # not reached: the block ran, so both are set
            raise HTTPException(status_code=500, detail="no outcome")
        return Created(order_id=order.order_id, message_id=tx.message.id, outcome=tx.outcome.value)

    @app.get("/orders/{order_id}")
    def get_order(order_id: str, db: Session = Depends(session)) -> dict[str, object]:  # noqa: B008
        row = db.execute(
            sa.text("SELECT id, customer, amount_cents FROM shop_orders WHERE id = :id"), {"id": order_id}
        ).first()
        if row is None:
            raise HTTPException(status_code=404, detail="no such order")
        return {"order_id": row[0], "customer": row[1], "amount_cents": row[2]}

    return app


if __name__ == "__main__":
    import uvicorn

    uvicorn.run(create_app(Settings.from_env()), host="127.0.0.1", port=int(os.environ.get("PORT", "3000")))
