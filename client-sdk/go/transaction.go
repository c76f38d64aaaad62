package trustmsg

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// TxProducer is a way in to trustmsg that [Transaction] prepares, commits
// and rolls back through: [*Client] (HTTP; R is *[MessageView], trustmsg
// applied the call) or the kafka package's Submitter (R says where the
// record is in the submit topic; Kafka stored it, trustmsg applies it later).
type TxProducer[R any] interface {
	BizID() string
	Prepare(ctx context.Context, msg Message) (R, error)
	Commit(ctx context.Context, messageKey string) (R, error)
	Rollback(ctx context.Context, messageKey string) (R, error)
}

// Outcome is what [Transaction] did after the prepare.
type Outcome[R any] struct {
	// MessageKey is the message's key.
	MessageKey string
	// Prepared is prepare's answer.
	Prepared R
	// LocalCommitted reports whether the local transaction committed.
	LocalCommitted bool
	// Decided is the commit's (or rollback's) answer, when it was
	// delivered.
	Decided R
	// DecisionSent is true when the commit or rollback was delivered.
	DecisionSent bool
	// DecisionErr is why the commit or rollback was not delivered: an
	// unavailable trustmsg ([IsUnavailable]: check-back decides, from the
	// barrier) or a refusal (e.g. "already_rolled_back").
	DecisionErr error
}

// LeftToCheckBack reports whether no decision was delivered and trustmsg's
// check-back will make it, from the barrier.
func (o *Outcome[R]) LeftToCheckBack() bool {
	return !o.DecisionSent && (o.DecisionErr == nil || IsUnavailable(o.DecisionErr))
}

// decisionTimeout bounds a commit or rollback call made after the local
// transaction ended, whatever became of the caller's context: the decision
// is worth delivering even when the caller gave up.
const decisionTimeout = time.Minute

// ErrNotPrepared matches every *[DecidedError]: the message was not
// PREPARED when this call prepared it, so no local work ran (or, after this
// call's work failed and was rolled back, an identical request had
// committed it).
var ErrNotPrepared = errors.New("trustmsg: the message was decided before; no local work ran")

// DecidedError is [Transaction]'s error when the message was decided before
// this call (a client's retry, a second request for the same order): the
// local work did not run, nothing was written now. Also when this call's
// work failed (rolled back, nothing written) while an identical request
// committed first: Status COMMITTED, By "barrier".
//
// [errors.Is] matches [ErrAlreadyCommitted] when Status is COMMITTED (an
// order to answer "already placed"), [ErrAlreadyRolledBack] when it is
// ROLLED_BACK (an order that can never be placed: refuse it), and
// [ErrNotPrepared] always (also for VERIFY_FAILED, whose message trustmsg
// will never deliver either). [errors.As] gets the details:
//
//	var decided *trustmsg.DecidedError
//	if errors.As(err, &decided) { log.Print(decided.Status, decided.By) }
type DecidedError struct {
	// MessageKey is the message's key.
	MessageKey string
	// Status is the message's status: [StatusCommitted],
	// [StatusRolledBack], [StatusVerifyFailed], ...
	Status MessageStatus
	// By says who knew: "prepare" (trustmsg's answer to the prepare) or
	// "barrier" (the marker of an earlier local transaction: a commit
	// marker makes the helper send the commit, a rollback marker the
	// rollback, before it returns).
	By string
	// View is the message as trustmsg showed it last: prepare's answer
	// when it was 200, the commit's answer after a commit marker, nil when
	// there is none (a 409, the Kafka way in).
	View *MessageView
	// Err is what said so: trustmsg's 409 refusal of the prepare (a
	// *[Error]), or the barrier's [ErrAlreadyCommitted] /
	// [ErrAlreadyRolledBack]; nil for a prepare answered 200.
	Err error
}

func (e *DecidedError) Error() string {
	return fmt.Sprintf("trustmsg: message %q was already %s (known by the %s); this call committed no local work", e.MessageKey, e.Status, e.By)
}

// Is matches [ErrNotPrepared], and [ErrAlreadyCommitted] or
// [ErrAlreadyRolledBack] by Status.
func (e *DecidedError) Is(target error) bool {
	switch target {
	case ErrNotPrepared:
		return true
	case ErrAlreadyCommitted:
		return e.Status == StatusCommitted
	case ErrAlreadyRolledBack:
		return e.Status == StatusRolledBack
	}
	return false
}

// Unwrap returns Err.
func (e *DecidedError) Unwrap() error { return e.Err }

// Errors of a decision trustmsg refused after the local transaction ended,
// matched by a *[RejectedDecisionError] with [errors.Is].
var (
	// ErrCommitRejected: the local transaction committed (now, or in an
	// earlier call whose commit marker the barrier holds) but trustmsg
	// refused the commit.
	ErrCommitRejected = errors.New("trustmsg: the local transaction committed but trustmsg refused the commit")
	// ErrRollbackRejected: the local transaction failed but trustmsg
	// refused the rollback.
	ErrRollbackRejected = errors.New("trustmsg: the local transaction failed but trustmsg refused the rollback")
)

// RejectedDecisionError is [Transaction]'s error when trustmsg refused (not
// merely failed to receive) the decision the local transaction calls for:
// the commit after a local commit (now or by an earlier call, Decision
// [Commit]), or the rollback after a failed local transaction (Decision
// [Rollback]). The local database and the message disagree: someone must
// look (it should never happen; an operator's decision can cause it).
//
// [errors.Is] matches [ErrCommitRejected] or [ErrRollbackRejected] by
// Decision, and for a rollback the work's own error; [errors.As] finds
// trustmsg's *[Error] through it.
type RejectedDecisionError struct {
	// MessageKey is the message's key.
	MessageKey string
	// Decision is the decision trustmsg refused.
	Decision Decision
	// LocalErr is the local transaction's failure (a *[LocalError]) when
	// Decision is [Rollback]; nil when it committed.
	LocalErr error
	// Err is trustmsg's refusal (a *[Error], e.g. 409
	// "already_rolled_back").
	Err error
}

func (e *RejectedDecisionError) Error() string {
	if e.Decision == Commit {
		return fmt.Sprintf("trustmsg: %q committed locally but trustmsg refused its commit: %v", e.MessageKey, e.Err)
	}
	return fmt.Sprintf("trustmsg: the local transaction of %q failed (%v) but trustmsg refused its rollback: %v", e.MessageKey, e.LocalErr, e.Err)
}

// Is matches [ErrCommitRejected] or [ErrRollbackRejected] by Decision.
func (e *RejectedDecisionError) Is(target error) bool {
	return target == ErrCommitRejected && e.Decision == Commit ||
		target == ErrRollbackRejected && e.Decision == Rollback
}

// Unwrap returns the local failure (if any) and trustmsg's refusal.
func (e *RejectedDecisionError) Unwrap() []error {
	if e.LocalErr == nil {
		return []error{e.Err}
	}
	return []error{e.LocalErr, e.Err}
}

// TxOption configures one [Transaction] call.
type TxOption func(*txConfig)

type txConfig struct {
	afterLocalCommit func(ctx context.Context, messageKey string) error
}

// WithAfterLocalCommit sets a test hook called right after the local
// transaction committed and before the commit is sent to trustmsg: the
// point where a crash leaves a locally committed order whose message is
// still PREPARED. If hook returns an error, Transaction sends no decision
// and returns that error (wrapped; Outcome.LocalCommitted is true):
// check-back, or the client's retry (which finds the barrier's commit marker
// and sends the commit), decides. For tests of your own service, e.g. one
// that kills itself there:
//
//	trustmsg.WithAfterLocalCommit(func(context.Context, string) error {
//		return syscall.Kill(os.Getpid(), syscall.SIGKILL)
//	})
func WithAfterLocalCommit(hook func(ctx context.Context, messageKey string) error) TxOption {
	return func(c *txConfig) { c.afterLocalCommit = hook }
}

// Transaction is the transaction helper: prepare msg, run work in a local
// transaction on the barrier's database together with the barrier's commit
// marker, then commit the message if the transaction committed or roll it
// back if it did not. The barrier answers the check-back of a message
// whose decision got lost (serve [CheckHandler] with [Barrier.Decide]).
//
// Work runs only for a message that prepare left PREPARED and whose barrier
// holds no marker: a retry of a decided message runs nothing.
//
// Errors:
//
//   - prepare failed: its *[Error]; work never ran and the outcome is nil.
//     (A prepare that was [IsUnavailable] may still have been stored; its
//     check-back finds no marker and answers rollback.)
//   - the message was decided before: a *[DecidedError], work never ran.
//     [ErrAlreadyRolledBack]: prepare was refused 409 "already_rolled_back"
//     or "rolled_back" (outcome nil), or the barrier holds a rollback
//     marker (the rollback is sent). [ErrAlreadyCommitted]: prepare
//     answered COMMITTED, or the barrier holds the commit marker of an
//     earlier call that committed locally, whose commit is sent now (if
//     trustmsg cannot be reached, Outcome.DecisionErr says so and
//     check-back commits). Other statuses (VERIFY_FAILED): [ErrNotPrepared].
//   - work failed: a *[LocalError] wrapping work's own error ([errors.Is]
//     finds it); the transaction was rolled back and so is the message
//     (Outcome.DecisionErr says if the rollback could not be delivered:
//     check-back answers rollback). Before the rollback is sent the
//     barrier is asked as check-back asks it ([Barrier.Check]), which
//     leaves a rollback marker: an identical request waiting on this one's
//     commit marker then finds it and gets [ErrAlreadyRolledBack] instead
//     of committing locally a change whose commit trustmsg would refuse.
//     If that request committed first, the barrier answers commit: its
//     commit is sent and the error is a *[DecidedError] matching
//     [ErrAlreadyCommitted] (By "barrier"; the order was placed by it). If
//     the barrier cannot be asked, the rollback is sent as it is.
//   - the database failed, or the COMMIT's outcome is unknown
//     ([ErrOutcomeUnknown]): work's changes are not (known to be)
//     committed; a rollback is sent unless the outcome is unknown, where
//     check-back decides.
//   - the [WithAfterLocalCommit] hook failed: its error; no decision sent.
//   - trustmsg refused the commit after the local commit, or the rollback
//     after a failed local transaction: a *[RejectedDecisionError].
//
// nil means the local transaction committed and the commit was delivered,
// or could not be delivered ([Outcome.LeftToCheckBack]: trustmsg was
// unavailable and check-back will commit it from the barrier).
//
// With the Kafka way in (R is not *[MessageView]) prepare's answer carries
// no status: only the barrier's markers stop a decided message.
//
// T is the barrier database's transaction type, which work gets: *sql.Tx
// for [NewBarrier], pgx.Tx for trustpgx.NewBarrier, *gorm.DB for
// trustgorm.NewBarrier. Work that takes another type is refused before the
// prepare. Logs go to the barrier's logger ([WithLogger]).
func Transaction[R, T any](ctx context.Context, p TxProducer[R], b *Barrier, msg Message, work func(ctx context.Context, tx T) error, opts ...TxOption) (*Outcome[R], error) {
	if p == nil || b == nil || work == nil {
		return nil, errors.New("trustmsg: Transaction needs a producer, a barrier and the work")
	}
	if err := checkKeys("transaction", p.BizID(), msg.MessageKey); err != nil {
		return nil, err
	}
	if err := checkTxType[T]("transaction", b.db); err != nil {
		return nil, err
	}
	var cfg txConfig
	for _, o := range opts {
		o(&cfg)
	}
	key := msg.MessageKey
	prepared, err := p.Prepare(ctx, msg)
	if err != nil {
		if code := ErrorCode(err); IsConflict(err) && (code == "already_rolled_back" || code == "rolled_back") {
			return nil, &DecidedError{MessageKey: key, Status: StatusRolledBack, By: "prepare", Err: err}
		}
		return nil, err
	}
	out := &Outcome[R]{MessageKey: key, Prepared: prepared}
	if view, ok := any(prepared).(*MessageView); ok && view != nil && view.Status != StatusPrepared {
		// A retry of a decided message (or an older server's 200 for a
		// rolled-back one): running the work would store what can never be
		// sent, or store it twice.
		return out, &DecidedError{MessageKey: key, Status: view.Status, By: "prepare", View: view}
	}
	localErr := RunInTx(ctx, b, p.BizID(), key, work)

	decideCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), decisionTimeout)
	defer cancel()
	switch {
	case localErr == nil:
		out.LocalCommitted = true
		if cfg.afterLocalCommit != nil {
			if err := cfg.afterLocalCommit(ctx, key); err != nil {
				return out, fmt.Errorf("trustmsg: %q committed locally; the after-local-commit hook stopped its commit: %w", key, err)
			}
		}
		if err := commit(ctx, decideCtx, b.log, p, out); err != nil {
			return out, err
		}
		return out, nil
	case errors.Is(localErr, ErrAlreadyCommitted):
		// An earlier call committed locally and did not get to tell
		// trustmsg (it crashed, or is telling it right now): the commit is
		// known, so it is sent now rather than left to check-back.
		if err := commit(ctx, decideCtx, b.log, p, out); err != nil {
			return out, err
		}
		view, _ := any(out.Decided).(*MessageView)
		return out, &DecidedError{MessageKey: key, Status: StatusCommitted, By: "barrier", View: view, Err: localErr}
	case errors.Is(localErr, ErrOutcomeUnknown):
		// Rolling back could be wrong: check-back answers from the barrier.
		b.log.WarnContext(ctx, "trustmsg: no decision sent; check-back will decide from the barrier", "message_key", key, "error", localErr)
		return out, localErr
	case errors.As(localErr, new(*LocalError)):
		// The work failed. Before the rollback is sent, the barrier records
		// it, as check-back would: an identical request waiting on this
		// one's commit marker then finds the rollback marker instead of
		// committing locally a change whose commit trustmsg would refuse.
		// If that request committed first, its commit marker is the answer:
		// the order was placed by it, and its commit is sent.
		d, err := b.Check(decideCtx, p.BizID(), key)
		switch {
		case err != nil:
			logFailure(decideCtx, b.log, slog.LevelWarn, "trustmsg: the barrier could not record the rollback; sending it anyway", err, "message_key", key)
		case d == Commit:
			b.log.InfoContext(ctx, "trustmsg: the local work failed but an identical request committed first; sending its commit", "message_key", key, "work_error", localErr)
			if err := commit(ctx, decideCtx, b.log, p, out); err != nil {
				return out, err
			}
			view, _ := any(out.Decided).(*MessageView)
			return out, &DecidedError{MessageKey: key, Status: StatusCommitted, By: "barrier", View: view, Err: ErrAlreadyCommitted}
		}
	}
	decided, err := p.Rollback(decideCtx, key)
	switch {
	case err == nil:
		out.Decided, out.DecisionSent = decided, true
	case IsUnavailable(err):
		logFailure(decideCtx, b.log, slog.LevelWarn, "trustmsg: rollback not delivered; check-back will roll back", err, "message_key", key)
		out.DecisionErr = err
	default:
		logFailure(decideCtx, b.log, slog.LevelError, "trustmsg: the local transaction failed but trustmsg refused the rollback", err, "message_key", key)
		out.DecisionErr = err
		return out, &RejectedDecisionError{MessageKey: key, Decision: Rollback, LocalErr: localErr, Err: err}
	}
	if errors.Is(localErr, ErrAlreadyRolledBack) {
		return out, &DecidedError{MessageKey: key, Status: StatusRolledBack, By: "barrier", Err: localErr}
	}
	return out, localErr
}

// commit sends the commit of a locally committed message: nil when it was
// delivered or could not be (check-back commits from the barrier), a
// *RejectedDecisionError when trustmsg refused it.
func commit[R any](ctx, decideCtx context.Context, log *slog.Logger, p TxProducer[R], out *Outcome[R]) error {
	decided, err := p.Commit(decideCtx, out.MessageKey)
	switch {
	case err == nil:
		out.Decided, out.DecisionSent = decided, true
		return nil
	case IsUnavailable(err):
		logFailure(decideCtx, log, slog.LevelWarn, "trustmsg: commit not delivered; check-back will commit from the barrier", err, "message_key", out.MessageKey)
		out.DecisionErr = err
		return nil
	default:
		logFailure(decideCtx, log, slog.LevelError, "trustmsg: the local transaction committed but trustmsg refused the commit", err, "message_key", out.MessageKey)
		out.DecisionErr = err
		return &RejectedDecisionError{MessageKey: out.MessageKey, Decision: Commit, Err: err}
	}
}
