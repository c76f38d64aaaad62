"""What a Python developer expects of the SDK, without the kit: statuses
are str enums, log lines name their module once, and a prepare answered
"decided before" is an exception (the kit's scenarios hold the rest)."""

from __future__ import annotations

import enum
import json
import logging
import sys
from typing import Any, Callable

import pytest

import trustmsg
from trustmsg import Decision, MessageStatus, Outcome, RetryPolicy, SendStatus

from .conftest import free_port


@pytest.mark.parametrize("kind", [MessageStatus, SendStatus, Decision, Outcome])
def test_statuses_are_str_enums_that_compare_with_plain_strings(kind: type[enum.Enum]) -> None:
    if sys.version_info >= (3, 11):
        assert issubclass(kind, enum.StrEnum)
    for member in kind:
        assert isinstance(member, str)
        assert member == member.value
        assert str(member) == member.value, "str() is the value, as enum.StrEnum's"
        assert f"{member}" == member.value
        assert kind(member.value) is member


def test_a_status_a_newer_trustmsg_sends_is_kept_not_refused() -> None:
    view = trustmsg.MessageView.from_json(
        {"id": 1, "biz_id": "shop", "message_key": "k", "status": "PAUSED", "send_status": "SENT"}
    )
    assert view.status == "PAUSED" and isinstance(view.status, MessageStatus)
    assert view.send_status is SendStatus.SENT


def test_decision_all_is_kept_for_old_code() -> None:
    assert Decision.ALL == (Decision.COMMIT, Decision.ROLLBACK, Decision.UNKNOWN)  # type: ignore[attr-defined]
    assert "rollback" in trustmsg.message.DECISIONS


def test_a_log_line_names_the_sdk_once(caplog: pytest.LogCaptureFixture) -> None:
    """``%(name)s: %(message)s`` (the usual format) reads
    ``trustmsg.client: POST … failed …``, never ``trustmsg: trustmsg: …``."""
    retry = RetryPolicy(max_retries=1, min_delay=0.01, max_delay=0.02)
    caplog.set_level(logging.WARNING, logger="trustmsg")
    with (
        trustmsg.Client(f"http://127.0.0.1:{free_port()}", "shop", "t", retry=retry) as client,
        pytest.raises(trustmsg.UnavailableError),
    ):
        client.get("order-1")
    lines = [logging.Formatter("%(name)s: %(message)s").format(r) for r in caplog.records]
    assert lines, "the retry was not logged"
    for line in lines:
        assert line.startswith("trustmsg.client: GET "), line
        assert "trustmsg: trustmsg" not in line and not line.startswith("trustmsg: "), line


def _older_trustmsg(status_by_path: dict[str, str]) -> Any:
    """A WSGI app answering every call 200 with a message in the given
    status: what an older trustmsg answered a decided message with."""

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        status = status_by_path[environ["PATH_INFO"]]
        body = {"id": 7, "biz_id": "shop", "message_key": "order-1", "status": status}
        start_response("200 OK", [("content-type", "application/json")])
        return [json.dumps(body).encode()]

    return app


def test_a_200_that_stands_for_a_refusal_is_raised(serve_wsgi: Callable[[Any], str]) -> None:
    url = serve_wsgi(
        _older_trustmsg(
            {
                "/v1/messages/prepare": "ROLLED_BACK",
                "/v1/messages/commit": "ROLLED_BACK",
                "/v1/messages/rollback": "COMMITTED",
            }
        )
    )
    with trustmsg.Client(url, "shop", "t") as client:
        with pytest.raises(trustmsg.AlreadyRolledBackError) as prepared:
            client.prepare(trustmsg.Message("order-1", "orders", b"x"))
        assert prepared.value.view is not None and prepared.value.view.status == "ROLLED_BACK"
        with pytest.raises(trustmsg.AlreadyRolledBackError):
            client.commit("order-1")
        with pytest.raises(trustmsg.ConflictError) as rolled:
            client.rollback("order-1")
        assert rolled.value.code == "already_committed"


@pytest.mark.asyncio
async def test_a_200_that_stands_for_a_refusal_is_raised_async(serve_wsgi: Callable[[Any], str]) -> None:
    url = serve_wsgi(_older_trustmsg({"/v1/messages/prepare": "VERIFY_FAILED"}))
    async with trustmsg.AsyncClient(url, "shop", "t") as client:
        with pytest.raises(trustmsg.NotPreparedError) as refused:
            await client.prepare(trustmsg.Message("order-1", "orders", b"x"))
        assert refused.value.message_status == "VERIFY_FAILED"
