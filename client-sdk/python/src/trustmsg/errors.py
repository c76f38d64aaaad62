"""The errors of the SDK: one base class, one subclass per thing a caller may
need to tell apart, each carrying trustmsg's error ``code`` and the HTTP
``status`` when there was one.

4xx answers are final and never retried. Network errors and 5xx are retried
(every producer call is idempotent on the server) and, once the retries are
used up, become :class:`UnavailableError`.
"""

from __future__ import annotations

from typing import Any, Optional

__all__ = [
    "AlreadyCommittedError",
    "AlreadyDecidedError",
    "AlreadyRolledBackError",
    "CommitRejectedError",
    "DecisionRejectedError",
    "ConflictError",
    "ForbiddenError",
    "InvalidRequestError",
    "InvalidSignatureError",
    "NoMessageIdError",
    "NotPreparedError",
    "NotAcknowledgedError",
    "NotFoundError",
    "OutcomeUnknownError",
    "RollbackRejectedError",
    "TrustmsgError",
    "UnauthorizedError",
    "UnavailableError",
    "UnexpectedResponseError",
    "error_from_status",
]


class TrustmsgError(Exception):
    """Base class of every error this SDK raises on its own account.

    ``code`` is trustmsg's error code (``prepare_conflict``,
    ``message_not_found``, ``invalid_topic``, ...) when there is one,
    ``status`` the HTTP status of the (last) answer when there was one.
    """

    def __init__(self, message: str, *, code: Optional[str] = None, status: Optional[int] = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.status = status

    def __str__(self) -> str:
        parts = []
        if self.status is not None:
            parts.append(f"HTTP {self.status}")
        if self.code:
            parts.append(self.code)
        prefix = f"[{' '.join(parts)}] " if parts else ""
        return f"{prefix}{self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r}, status={self.status!r})"


class InvalidRequestError(TrustmsgError, ValueError):
    """The request is invalid and will stay invalid: a 400, 413 or 415 from
    trustmsg, or refused by the SDK before anything was sent (then ``status``
    is None and ``code`` the code trustmsg would have answered)."""


class UnauthorizedError(TrustmsgError):
    """401: the token is missing or wrong."""


class ForbiddenError(TrustmsgError):
    """403: the token belongs to another producer."""


class NotFoundError(TrustmsgError):
    """404: e.g. ``message_not_found`` on commit or get of an unknown message."""


class ConflictError(TrustmsgError):
    """409: ``prepare_conflict`` (same key, other content),
    ``already_committed`` (a rollback after the commit), and as
    :class:`AlreadyRolledBackError` ``already_rolled_back`` (a prepare or a
    commit after the rollback) and ``rolled_back`` (a prepare after a
    rollback that came before any prepare)."""


class AlreadyRolledBackError(ConflictError):
    """The message was rolled back before: this order can never be placed
    under its key (answer it as refused, e.g. HTTP 409). Raised by the
    transaction helper *before any local work*, when prepare is refused 409
    ``already_rolled_back`` (rolled back after its prepare) or
    ``rolled_back`` (rolled back before any prepare), when an older trustmsg
    answers the prepare 200 with status ``ROLLED_BACK``, or when the barrier
    holds the ``rollback`` marker of the key (check-back answered rollback
    first; the helper then sends the rollback itself). ``view`` is the
    message as trustmsg last showed it, when it did. A :class:`ConflictError`,
    so code that caught those still does."""

    def __init__(
        self,
        message: str,
        *,
        code: Optional[str] = "already_rolled_back",
        status: Optional[int] = 409,
        view: Optional[Any] = None,
    ) -> None:
        super().__init__(message, code=code, status=status)
        self.view = view


class AlreadyCommittedError(TrustmsgError):
    """The message was committed before: an earlier call placed this order
    (a client's retry, a double click). Answer it as placed (e.g. HTTP 200
    "already placed"); nothing was written now. Raised by the transaction
    helper *instead of running the block*, when prepare answers status
    ``COMMITTED``, or when the barrier holds the ``commit`` marker of the key
    (an earlier local transaction committed and its decision was never
    sent: the helper sends the commit itself, at once).

    ``view`` is the message as trustmsg last showed it (``COMMITTED`` once
    the commit went through; the prepare's view when the commit could not be
    delivered, then ``decision_error`` is the :class:`UnavailableError` and
    check-back commits it later). ``code`` is ``already_committed``."""

    def __init__(
        self,
        message: str,
        *,
        view: Optional[Any] = None,
        decision_error: Optional[TrustmsgError] = None,
    ) -> None:
        super().__init__(message, code="already_committed")
        self.view = view
        self.decision_error = decision_error


class NotPreparedError(TrustmsgError):
    """Prepare answered a status other than ``PREPARED`` that the helper has
    no better name for (``VERIFY_FAILED``: check-back gave up on the
    message): no local work was run. ``message_status`` is that status,
    ``view`` the answer; ``code`` is ``not_prepared``."""

    def __init__(self, message: str, *, view: Any) -> None:
        super().__init__(message, code="not_prepared", status=200)
        self.view = view
        self.message_status: str = view.status


class DecisionRejectedError(TrustmsgError):
    """Base of :class:`CommitRejectedError` and
    :class:`RollbackRejectedError`: the local transaction is over and
    trustmsg refused the decision that matches it. The local database and
    the message now disagree: a person must look. ``error`` is trustmsg's
    refusal (also the ``__cause__``), ``transaction`` the helper's
    :class:`~trustmsg.Transaction` (its ``message`` is the prepare's view);
    ``code`` and ``status`` are the refusal's."""

    def __init__(self, message: str, *, error: TrustmsgError, transaction: Any) -> None:
        super().__init__(message, code=error.code, status=error.status)
        self.error = error
        self.transaction = transaction


class CommitRejectedError(DecisionRejectedError):
    """The local transaction COMMITTED (the block's work is stored) and
    trustmsg refused the commit (e.g. 409 ``already_rolled_back``: the
    message was rolled back meanwhile). Never an outcome to read later: it
    is raised, so it cannot go unnoticed."""


class RollbackRejectedError(DecisionRejectedError):
    """The block raised, the local transaction was rolled back, and trustmsg
    refused the rollback (e.g. 409 ``already_committed``). ``work_error`` is
    the block's own exception (also the ``__context__``)."""

    def __init__(
        self, message: str, *, error: TrustmsgError, transaction: Any, work_error: BaseException
    ) -> None:
        super().__init__(message, error=error, transaction=transaction)
        self.work_error = work_error


class UnavailableError(TrustmsgError):
    """Network errors or 5xx on every attempt. The request may or may not have
    reached trustmsg; every producer call is idempotent, so repeating it later
    is safe. ``attempts`` says how many requests were made."""

    def __init__(
        self,
        message: str,
        *,
        attempts: int = 1,
        code: Optional[str] = None,
        status: Optional[int] = None,
    ) -> None:
        super().__init__(message, code=code, status=status)
        self.attempts = attempts

    def __str__(self) -> str:
        return f"trustmsg unavailable after {self.attempts} attempt(s): {super().__str__()}"


class NotAcknowledgedError(UnavailableError):
    """A record for trustmsg's submit topic (the Kafka way in) was not
    acknowledged by Kafka in time. It may still have been written; every
    submitted operation is idempotent, so submitting it again is safe."""


class UnexpectedResponseError(TrustmsgError):
    """Any other answer: an unexpected status, or a 2xx whose body is not what
    the API promises."""


class InvalidSignatureError(TrustmsgError):
    """A check-back call that is not trustmsg's: a missing header, a timestamp
    too far from our clock, or no matching ``v1`` signature (answer 401).
    ``code`` is ``missing_signature``, ``bad_timestamp``,
    ``signature_expired`` or ``bad_signature``."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message, code=code, status=401)


class AlreadyDecidedError(TrustmsgError):
    """The barrier already holds a marker for this message: ``decision`` is
    ``"rollback"`` when check-back answered rollback before the local
    transaction could insert its marker (the local transaction is rolled back
    and must not be retried under this key), ``"commit"`` when a local
    transaction of this key committed before (a duplicate)."""

    def __init__(self, message: str, *, decision: str) -> None:
        super().__init__(message, code="already_decided")
        self.decision = decision


class OutcomeUnknownError(TrustmsgError):
    """The local COMMIT failed in a way that leaves its outcome unknown (the
    connection broke during it) and the barrier could not be asked. Nothing
    is sent to trustmsg: check-back asks the barrier later, which answers
    what the database really did."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="outcome_unknown")


class NoMessageIdError(TrustmsgError, ValueError):
    """The record has no usable ``trustmsg-message-id`` header (missing,
    empty, not a decimal unsigned 64-bit integer): trustmsg did not send it,
    and the inbox refuses to process it unkeyed."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="no_message_id")


def error_from_status(status: int, code: Optional[str], message: str) -> TrustmsgError:
    """The error for a final (non-retried) answer of trustmsg."""
    if status in (400, 413, 415):
        return InvalidRequestError(message, code=code or "invalid_request", status=status)
    if status == 401:
        return UnauthorizedError(message, code=code or "unauthorized", status=status)
    if status == 403:
        return ForbiddenError(message, code=code or "forbidden", status=status)
    if status == 404:
        return NotFoundError(message, code=code or "not_found", status=status)
    if status == 409 and code in ("already_rolled_back", "rolled_back"):
        return AlreadyRolledBackError(message, code=code, status=status)
    if status == 409:
        return ConflictError(message, code=code or "conflict", status=status)
    return UnexpectedResponseError(message, code=code, status=status)
