"""What a Python developer expects of the SDK, without the kit: statuses
are str enums, log lines name their module once, and a prepare answered
"decided before" is an exception (the kit's scenarios hold the rest)."""

from __future__ import annotations

import enum
import logging
import sys

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
