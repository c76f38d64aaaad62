// Package kittest is what this SDK's tests share: the contract kit's
// environment (client-sdk/conformance/kit), its vectors, the producer
// databases and a Kafka reader. Not part of the SDK's API.
package kittest

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/twmb/franz-go/pkg/kgo"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
)

// Vectors is the kit's vectors/ folder: $TRUSTMSG_KIT_VECTORS, else the
// repository's client-sdk/conformance/vectors.
func Vectors(t testing.TB) string {
	if v := os.Getenv("TRUSTMSG_KIT_VECTORS"); v != "" {
		return v
	}
	return filepath.Join(Conformance(t), "vectors")
}

// Conformance is the repository's client-sdk/conformance folder.
func Conformance(t testing.TB) string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the kit")
	}
	// internal/kittest/kittest.go -> client-sdk/go -> client-sdk/conformance
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "conformance")
}

// LoadVectors decodes vectors/<name> into v.
func LoadVectors(t testing.TB, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(Vectors(t), name))
	if err != nil {
		t.Fatalf("the kit's vectors: %v", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// Env is the kit's environment for scenario tests.
type Env struct {
	URL, ProxyURL, AdminToken, Kafka, SubmitTopic string
	MySQLURL, PostgresURL                         string
	OutboxBizID, OutboxTopicPrefix                string
	Bin                                           string
}

// Kit returns the kit's environment, or skips the test when it does not
// run under `client-sdk/conformance/kit run --`.
func Kit(t testing.TB) Env {
	t.Helper()
	e := Env{
		URL: os.Getenv("TRUSTMSG_KIT_URL"), ProxyURL: os.Getenv("TRUSTMSG_KIT_PROXY_URL"),
		AdminToken: os.Getenv("TRUSTMSG_KIT_ADMIN_TOKEN"), Kafka: os.Getenv("TRUSTMSG_KIT_KAFKA"),
		SubmitTopic: os.Getenv("TRUSTMSG_KIT_SUBMIT_TOPIC"),
		MySQLURL:    os.Getenv("TRUSTMSG_KIT_MYSQL_URL"), PostgresURL: os.Getenv("TRUSTMSG_KIT_POSTGRES_URL"),
		OutboxBizID: os.Getenv("TRUSTMSG_KIT_OUTBOX_BIZ_ID"), OutboxTopicPrefix: os.Getenv("TRUSTMSG_KIT_OUTBOX_TOPIC_PREFIX"),
		Bin: os.Getenv("TRUSTMSG_KIT_BIN"),
	}
	if e.URL == "" {
		if os.Getenv("TRUSTMSG_KIT_REQUIRED") != "" {
			t.Fatal("TRUSTMSG_KIT_REQUIRED is set but the kit's environment is not: run under client-sdk/conformance/kit run --")
		}
		t.Skip("not under the contract kit (client-sdk/conformance/kit run -- go test ./...)")
	}
	return e
}

// Random is a random hex suffix for keys, topics and producers.
func Random() string {
	b := make([]byte, 5)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// MySQLDSN turns mysql://user[:password]@host:port/db into
// go-sql-driver/mysql's DSN.
func MySQLDSN(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "mysql" && u.Scheme != "mariadb") {
		return "", fmt.Errorf("not a mysql:// URL: %q", raw)
	}
	cfg := mysql.NewConfig()
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.Net = "tcp"
	cfg.Addr = u.Host
	if u.Port() == "" {
		cfg.Addr = net.JoinHostPort(u.Hostname(), "3306")
	}
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	return cfg.FormatDSN(), nil
}

// Open opens the producer database of dialect d: the kit's MariaDB or
// PostgreSQL database, with the barrier and inbox tables created.
func Open(t testing.TB, e Env, d trustmsg.Dialect) *sql.DB {
	t.Helper()
	var db *sql.DB
	var err error
	if d == trustmsg.MySQL {
		var dsn string
		if dsn, err = MySQLDSN(e.MySQLURL); err == nil {
			db, err = sql.Open("mysql", dsn)
		}
	} else {
		db, err = sql.Open("pgx", e.PostgresURL)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := trustmsg.CreateTables(ctx, db, d); err != nil {
		t.Fatal(err)
	}
	return db
}

// ddl serializes the tests' own CREATE TABLE IF NOT EXISTS (of their
// business tables): PostgreSQL's can fail on a unique index of its catalog
// when two run at once. The SDK's tables need none: CreateTables takes an
// advisory lock.
var ddl sync.Mutex

// WithDDL runs f while no other DDL of this process runs.
func WithDDL(f func()) {
	ddl.Lock()
	defer ddl.Unlock()
	f()
}

// DDL runs a CREATE ... IF NOT EXISTS statement, one at a time.
func DDL(t testing.TB, db *sql.DB, stmt string) {
	t.Helper()
	ddl.Lock()
	defer ddl.Unlock()
	if _, err := db.Exec(stmt); err != nil {
		t.Fatal(err)
	}
}

// Dialects are the producer databases a scenario runs on, by name.
var Dialects = []struct {
	Name    string
	Dialect trustmsg.Dialect
}{{"mysql", trustmsg.MySQL}, {"postgres", trustmsg.Postgres}}

// Producer is a producer registered for one test.
type Producer struct {
	BizID, Token, Secret string
	Client               *trustmsg.Client
}

// Register registers producer "go-<name>-<random>" with verifyURL (a
// placeholder when ""), topics ["go-*", "orders"], the first check-back after
// firstVerifyMs, and returns its client (on base, the service or the
// proxy).
func Register(t testing.TB, e Env, name, verifyURL string, firstVerifyMs int, base string, opts ...trustmsg.Option) Producer {
	t.Helper()
	admin, err := trustmsg.NewAdmin(e.URL, e.AdminToken)
	if err != nil {
		t.Fatal(err)
	}
	if verifyURL == "" {
		verifyURL = "http://127.0.0.1:9/unused"
	}
	bizID := "go-" + name + "-" + Random()
	view, err := admin.PutProducer(context.Background(), bizID, trustmsg.ProducerSettings{
		VerifyURL: verifyURL, Topics: []string{"go-*", "orders"}, FirstVerifyAfterMs: &firstVerifyMs,
	})
	if err != nil {
		t.Fatal(err)
	}
	if view.Token == "" || view.SigningSecret == "" {
		t.Fatalf("the registration of %s came without token or signing secret: %+v", bizID, view)
	}
	if base == "" {
		base = e.URL
	}
	c, err := trustmsg.NewClient(base, bizID, view.Token, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return Producer{BizID: bizID, Token: view.Token, Secret: view.SigningSecret, Client: c}
}

// Await polls get until ok says the view is what the test waits for, or
// fails after timeout.
func Await(t testing.TB, c *trustmsg.Client, key string, timeout time.Duration, ok func(*trustmsg.MessageView) bool) *trustmsg.MessageView {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last *trustmsg.MessageView
	var lastErr error
	for time.Now().Before(deadline) {
		last, lastErr = c.Get(context.Background(), key)
		if lastErr == nil && ok(last) {
			return last
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("message %q: not as awaited within %v: last view %+v, last error %v", key, timeout, last, lastErr)
	return nil
}

// ReadUntil reads topic from its beginning until stop returns true for a
// record (or fails after timeout), and returns every record read. The topic
// appears with its first record: the reader waits for it.
func ReadUntil(t testing.TB, e Env, topic string, timeout time.Duration, stop func(*kgo.Record) bool) []*kgo.Record {
	t.Helper()
	cl := consumer(t, e, topic)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got []*kgo.Record
	for {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("topic %s: the awaited record did not come within %v (%d records read)", topic, timeout, len(got))
		}
		// Errors (a topic that does not exist yet) pass: keep polling.
		done := false
		fetches.EachRecord(func(r *kgo.Record) {
			got = append(got, r)
			if stop(r) {
				done = true
			}
		})
		if done {
			return got
		}
	}
}

// Header returns the value of the record's first header name, and whether
// it has one.
func Header(r *kgo.Record, name string) (string, bool) {
	for _, h := range r.Headers {
		if h.Key == name {
			return string(h.Value), true
		}
	}
	return "", false
}

// Faults asks the kit's fault proxy to answer the next count requests
// containing match with status.
func Faults(t testing.TB, e Env, match string, status, count int) {
	t.Helper()
	body := fmt.Sprintf(`{"match":%q,"status":%d,"count":%d}`, match, status, count)
	res, err := http.Post(e.ProxyURL+"/_kit/faults", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusNoContent {
		t.Fatalf("the fault proxy answered %d", res.StatusCode)
	}
}

// ProxyRequest is a request the fault proxy saw.
type ProxyRequest struct {
	Method string `json:"method"`
	Path   string `json:"path"`
	Body   string `json:"body"`
	AtMs   int64  `json:"at_ms"`
	Status int    `json:"status"`
}

// Requests returns the requests the fault proxy saw containing match.
func Requests(t testing.TB, e Env, match string) []ProxyRequest {
	t.Helper()
	res, err := http.Get(e.ProxyURL + "/_kit/requests?match=" + url.QueryEscape(match))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out []ProxyRequest
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Serve serves h on a free port of 127.0.0.1 for the test's duration and
// returns its base URL.
func Serve(t testing.TB, h http.Handler) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return "http://" + l.Addr().String()
}

// ServeLater serves, on a free port of 127.0.0.1, the handler given later to
// set (503 until then): a check-back endpoint needs its URL registered
// before the registration gives it its secret.
func ServeLater(t testing.TB) (baseURL string, set func(http.Handler)) {
	t.Helper()
	var h atomic.Pointer[http.Handler]
	baseURL = Serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := h.Load(); p != nil {
			(*p).ServeHTTP(w, r)
			return
		}
		http.Error(w, "not ready", http.StatusServiceUnavailable)
	}))
	return baseURL, func(handler http.Handler) { h.Store(&handler) }
}

// ReadAll reads topic from its beginning until at least n records came,
// then for extra more, and returns them all.
func ReadAll(t testing.TB, e Env, topic string, n int, timeout, extra time.Duration) []*kgo.Record {
	t.Helper()
	cl := consumer(t, e, topic)
	defer cl.Close()
	deadline := time.Now().Add(timeout)
	var got []*kgo.Record
	var quiet time.Time
	for {
		now := time.Now()
		if len(got) >= n && quiet.IsZero() {
			quiet = now.Add(extra)
		}
		if !quiet.IsZero() && now.After(quiet) {
			return got
		}
		if quiet.IsZero() && now.After(deadline) {
			t.Fatalf("topic %s: %d records within %v, want at least %d", topic, len(got), timeout, n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fetches := cl.PollFetches(ctx)
		cancel()
		fetches.EachRecord(func(r *kgo.Record) { got = append(got, r) })
	}
}

func consumer(t testing.TB, e Env, topic string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(e.Kafka),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.MetadataMinAge(100*time.Millisecond),
		kgo.MetadataMaxAge(500*time.Millisecond),
	)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}
