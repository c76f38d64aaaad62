"""trustmsg's Python SDK: reliable messages from a producer's own database
transaction to Kafka.

- :class:`Client` / :class:`AsyncClient`: prepare, commit, rollback, get;
  retries with backoff where safe; typed errors with trustmsg's codes.
- ``client.transaction(message, conn)``: prepare → local transaction with
  the barrier marker → commit (rollback when the block raises).
- :mod:`trustmsg.barrier`: exact check-back answers from the database;
  :mod:`trustmsg.asgi` and :mod:`trustmsg.wsgi`: the check-back endpoint.
- :mod:`trustmsg.inbox`: consumers process each message once, in effect.
- :mod:`trustmsg.submit`: the Kafka way in; :mod:`trustmsg.outbox`: the
  local message table.
"""

from ._retry import RetryPolicy
from ._version import __version__
from .barrier import AsyncLocalTransaction, LocalTransaction
from .checkback import CheckRequest
from .client import AsyncClient, Client
from .errors import (
    AlreadyCommittedError,
    AlreadyDecidedError,
    AlreadyRolledBackError,
    CommitRejectedError,
    ConflictError,
    DecisionRejectedError,
    ForbiddenError,
    InvalidRequestError,
    InvalidSignatureError,
    NoMessageIdError,
    NotAcknowledgedError,
    NotFoundError,
    NotPreparedError,
    OutcomeUnknownError,
    RollbackRejectedError,
    TrustmsgError,
    UnauthorizedError,
    UnavailableError,
    UnexpectedResponseError,
)
from .message import Decision, Message, MessageStatus, MessageView, SendStatus
from .schema import create_tables
from .transaction import AsyncTransaction, Outcome, Transaction

__all__ = [
    "AlreadyCommittedError",
    "AlreadyDecidedError",
    "AlreadyRolledBackError",
    "AsyncClient",
    "AsyncLocalTransaction",
    "AsyncTransaction",
    "CheckRequest",
    "Client",
    "CommitRejectedError",
    "ConflictError",
    "DecisionRejectedError",
    "Decision",
    "ForbiddenError",
    "InvalidRequestError",
    "InvalidSignatureError",
    "LocalTransaction",
    "Message",
    "MessageStatus",
    "MessageView",
    "NoMessageIdError",
    "NotAcknowledgedError",
    "NotFoundError",
    "NotPreparedError",
    "Outcome",
    "OutcomeUnknownError",
    "RetryPolicy",
    "RollbackRejectedError",
    "SendStatus",
    "Transaction",
    "TrustmsgError",
    "UnauthorizedError",
    "UnavailableError",
    "UnexpectedResponseError",
    "__version__",
    "create_tables",
]
