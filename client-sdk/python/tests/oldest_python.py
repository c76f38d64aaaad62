"""Run by client-sdk/python/test with the oldest Python the package supports
(3.9), against the installed wheel: every module imports, and the pure parts
(signatures, records, messages, the shipped SQL) agree with the vectors."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

import trustmsg
import trustmsg.asgi
import trustmsg.barrier
import trustmsg.inbox
import trustmsg.outbox
import trustmsg.schema
import trustmsg.submit
import trustmsg.wsgi
from trustmsg import checkback


def main(vectors: Path) -> None:
    sigs = json.loads((vectors / "check-signatures.json").read_text(encoding="utf-8"))
    for c in sigs["cases"]:
        try:
            checkback.verify(c["secret"], c["headers"], c["body"].encode(), now=c["now"])
            ok = True
        except trustmsg.InvalidSignatureError:
            ok = False
        assert ok == c["valid"], c["name"]
    sub = json.loads((vectors / "submit-records.json").read_text(encoding="utf-8"))
    for c in sub["cases"]:
        value = base64.b64decode(c["value_base64"])
        data = trustmsg.submit.signing_input(
            c["op"], c["biz_id"], c["message_key"], c["topic"], c["key"], c["headers"], value
        )
        assert trustmsg.submit.sign_record(sub["secret"], data) == c["signature"], c["name"]
    heads = json.loads((vectors / "record-headers.json").read_text(encoding="utf-8"))
    for c in heads["cases"]:
        headers = [(n, None if v is None else v.encode()) for n, v in c["headers"]]
        assert trustmsg.inbox.message_id(headers) == c["message_id"], c["name"]
    assert "trustmsg_barrier" in trustmsg.schema.sql("postgres.sql")
    assert trustmsg.Message("k", "t", b"x").to_request("shop")["payload_encoding"] == "base64"
    # The str enums' fallback on 3.9/3.10 behaves as enum.StrEnum does on 3.11+.
    status = trustmsg.MessageStatus.PREPARED
    assert isinstance(status, str) and status == "PREPARED" and str(status) == "PREPARED"
    assert f"{status}" == "PREPARED" and f"{status:>9}" == " PREPARED"
    assert trustmsg.MessageStatus("PREPARED") is status
    assert trustmsg.MessageStatus("SOMETHING_NEW") == "SOMETHING_NEW"  # a newer trustmsg's status
    assert str(trustmsg.Outcome.COMMITTED) == "committed" and trustmsg.Decision.COMMIT in ("commit",)
    print(f"Python {sys.version.split()[0]}: trustmsg {trustmsg.__version__} agrees with the vectors")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
