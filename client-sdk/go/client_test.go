package trustmsg_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
)

// service is a real local HTTP server answering with the given statuses in
// turn (the last one repeated), trustmsg's error shape for errors; it
// records what it was sent.
type service struct {
	mu       sync.Mutex
	statuses []int
	headers  []http.Header
	bodies   []string
	paths    []string
	at       []time.Time
	extra    http.Header
}

func (s *service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	n := len(s.paths)
	s.headers = append(s.headers, r.Header.Clone())
	s.bodies = append(s.bodies, string(body))
	s.paths = append(s.paths, r.URL.EscapedPath())
	s.at = append(s.at, time.Now())
	status := s.statuses[min(n, len(s.statuses)-1)]
	s.mu.Unlock()
	for k, v := range s.extra {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	if status < 300 {
		_, _ = io.WriteString(w, `{"id":7,"biz_id":"shop","message_key":"k","status":"COMMITTED","send_status":"PENDING","verify_attempts":0,"send_attempts":0,"payload_size":1,"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`)
		return
	}
	codes := map[int]string{400: "invalid_topic", 401: "unauthorized", 404: "message_not_found", 409: "already_rolled_back", 503: "store_unavailable", 500: "internal"}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]string{"code": codes[status], "message": "said the service"}})
}

func (s *service) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.paths)
}

var fast = trustmsg.WithRetry(trustmsg.RetryPolicy{MaxRetries: 3, MinDelay: 20 * time.Millisecond, MaxDelay: 200 * time.Millisecond})

func newClient(t *testing.T, s *service, opts ...trustmsg.Option) *trustmsg.Client {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	c, err := trustmsg.NewClient(srv.URL+"/base/", "shop", "tok", opts...)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestClientRetries5xxWithGrowingDelays(t *testing.T) {
	s := &service{statuses: []int{503, 503, 503, 200}}
	c := newClient(t, s, fast)
	view, err := c.Commit(context.Background(), "k")
	if err != nil || view.ID != 7 || view.Status != trustmsg.StatusCommitted {
		t.Fatalf("%+v, %v", view, err)
	}
	if s.count() != 4 {
		t.Fatalf("%d requests, want 4", s.count())
	}
	// Each gap is at least its delay (20, 40, 80 ms; jitter only adds).
	// Not gap against gap: a request held up on a busy machine makes one
	// gap longer than the next.
	g1, g2, g3 := s.at[1].Sub(s.at[0]), s.at[2].Sub(s.at[1]), s.at[3].Sub(s.at[2])
	if g1 < 20*time.Millisecond || g2 < 40*time.Millisecond || g3 < 80*time.Millisecond {
		t.Fatalf("gaps %v %v %v: not at least 20, 40 and 80 ms", g1, g2, g3)
	}
	if s.paths[0] != "/base/v1/messages/commit" || s.headers[0].Get("Authorization") != "Bearer tok" ||
		!strings.Contains(s.bodies[0], `"message_key":"k"`) || s.headers[0].Get("Content-Type") != "application/json" {
		t.Fatalf("request %s %v %s", s.paths[0], s.headers[0], s.bodies[0])
	}
}

func TestClientGivesUpAsUnavailableAfterTheRetries(t *testing.T) {
	s := &service{statuses: []int{503}}
	c := newClient(t, s, fast)
	_, err := c.Commit(context.Background(), "k")
	var e *trustmsg.Error
	if !errors.As(err, &e) || !trustmsg.IsUnavailable(err) || e.Status != 503 || e.Code != "store_unavailable" || e.Attempts != 4 || s.count() != 4 {
		t.Fatalf("%#v after %d requests", err, s.count())
	}
}

func TestClientNeverRetries4xx(t *testing.T) {
	for status, is := range map[int]func(error) bool{
		400: trustmsg.IsInvalid, 401: trustmsg.IsUnauthorized, 404: trustmsg.IsNotFound, 409: trustmsg.IsConflict,
	} {
		s := &service{statuses: []int{status, 200}}
		c := newClient(t, s, fast)
		_, err := c.Commit(context.Background(), "k")
		if !is(err) || trustmsg.IsUnavailable(err) || s.count() != 1 {
			t.Fatalf("%d: %v after %d requests, want final after 1", status, err, s.count())
		}
		var e *trustmsg.Error
		if !errors.As(err, &e) || e.Status != status || e.Code == "" || e.Attempts != 1 {
			t.Fatalf("%d: %#v", status, err)
		}
	}
}

func TestClientHonoursRetryAfter(t *testing.T) {
	s := &service{statuses: []int{503, 200}, extra: http.Header{"Retry-After": {"1"}}}
	c := newClient(t, s, fast)
	if _, err := c.Commit(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	if gap := s.at[1].Sub(s.at[0]); gap < time.Second {
		t.Fatalf("retried after %v, before the 1 s the service asked for", gap)
	}
}

func TestClientRetriesConnectionErrorsAndStopsWithTheContext(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close() // nothing listens: connection refused
	c, _ := trustmsg.NewClient("http://"+addr, "shop", "tok", fast)
	_, err = c.Commit(context.Background(), "k")
	var e *trustmsg.Error
	if !errors.As(err, &e) || !trustmsg.IsUnavailable(err) || e.Status != 0 || e.Attempts != 4 {
		t.Fatalf("%#v", err)
	}
	var opErr *net.OpError
	if !errors.As(err, &opErr) {
		t.Fatalf("the network error is not reachable through %v", err)
	}
	slow, _ := trustmsg.NewClient("http://"+addr, "shop", "tok",
		trustmsg.WithRetry(trustmsg.RetryPolicy{MaxRetries: 10, MinDelay: time.Second, MaxDelay: time.Second}))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = slow.Commit(ctx, "k")
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > time.Second {
		t.Fatalf("%v after %v, want the context's deadline at once", err, time.Since(start))
	}
}

func TestClientPrepareRequest(t *testing.T) {
	s := &service{statuses: []int{200}}
	c := newClient(t, s)
	msg := trustmsg.Message{
		MessageKey: "order 42/é", Topic: "orders", Key: "customer-7", Payload: []byte{0xff, 0},
		Headers: map[string]string{"source": "shop"}, DeliverAfter: 1500 * time.Millisecond,
		TraceParent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", TraceState: "shop=1",
	}
	if _, err := c.Prepare(context.Background(), msg); err != nil {
		t.Fatal(err)
	}
	var body map[string]any
	if err := json.Unmarshal([]byte(s.bodies[0]), &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"biz_id": "shop", "message_key": "order 42/é", "topic": "orders", "key": "customer-7",
		"payload": "/wA=", "payload_encoding": "base64", "headers": map[string]any{"source": "shop"},
		"deliver_after_ms": float64(1500),
	}
	if len(body) != len(want) {
		t.Fatalf("body %v, want %v", body, want)
	}
	for k, v := range want {
		if b, _ := json.Marshal(body[k]); string(b) != mustJSON(v) {
			t.Fatalf("%s = %v, want %v", k, body[k], v)
		}
	}
	if s.headers[0].Get("traceparent") != msg.TraceParent || s.headers[0].Get("tracestate") != "shop=1" {
		t.Fatalf("trace headers %v", s.headers[0])
	}
	// Text stays text; a key is escaped in the path of get.
	if _, err := c.Prepare(context.Background(), trustmsg.Message{MessageKey: "k", Topic: "t", Payload: []byte(`{"a":1}`)}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(s.bodies[1], `"payload":"{\"a\":1}"`) || strings.Contains(s.bodies[1], "payload_encoding") {
		t.Fatalf("body %s", s.bodies[1])
	}
	if _, err := c.Get(context.Background(), "order 42/é"); err != nil {
		t.Fatal(err)
	}
	if s.paths[2] != "/base/v1/messages/shop/order%2042%2F%C3%A9" {
		t.Fatalf("path %s", s.paths[2])
	}
}

func mustJSON(v any) string { b, _ := json.Marshal(v); return string(b) }

func TestNewClientValidates(t *testing.T) {
	for _, c := range []struct{ url, biz, token string }{
		{"127.0.0.1:8080", "shop", "t"}, {"ftp://x", "shop", "t"}, {"http://x", "sh op", "t"}, {"http://x", "", "t"}, {"http://x", "shop", ""},
	} {
		if _, err := trustmsg.NewClient(c.url, c.biz, c.token); err == nil {
			t.Errorf("NewClient(%q, %q, %q) accepted", c.url, c.biz, c.token)
		}
	}
	if _, err := trustmsg.NewClient("http://x", "shop", "t", trustmsg.WithRetry(trustmsg.RetryPolicy{MaxRetries: -1})); err == nil {
		t.Error("a negative retry count was accepted")
	}
}

func TestErrorHelpersSeeThroughWrapping(t *testing.T) {
	s := &service{statuses: []int{409}}
	c := newClient(t, s)
	_, err := c.Commit(context.Background(), "k")
	wrapped := errors.Join(errors.New("placing order 42"), err)
	if !trustmsg.IsConflict(wrapped) || trustmsg.ErrorCode(wrapped) != "already_rolled_back" || trustmsg.IsNotFound(wrapped) {
		t.Fatalf("%v", wrapped)
	}
	if !strings.Contains(err.Error(), "HTTP 409 (already_rolled_back)") {
		t.Fatalf("message %q", err)
	}
}
