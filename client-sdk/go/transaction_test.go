package trustmsg_test

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"testing"
	"time"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
)

// When trustmsg cannot be reached after the local commit, the helper says
// so without an error (the change is made) and check-back commits the
// message from the barrier; when it cannot be reached after a failed local
// transaction, check-back rolls it back. A second run of a committed key
// sends no decision. Through the kit's fault proxy and the real service.
func TestTransactionDecisionsLeftToCheckBack(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	conn := kittest.Open(t, e, trustmsg.MySQL)
	ordersTable(t, conn)
	b := barrier(t, conn, trustmsg.MySQL)
	base, set := kittest.ServeLater(t)
	p := kittest.Register(t, e, "tx", base+"/check", 1000, e.ProxyURL,
		trustmsg.WithRetry(trustmsg.RetryPolicy{MaxRetries: 2, MinDelay: 10 * time.Millisecond, MaxDelay: 20 * time.Millisecond}))
	v, err := trustmsg.NewVerifier(p.Secret)
	if err != nil {
		t.Fatal(err)
	}
	set(trustmsg.CheckHandler(v, b.Decide))
	ctx := context.Background()
	failDecision := func(key string, work func(context.Context, *sql.Tx) error) func(context.Context, *sql.Tx) error {
		return func(ctx context.Context, tx *sql.Tx) error {
			kittest.Faults(t, e, key, 503, 3) // every attempt of the decision
			return work(ctx, tx)
		}
	}

	committed := "order-" + kittest.Random()
	out, err := trustmsg.Transaction(ctx, p.Client, b, trustmsg.Message{MessageKey: committed, Topic: "go-tx", Payload: []byte("x")},
		failDecision(committed, insertOrder(trustmsg.MySQL, committed, 1)))
	if err != nil || !out.LocalCommitted || out.DecisionSent || !out.LeftToCheckBack() || !trustmsg.IsUnavailable(out.DecisionErr) {
		t.Fatalf("%+v, %v", out, err)
	}
	kittest.Await(t, p.Client, committed, 30*time.Second, func(v *trustmsg.MessageView) bool { return v.Status == trustmsg.StatusCommitted })

	failed := "order-" + kittest.Random()
	out, err = trustmsg.Transaction(ctx, p.Client, b, trustmsg.Message{MessageKey: failed, Topic: "go-tx", Payload: []byte("x")},
		failDecision(failed, func(context.Context, *sql.Tx) error { return errOutOfStock }))
	if !errors.Is(err, errOutOfStock) || out.LocalCommitted || !out.LeftToCheckBack() {
		t.Fatalf("%+v, %v", out, err)
	}
	kittest.Await(t, p.Client, failed, 30*time.Second, func(v *trustmsg.MessageView) bool { return v.Status == trustmsg.StatusRolledBack })

	// The committed key again: the work does not run, no rollback is sent.
	ran := false
	out, err = trustmsg.Transaction(ctx, p.Client, b, trustmsg.Message{MessageKey: committed, Topic: "go-tx", Payload: []byte("x")},
		func(context.Context, *sql.Tx) error { ran = true; return nil })
	if !errors.Is(err, trustmsg.ErrAlreadyCommitted) || ran || out.DecisionSent || out.DecisionErr != nil {
		t.Fatalf("%+v, %v (work ran: %v)", out, err, ran)
	}
	if v, err := p.Client.Get(ctx, committed); err != nil || v.Status != trustmsg.StatusCommitted {
		t.Fatalf("%+v, %v", v, err)
	}

	// A prepare that fails: the work never runs, nothing is returned but the error.
	ran = false
	out, err = trustmsg.Transaction(ctx, p.Client, b, trustmsg.Message{MessageKey: committed, Topic: "go-tx", Payload: []byte("other")},
		func(context.Context, *sql.Tx) error { ran = true; return nil })
	if !trustmsg.IsConflict(err) || trustmsg.ErrorCode(err) != "prepare_conflict" || out != nil || ran {
		t.Fatalf("%+v, %v (work ran: %v)", out, err, ran)
	}
}

// A panic in the work rolls the local transaction back and goes on.
func TestRunInTxRollsBackOnPanic(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	conn := kittest.Open(t, e, trustmsg.Postgres)
	ordersTable(t, conn)
	b := barrier(t, conn, trustmsg.Postgres)
	biz, key := "go-panic-"+kittest.Random(), "order-"+kittest.Random()
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic did not go on")
			}
		}()
		_ = b.RunInTx(context.Background(), biz, key, func(ctx context.Context, tx *sql.Tx) error {
			if err := insertOrder(trustmsg.Postgres, key, 1)(ctx, tx); err != nil {
				return err
			}
			panic("boom")
		})
	}()
	if markers(t, conn, trustmsg.Postgres, biz, key) != 0 || count(t, conn, trustmsg.Postgres, "SELECT COUNT(*) FROM go_orders WHERE id = ?", key) != 0 {
		t.Fatal("the panicking transaction left rows")
	}
}

// A decision trustmsg refuses after the local transaction ended is an
// error, not a detail of the outcome: an operator rolls the message back
// while the order's transaction runs (the commit is refused), or commits it
// while a failing one runs (the rollback is refused).
func TestTransactionRejectedDecisionIsAnError(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	conn := kittest.Open(t, e, trustmsg.Postgres)
	ordersTable(t, conn)
	b := barrier(t, conn, trustmsg.Postgres)
	p := kittest.Register(t, e, "rejected", "", 60000, "")
	ctx := context.Background()

	key := "order-" + kittest.Random()
	out, err := trustmsg.Transaction(ctx, p.Client, b, trustmsg.Message{MessageKey: key, Topic: "go-tx", Payload: []byte("x")},
		func(ctx context.Context, tx *sql.Tx) error {
			if _, err := p.Client.Rollback(ctx, key); err != nil {
				return err
			}
			return insertOrder(trustmsg.Postgres, key, 1)(ctx, tx)
		})
	var rejected *trustmsg.RejectedDecisionError
	if !errors.As(err, &rejected) || rejected.Decision != trustmsg.Commit || rejected.LocalErr != nil ||
		!errors.Is(err, trustmsg.ErrCommitRejected) || errors.Is(err, trustmsg.ErrRollbackRejected) ||
		trustmsg.ErrorCode(err) != "already_rolled_back" || !out.LocalCommitted || out.DecisionSent {
		t.Fatalf("%+v, %#v", out, err)
	}

	key = "order-" + kittest.Random()
	out, err = trustmsg.Transaction(ctx, p.Client, b, trustmsg.Message{MessageKey: key, Topic: "go-tx", Payload: []byte("x")},
		func(ctx context.Context, tx *sql.Tx) error {
			if _, err := p.Client.Commit(ctx, key); err != nil {
				return err
			}
			return errOutOfStock
		})
	rejected = nil
	if !errors.As(err, &rejected) || rejected.Decision != trustmsg.Rollback || !errors.Is(err, errOutOfStock) ||
		!errors.Is(err, trustmsg.ErrRollbackRejected) || errors.Is(err, trustmsg.ErrCommitRejected) ||
		trustmsg.ErrorCode(err) != "already_committed" || out.LocalCommitted || out.DecisionSent {
		t.Fatalf("%+v, %#v", out, err)
	}
}

// A message trustmsg gave up asking about (VERIFY_FAILED) is decided too:
// its prepare answers that status and the work does not run.
func TestTransactionRunsNoWorkForVerifyFailedMessage(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	conn := kittest.Open(t, e, trustmsg.MySQL)
	ordersTable(t, conn)
	b := barrier(t, conn, trustmsg.MySQL)
	// A check-back endpoint that always fails, one attempt allowed.
	verifyURL := kittest.Serve(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	admin, err := trustmsg.NewAdmin(e.URL, e.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	bizID, first, attempts := "go-verify-failed-"+kittest.Random(), 100, 1
	view, err := admin.PutProducer(context.Background(), bizID, trustmsg.ProducerSettings{
		VerifyURL: verifyURL + "/check", Topics: []string{"go-*"}, FirstVerifyAfterMs: &first, MaxVerifyAttempts: &attempts,
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := trustmsg.NewClient(e.URL, bizID, view.Token)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	msg := trustmsg.Message{MessageKey: "order-" + kittest.Random(), Topic: "go-tx", Payload: []byte("x")}
	if _, err := p.Prepare(ctx, msg); err != nil {
		t.Fatal(err)
	}
	kittest.Await(t, p, msg.MessageKey, 30*time.Second, func(v *trustmsg.MessageView) bool { return v.Status == trustmsg.StatusVerifyFailed })

	ran := false
	out, err := trustmsg.Transaction(ctx, p, b, msg, func(context.Context, *sql.Tx) error { ran = true; return nil })
	var decided *trustmsg.DecidedError
	if !errors.Is(err, trustmsg.ErrNotPrepared) || errors.Is(err, trustmsg.ErrAlreadyCommitted) || errors.Is(err, trustmsg.ErrAlreadyRolledBack) ||
		!errors.As(err, &decided) || decided.Status != trustmsg.StatusVerifyFailed || ran || out.LocalCommitted {
		t.Fatalf("%+v, %#v (work ran: %v)", out, err, ran)
	}
	if n := markers(t, conn, trustmsg.MySQL, bizID, msg.MessageKey); n != 0 {
		t.Fatalf("%d barrier markers", n)
	}
}
