"""Type-checks every ```python block of a README with mypy --strict, so the
README cannot drift from the SDK (client-sdk/python/test runs it).

Each block becomes the body of an ``async def`` (so ``await`` and ``async
with`` fragments check as they read), after PRELUDE: the names the README's
fragments take as given (a connection, a client, a message, ...), typed, so
that a call that does not exist, a keyword the SDK does not take or a wrong
argument type fails here. A block that is a whole program (the quickstart)
is also run by tests/test_example.py.

    python tests/readme_blocks.py README.md [--keep DIR]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

#: The names README fragments use without defining them.
PRELUDE = """\
from __future__ import annotations

import asyncio
from typing import Any, Callable

import fastapi
import flask
import trustmsg
from trustmsg import AsyncClient, Client, Message, MessageView, RetryPolicy, barrier

base_url: str
biz_id: str
token: str
brokers: str
signing_secret: str
SIGNING_SECRET: str
client: Client
aclient: AsyncClient
conn: Any
aconn: Any
session: Any
engine: Any
connect: Callable[[], Any]
message: Message
record: Any
consumer: Any
app: fastapi.FastAPI
flask_app: flask.Flask
decide: Callable[[trustmsg.CheckRequest], str]
Order: Any  # a Django model
Charge: Any
def charge(conn: Any, record: Any) -> None: ...
async def async_work(conn: Any) -> None: ...
def get_wsgi_application() -> Any: ...
"""

FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks(readme: str) -> list[tuple[int, str]]:
    """The python blocks of a README, with the line each starts on."""
    return [(readme.count("\n", 0, m.start()) + 2, m.group(1)) for m in FENCE.finditer(readme)]


def module(found: list[tuple[int, str]], source: str) -> str:
    parts = [PRELUDE]
    for i, (line, code) in enumerate(found):
        parts.append(f"\n\n# {source}:{line}\nasync def _block_{i}() -> None:\n")
        parts.append(textwrap.indent(code, "    ") if code.strip() else "    pass\n")
    return "".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("readme", type=Path)
    parser.add_argument("--keep", type=Path, help="write the module here and keep it")
    args = parser.parse_args()
    found = blocks(args.readme.read_text(encoding="utf-8"))
    if not found:
        print(f"{args.readme}: no python blocks", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        out = (args.keep or Path(tmp)) / "readme_blocks_checked.py"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(module(found, str(args.readme)), encoding="utf-8")
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--strict",
                "--no-error-summary",
                "--disable-error-code=unused-ignore",
                "--disable-error-code=no-untyped-def",
                str(out),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            # Point at the README's lines, not the generated module's.
            lines = out.read_text(encoding="utf-8").splitlines()
            for report in (done.stdout + done.stderr).splitlines():
                m = re.match(r".*?:(\d+): (.*)", report)
                if not m:
                    print(report, file=sys.stderr)
                    continue
                n = int(m.group(1))
                where, offset = "?", 0
                for k in range(n - 1, -1, -1):
                    if lines[k].startswith(f"# {args.readme}:"):
                        where, offset = lines[k][2:], n - k - 2
                        break
                if where == "?":
                    print(f"(prelude) line {n}: {m.group(2)}", file=sys.stderr)
                    continue
                file, start = where.rsplit(":", 1)
                print(f"{file}:{int(start) + offset - 1}: {m.group(2)}", file=sys.stderr)
            return 1
    print(f"{args.readme}: {len(found)} python blocks type-check")
    return 0


if __name__ == "__main__":
    sys.exit(main())
