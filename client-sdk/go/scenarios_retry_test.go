package trustmsg_test

// The contract kit's scenarios S11-S14: a client retries an order (same
// message key) whose message is already decided, or sends it twice at once.
// The transaction helper must run no local work for a decided message and
// say which decision it found. Against the real trustmsg binary, MariaDB,
// PostgreSQL and the kit's Kafka broker.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
)

// errCrash stands for a process killed between its local COMMIT and its
// commit call.
var errCrash = errors.New("crashed after the local commit")

// neverDelivered fails the test if a record of key reaches topic: it sends a
// later message of p to topic through the helper and reads up to it.
func neverDelivered(t *testing.T, e kittest.Env, p kittest.Producer, b *trustmsg.Barrier, d trustmsg.Dialect, topic, key string) {
	t.Helper()
	later := "order-" + kittest.Random()
	if _, err := trustmsg.Transaction(context.Background(), p.Client, b,
		trustmsg.Message{MessageKey: later, Topic: topic, Payload: []byte("later")}, insertOrder(d, later, 1)); err != nil {
		t.Fatal(err)
	}
	records := kittest.ReadUntil(t, e, topic, 30*time.Second, func(r *kgo.Record) bool {
		k, _ := kittest.Header(r, trustmsg.HeaderMessageKey)
		return k == later
	})
	for _, r := range records {
		if k, _ := kittest.Header(r, trustmsg.HeaderMessageKey); k == key {
			t.Fatalf("a record of %s reached Kafka: %+v", key, r)
		}
	}
}

// eachDialect runs body once per producer database (MariaDB, PostgreSQL),
// in parallel, each with its orders table and a barrier.
func eachDialect(t *testing.T, e kittest.Env, body func(t *testing.T, d trustmsg.Dialect, conn *sql.DB, b *trustmsg.Barrier)) {
	for _, db := range kittest.Dialects {
		t.Run(db.Name, func(t *testing.T) {
			t.Parallel()
			conn := kittest.Open(t, e, db.Dialect)
			ordersTable(t, conn)
			body(t, db.Dialect, conn, barrier(t, conn, db.Dialect))
		})
	}
}

// messageIDs returns the distinct trustmsg-message-id headers of records.
func messageIDs(records []*kgo.Record) map[string]bool {
	ids := map[string]bool{}
	for _, r := range records {
		id, _ := kittest.Header(r, trustmsg.HeaderMessageID)
		ids[id] = true
	}
	return ids
}

func TestS11_retry_after_rollback_is_refused_before_any_local_work(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	eachDialect(t, e, func(t *testing.T, d trustmsg.Dialect, conn *sql.DB, b *trustmsg.Barrier) {
		p := kittest.Register(t, e, "s11", "", 60000, "")
		ctx := context.Background()
		topic := "go-s11-" + kittest.Random()
		key := "order-" + kittest.Random()
		msg := trustmsg.Message{MessageKey: key, Topic: topic, Payload: []byte(`{"order":11}`)}
		_, err := trustmsg.Transaction(ctx, p.Client, b, msg, func(ctx context.Context, tx *sql.Tx) error {
			if err := insertOrder(d, key, 11)(ctx, tx); err != nil {
				return err
			}
			return errOutOfStock
		})
		if !errors.Is(err, errOutOfStock) {
			t.Fatalf("first attempt: %v, want the work's error", err)
		}

		// The client's retry, with work that would succeed this time.
		ran := false
		out, err := trustmsg.Transaction(ctx, p.Client, b, msg, func(ctx context.Context, tx *sql.Tx) error {
			ran = true
			return insertOrder(d, key, 11)(ctx, tx)
		})
		var decided *trustmsg.DecidedError
		if !errors.Is(err, trustmsg.ErrAlreadyRolledBack) || errors.Is(err, trustmsg.ErrAlreadyCommitted) ||
			!errors.As(err, &decided) || decided.By != "prepare" || decided.Status != trustmsg.StatusRolledBack {
			t.Fatalf("retry: %#v, want a *DecidedError matching ErrAlreadyRolledBack", err)
		}
		// Old code that looked for a conflict still finds trustmsg's 409.
		if !trustmsg.IsConflict(err) || trustmsg.ErrorCode(err) != "already_rolled_back" || out != nil {
			t.Fatalf("retry: %v (code %q), outcome %+v: want the 409 already_rolled_back inside", err, trustmsg.ErrorCode(err), out)
		}
		if ran {
			t.Fatal("the retry ran the local work")
		}
		if n := count(t, conn, d, "SELECT COUNT(*) FROM go_orders WHERE id = ?", key); n != 0 {
			t.Fatalf("%d business rows", n)
		}
		if n := commitMarkers(t, conn, d, p.BizID, key); n != 0 {
			t.Fatalf("%d barrier commit markers", n)
		}
		if v, err := p.Client.Get(ctx, key); err != nil || v.Status != trustmsg.StatusRolledBack {
			t.Fatalf("message %+v, %v", v, err)
		}

		// A rollback before any prepare leaves a tombstone: 409
		// rolled_back, the same typed error.
		tomb := "order-" + kittest.Random()
		if _, err := p.Client.Rollback(ctx, tomb); err != nil {
			t.Fatal(err)
		}
		_, err = trustmsg.Transaction(ctx, p.Client, b, trustmsg.Message{MessageKey: tomb, Topic: topic, Payload: []byte("x")},
			func(context.Context, *sql.Tx) error { ran = true; return nil })
		if !errors.Is(err, trustmsg.ErrAlreadyRolledBack) || trustmsg.ErrorCode(err) != "rolled_back" || ran {
			t.Fatalf("after a tombstone: %v (code %q, work ran %v)", err, trustmsg.ErrorCode(err), ran)
		}
		neverDelivered(t, e, p, b, d, topic, key)
	})
}

func TestS12_retry_after_local_commit_sends_the_commit_itself(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	eachDialect(t, e, func(t *testing.T, d trustmsg.Dialect, conn *sql.DB, b *trustmsg.Barrier) {
		p, _, checkBacks := checkEndpoint(t, e, "s12", b, 60000)
		ctx := context.Background()
		topic := "go-s12-" + kittest.Random()
		key := "order-" + kittest.Random()
		msg := trustmsg.Message{MessageKey: key, Topic: topic, Payload: []byte(`{"order":12}`)}
		out, err := trustmsg.Transaction(ctx, p.Client, b, msg, insertOrder(d, key, 12),
			trustmsg.WithAfterLocalCommit(func(_ context.Context, k string) error {
				if k != key {
					t.Errorf("the hook got key %q", k)
				}
				return errCrash
			}))
		if !errors.Is(err, errCrash) || out == nil || !out.LocalCommitted || out.DecisionSent || out.DecisionErr != nil {
			t.Fatalf("crashed attempt: %+v, %v", out, err)
		}
		if v, err := p.Client.Get(ctx, key); err != nil || v.Status != trustmsg.StatusPrepared {
			t.Fatalf("after the crash: %+v, %v; want PREPARED (no decision sent)", v, err)
		}

		ran := false
		out, err = trustmsg.Transaction(ctx, p.Client, b, msg, func(ctx context.Context, tx *sql.Tx) error {
			ran = true
			return insertOrder(d, key, 12)(ctx, tx)
		})
		var decided *trustmsg.DecidedError
		if !errors.Is(err, trustmsg.ErrAlreadyCommitted) || !errors.As(err, &decided) || decided.By != "barrier" ||
			decided.View == nil || decided.View.Status != trustmsg.StatusCommitted {
			t.Fatalf("retry: %#v, want a *DecidedError by the barrier matching ErrAlreadyCommitted", err)
		}
		if ran || out.LocalCommitted || !out.DecisionSent || out.Decided.Status != trustmsg.StatusCommitted {
			t.Fatalf("retry: outcome %+v (work ran: %v)", out, ran)
		}
		// COMMITTED when the call returns, not later by check-back.
		if v, err := p.Client.Get(ctx, key); err != nil || v.Status != trustmsg.StatusCommitted {
			t.Fatalf("after the retry: %+v, %v", v, err)
		}
		if n := count(t, conn, d, "SELECT COUNT(*) FROM go_orders WHERE id = ?", key); n != 1 {
			t.Fatalf("%d business rows, want 1", n)
		}
		records := kittest.ReadAll(t, e, topic, 1, 30*time.Second, time.Second)
		if len(records) != 1 {
			t.Fatalf("%d records, want 1", len(records))
		}
		if n := checkBacks.Load(); n != 0 {
			t.Fatalf("%d check-back calls, want 0", n)
		}
	})
}

func TestS13_two_identical_requests_at_once_make_one_commit_and_one_message(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	eachDialect(t, e, func(t *testing.T, d trustmsg.Dialect, conn *sql.DB, b *trustmsg.Barrier) {
		p := kittest.Register(t, e, "s13", "", 60000, "")
		topic := "go-s13-" + kittest.Random()
		const orders = 3
		keys := make([]string, orders)
		for i := range keys {
			keys[i] = "order-" + kittest.Random()
		}
		type result struct {
			out *trustmsg.Outcome[*trustmsg.MessageView]
			err error
		}
		results := make([][2]result, orders)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, key := range keys {
			for j := range 2 {
				wg.Go(func() {
					<-start
					msg := trustmsg.Message{MessageKey: key, Topic: topic, Key: key, Payload: []byte(`{"order":"` + key + `"}`)}
					out, err := trustmsg.Transaction(context.Background(), p.Client, b, msg, func(ctx context.Context, tx *sql.Tx) error {
						// A slow business step: both calls are prepared
						// before either commits, and the second waits on
						// the barrier's row lock.
						time.Sleep(300 * time.Millisecond)
						return insertOrder(d, key, 13)(ctx, tx)
					})
					results[i][j] = result{out, err}
				})
			}
		}
		close(start)
		wg.Wait()
		for i, key := range keys {
			placed := 0
			for _, r := range results[i] {
				switch {
				case r.err == nil:
					if !r.out.LocalCommitted || !r.out.DecisionSent {
						t.Fatalf("%s: placed without commit: %+v", key, r.out)
					}
					placed++
				case errors.As(r.err, new(*trustmsg.DecidedError)) && errors.Is(r.err, trustmsg.ErrAlreadyCommitted):
					if r.out != nil && r.out.LocalCommitted {
						t.Fatalf("%s: already committed, yet committed locally: %+v", key, r.out)
					}
				default:
					t.Fatalf("%s: %v, want placed or already committed", key, r.err)
				}
			}
			if placed != 1 {
				t.Fatalf("%s: placed %d times, want once", key, placed)
			}
			if n := count(t, conn, d, "SELECT COUNT(*) FROM go_orders WHERE id = ?", key); n != 1 {
				t.Fatalf("%s: %d business rows", key, n)
			}
			if n := markers(t, conn, d, p.BizID, key); n != 1 {
				t.Fatalf("%s: %d barrier markers", key, n)
			}
			if v, err := p.Client.Get(context.Background(), key); err != nil || v.Status != trustmsg.StatusCommitted {
				t.Fatalf("%s: %+v, %v", key, v, err)
			}
		}
		records := kittest.ReadAll(t, e, topic, orders, 30*time.Second, time.Second)
		byKey := map[string][]*kgo.Record{}
		for _, r := range records {
			byKey[string(r.Key)] = append(byKey[string(r.Key)], r)
		}
		for _, key := range keys {
			if ids := messageIDs(byKey[key]); len(ids) != 1 {
				t.Fatalf("%s: message ids %v in Kafka, want exactly one", key, ids)
			}
		}
	})
}

// errPaymentTimeout is a transient failure of one request's business step.
var errPaymentTimeout = errors.New("payment timed out")

// S13 with one of the two failing: request A holds the barrier's commit
// marker while its work runs, then fails; request B, the same order 100 ms
// later, waits on A's marker and its work succeeds. B must not commit
// locally a change whose commit trustmsg then refuses (the message rolled
// back by A): whichever reaches the barrier first decides, as check-back.
func TestS13_two_identical_requests_one_failing_never_commit_a_rolled_back_message(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	eachDialect(t, e, func(t *testing.T, d trustmsg.Dialect, conn *sql.DB, b *trustmsg.Barrier) {
		p := kittest.Register(t, e, "s13f", "", 60000, "")
		topic := "go-s13f-" + kittest.Random()
		key := "order-" + kittest.Random()
		msg := trustmsg.Message{MessageKey: key, Topic: topic, Key: key, Payload: []byte(`{"order":"` + key + `"}`)}
		type result struct {
			out *trustmsg.Outcome[*trustmsg.MessageView]
			err error
		}
		var a, bRes result
		var wg sync.WaitGroup
		wg.Go(func() {
			out, err := trustmsg.Transaction(context.Background(), p.Client, b, msg, func(ctx context.Context, tx *sql.Tx) error {
				if err := insertOrder(d, key, 13)(ctx, tx); err != nil {
					return err
				}
				time.Sleep(300 * time.Millisecond)
				return errPaymentTimeout
			})
			a = result{out, err}
		})
		wg.Go(func() {
			time.Sleep(100 * time.Millisecond)
			out, err := trustmsg.Transaction(context.Background(), p.Client, b, msg, insertOrder(d, key, 13))
			bRes = result{out, err}
		})
		wg.Wait()
		rows := count(t, conn, d, "SELECT COUNT(*) FROM go_orders WHERE id = ?", key)
		commits := commitMarkers(t, conn, d, p.BizID, key)
		v, err := p.Client.Get(context.Background(), key)
		if err != nil {
			t.Fatal(err)
		}
		state := func() string {
			return fmt.Sprintf("A: %v (outcome %+v); B: %v (outcome %+v); %d order rows, %d commit markers, message %s",
				a.err, a.out, bRes.err, bRes.out, rows, commits, v.Status)
		}
		if errors.Is(a.err, trustmsg.ErrCommitRejected) || errors.Is(bRes.err, trustmsg.ErrCommitRejected) ||
			errors.Is(a.err, trustmsg.ErrRollbackRejected) || errors.Is(bRes.err, trustmsg.ErrRollbackRejected) {
			t.Fatalf("a decision was refused: %s", state())
		}
		var local *trustmsg.LocalError
		var decided *trustmsg.DecidedError
		switch {
		case errors.Is(a.err, errPaymentTimeout) && errors.As(a.err, &local):
			// A rolled back first: B finds the rollback and is refused.
			t.Logf("A's rollback decided: %s", state())
			if !errors.Is(bRes.err, trustmsg.ErrAlreadyRolledBack) || !errors.As(bRes.err, &decided) ||
				(bRes.out != nil && bRes.out.LocalCommitted) ||
				rows != 0 || commits != 0 || v.Status != trustmsg.StatusRolledBack {
				t.Fatalf("A rolled back, want B refused (ErrAlreadyRolledBack), 0 rows, ROLLED_BACK: %s", state())
			}
			neverDelivered(t, e, p, b, d, topic, key)
		case errors.Is(a.err, trustmsg.ErrAlreadyCommitted) && errors.As(a.err, &decided):
			// B committed first: A's order was placed by B; A sent the commit.
			t.Logf("B's commit decided: %s", state())
			if bRes.err != nil || bRes.out == nil || !bRes.out.LocalCommitted ||
				rows != 1 || commits != 1 || v.Status != trustmsg.StatusCommitted {
				t.Fatalf("A found B's commit, want B placed, 1 row, COMMITTED: %s", state())
			}
			if records := kittest.ReadAll(t, e, topic, 1, 30*time.Second, time.Second); len(messageIDs(records)) != 1 {
				t.Fatalf("%d records, want one message: %s", len(records), state())
			}
		default:
			t.Fatalf("want A rolled back with its own error or already committed: %s", state())
		}
	})
}

func TestS14_prepare_answered_committed_runs_no_local_work(t *testing.T) {
	e := kittest.Kit(t)
	t.Parallel()
	eachDialect(t, e, func(t *testing.T, d trustmsg.Dialect, conn *sql.DB, b *trustmsg.Barrier) {
		p := kittest.Register(t, e, "s14", "", 60000, "")
		ctx := context.Background()
		topic := "go-s14-" + kittest.Random()
		key := "order-" + kittest.Random()
		msg := trustmsg.Message{MessageKey: key, Topic: topic, Payload: []byte(`{"order":14}`)}
		first, err := trustmsg.Transaction(ctx, p.Client, b, msg, insertOrder(d, key, 14))
		if err != nil || !first.DecisionSent {
			t.Fatalf("%+v, %v", first, err)
		}
		var entered atomic.Bool
		out, err := trustmsg.Transaction(ctx, p.Client, b, msg, func(context.Context, *sql.Tx) error {
			entered.Store(true)
			return nil
		})
		var decided *trustmsg.DecidedError
		if !errors.Is(err, trustmsg.ErrAlreadyCommitted) || !errors.Is(err, trustmsg.ErrNotPrepared) ||
			errors.Is(err, trustmsg.ErrAlreadyRolledBack) || !errors.As(err, &decided) || decided.By != "prepare" ||
			decided.View == nil || decided.View.ID != first.Prepared.ID || decided.View.Status != trustmsg.StatusCommitted {
			t.Fatalf("%#v, want a *DecidedError by prepare matching ErrAlreadyCommitted", err)
		}
		if entered.Load() {
			t.Fatal("the callback was entered")
		}
		if out == nil || out.Prepared.Status != trustmsg.StatusCommitted || out.LocalCommitted || out.DecisionSent {
			t.Fatalf("outcome %+v", out)
		}
		if n := count(t, conn, d, "SELECT COUNT(*) FROM go_orders WHERE id = ?", key); n != 1 {
			t.Fatalf("%d business rows", n)
		}
		if n := markers(t, conn, d, p.BizID, key); n != 1 {
			t.Fatalf("%d barrier markers", n)
		}
		if records := kittest.ReadAll(t, e, topic, 1, 30*time.Second, time.Second); len(records) != 1 {
			t.Fatalf("%d records, want 1", len(records))
		}
	})
}
