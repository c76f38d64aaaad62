package trustmsg

import (
	"context"
	"database/sql"
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

// Transaction is the transaction helper: prepare msg, run work in a local
// transaction on the barrier's database together with the barrier's commit
// marker, then commit the message if the transaction committed or roll it
// back if it did not. The barrier answers the check-back of a message
// whose decision got lost (serve [CheckHandler] with [Barrier.Decide]).
//
// Errors:
//
//   - prepare failed: its *[Error]; work never ran and the outcome is nil.
//     (A prepare that was [IsUnavailable] may still have been stored; its
//     check-back finds no marker and answers rollback.)
//   - work failed: a *[LocalError] wrapping work's own error ([errors.Is]
//     finds it); the transaction was rolled back and so is the message
//     (Outcome.DecisionErr says if the rollback could not be delivered:
//     check-back answers rollback). The message is never committed then.
//   - a marker existed ([ErrAlreadyCommitted], [ErrAlreadyRolledBack]),
//     the database failed, or the COMMIT's outcome is unknown
//     ([ErrOutcomeUnknown]): work's changes are not (known to be)
//     committed; a rollback is sent unless an earlier run committed or the
//     outcome is unknown, where check-back decides.
//   - the local transaction committed but trustmsg refused the commit
//     (e.g. "already_rolled_back" after an operator's decision): a *[Error]
//     with Outcome.LocalCommitted true. Local state and message disagree:
//     alert someone.
//
// nil means the local transaction committed and the commit was delivered,
// or could not be delivered ([Outcome.LeftToCheckBack]: trustmsg was
// unavailable and check-back will commit it from the barrier).
func Transaction[R any](ctx context.Context, p TxProducer[R], b *Barrier, msg Message, work func(ctx context.Context, tx *sql.Tx) error) (*Outcome[R], error) {
	if p == nil || b == nil || work == nil {
		return nil, errors.New("trustmsg: Transaction needs a producer, a barrier and the work")
	}
	if err := checkKeys("transaction", p.BizID(), msg.MessageKey); err != nil {
		return nil, err
	}
	key := msg.MessageKey
	prepared, err := p.Prepare(ctx, msg)
	if err != nil {
		return nil, err
	}
	out := &Outcome[R]{MessageKey: key, Prepared: prepared}
	localErr := b.RunInTx(ctx, p.BizID(), key, work)

	decideCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), decisionTimeout)
	defer cancel()
	if localErr == nil {
		out.LocalCommitted = true
		decided, err := p.Commit(decideCtx, key)
		switch {
		case err == nil:
			out.Decided, out.DecisionSent = decided, true
			return out, nil
		case IsUnavailable(err):
			slog.WarnContext(ctx, "trustmsg: commit not delivered; check-back will commit from the barrier", "message_key", key, "error", err)
			out.DecisionErr = err
			return out, nil
		default:
			slog.ErrorContext(ctx, "trustmsg: the local transaction committed but trustmsg refused the commit", "message_key", key, "error", err)
			out.DecisionErr = err
			return out, fmt.Errorf("trustmsg: %q committed locally but its commit was refused: %w", key, err)
		}
	}
	if errors.Is(localErr, ErrAlreadyCommitted) || errors.Is(localErr, ErrOutcomeUnknown) {
		// Rolling back could be wrong: check-back answers from the barrier.
		slog.WarnContext(ctx, "trustmsg: no decision sent; check-back will decide from the barrier", "message_key", key, "error", localErr)
		return out, localErr
	}
	decided, err := p.Rollback(decideCtx, key)
	if err != nil {
		if IsUnavailable(err) {
			slog.WarnContext(ctx, "trustmsg: rollback not delivered; check-back will roll back", "message_key", key, "error", err)
		} else {
			slog.ErrorContext(ctx, "trustmsg: the local transaction failed but trustmsg refused the rollback", "message_key", key, "error", err)
		}
		out.DecisionErr = err
	} else {
		out.Decided, out.DecisionSent = decided, true
	}
	return out, localErr
}
