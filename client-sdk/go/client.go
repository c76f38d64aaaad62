package trustmsg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// MessageStatus is a message's decision state.
type MessageStatus string

// The decision states of a message.
const (
	StatusPrepared     MessageStatus = "PREPARED"
	StatusCommitted    MessageStatus = "COMMITTED"
	StatusRolledBack   MessageStatus = "ROLLED_BACK"
	StatusVerifyFailed MessageStatus = "VERIFY_FAILED"
)

// SendStatus is a committed message's delivery state.
type SendStatus string

// The delivery states of a committed message.
const (
	SendPending    SendStatus = "PENDING"
	SendSent       SendStatus = "SENT"
	SendSendFailed SendStatus = "SEND_FAILED"
)

// MessageView is a message as trustmsg shows it (prepare, commit, rollback
// and get answer with it).
type MessageView struct {
	ID             int64         `json:"id"`
	BizID          string        `json:"biz_id"`
	MessageKey     string        `json:"message_key"`
	Status         MessageStatus `json:"status"`
	SendStatus     SendStatus    `json:"send_status,omitempty"`
	Topic          string        `json:"topic,omitempty"`
	Key            *string       `json:"key,omitempty"`
	PayloadSize    int64         `json:"payload_size"`
	VerifyAttempts int           `json:"verify_attempts"`
	SendAttempts   int           `json:"send_attempts"`
	KafkaPartition *int32        `json:"kafka_partition,omitempty"`
	KafkaOffset    *int64        `json:"kafka_offset,omitempty"`
	TraceID        string        `json:"trace_id,omitempty"`
	LastError      string        `json:"last_error,omitempty"`
	CreatedAt      time.Time     `json:"created_at"`
	UpdatedAt      time.Time     `json:"updated_at"`
	DecidedAt      *time.Time    `json:"decided_at,omitempty"`
	SentAt         *time.Time    `json:"sent_at,omitempty"`
	DeliverAt      *time.Time    `json:"deliver_at,omitempty"`
}

// RetryPolicy says how often and how patiently a failed call is repeated.
// Only connection errors and 5xx answers are retried (every producer call
// is idempotent in trustmsg); 4xx answers (400, 401, 404, 409, ...) are
// final and never repeated. Delays double from MinDelay up to MaxDelay,
// each with up to half of it again as random jitter, and never shorter than
// a 5xx's Retry-After (at most 60 s).
type RetryPolicy struct {
	// MaxRetries is how many times a call is repeated after the first
	// attempt (0: tried once).
	MaxRetries int
	// MinDelay is the delay before the first retry.
	MinDelay time.Duration
	// MaxDelay caps the delay between two attempts.
	MaxDelay time.Duration
}

// DefaultRetryPolicy: 5 retries, 100 ms doubling up to 5 s (about 3 to 5 s
// of patience in all).
var DefaultRetryPolicy = RetryPolicy{MaxRetries: 5, MinDelay: 100 * time.Millisecond, MaxDelay: 5 * time.Second}

// maxRetryAfter caps a server's Retry-After.
const maxRetryAfter = 60 * time.Second

// delay is the wait before retry n (0-based): min(MinDelay*2^n, MaxDelay)
// plus up to half of that as jitter, never less than retryAfter.
func (p RetryPolicy) delay(n int, retryAfter time.Duration) time.Duration {
	d := p.MinDelay
	for i := 0; i < n && d < p.MaxDelay; i++ {
		d *= 2
	}
	if d > p.MaxDelay {
		d = p.MaxDelay
	}
	if d > 0 {
		d += rand.N(d/2 + 1)
	}
	if retryAfter > maxRetryAfter {
		retryAfter = maxRetryAfter
	}
	return max(d, retryAfter)
}

// Option configures a [Client], an [Admin], a [Barrier], an [Inbox] or a
// [CheckHandler]; each takes what applies to it ([WithLogger] for the last
// three).
type Option func(*config)

type config struct {
	http      *http.Client
	retry     RetryPolicy
	userAgent string
	log       *slog.Logger
}

// WithHTTPClient makes the client use hc (its transport, timeouts, TLS).
// The default has a 10 s timeout per request and follows no redirects (the
// bearer token must not travel elsewhere); a client given here should not
// follow them either.
func WithHTTPClient(hc *http.Client) Option { return func(c *config) { c.http = hc } }

// WithRetry replaces [DefaultRetryPolicy].
func WithRetry(p RetryPolicy) Option { return func(c *config) { c.retry = p } }

// WithUserAgent sets the User-Agent sent with every request.
func WithUserAgent(ua string) Option { return func(c *config) { c.userAgent = ua } }

// transport is the HTTP machinery shared by Client and Admin.
type transport struct {
	base  *url.URL
	token string
	cfg   config
}

func newTransport(baseURL, token string, opts []Option) (*transport, error) {
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("trustmsg: base URL %q must be an absolute http(s) URL, e.g. http://127.0.0.1:8080", baseURL)
	}
	if token == "" {
		return nil, errors.New("trustmsg: the bearer token is empty")
	}
	cfg := config{
		http: &http.Client{
			Timeout: 10 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		retry:     DefaultRetryPolicy,
		userAgent: "trustmsg-go/" + Version,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.retry.MaxRetries < 0 || cfg.retry.MinDelay < 0 || cfg.retry.MaxDelay < cfg.retry.MinDelay {
		return nil, fmt.Errorf("trustmsg: retry policy %+v: MaxRetries and MinDelay must be >= 0 and MaxDelay >= MinDelay", cfg.retry)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &transport{base: u, token: token, cfg: cfg}, nil
}

// url is the base URL with segments appended, each escaped.
func (t *transport) url(segments ...string) string {
	u := *t.base
	var b strings.Builder
	b.WriteString(u.Path)
	for _, s := range segments {
		b.WriteByte('/')
		b.WriteString(url.PathEscape(s))
	}
	u.RawPath = b.String()
	p, _ := url.PathUnescape(u.RawPath)
	u.Path = p
	return u.String()
}

type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// call sends the request, retrying per the policy, and decodes a 2xx
// answer into out.
func (t *transport) call(ctx context.Context, op, method, target string, body any, header http.Header, out any) error {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return &Error{Op: op, Message: "encoding the request: " + err.Error(), Err: err}
		}
	}
	for attempt := 1; ; attempt++ {
		retryAfter, err := t.attempt(ctx, op, method, target, payload, header, out)
		if err == nil {
			return nil
		}
		err.Attempts = attempt
		if !err.unavailable || attempt > t.cfg.retry.MaxRetries || ctx.Err() != nil {
			return err
		}
		timer := time.NewTimer(t.cfg.retry.delay(attempt-1, retryAfter))
		select {
		case <-ctx.Done():
			timer.Stop()
			err.Err = errors.Join(err.Err, ctx.Err())
			return err
		case <-timer.C:
		}
	}
}

// attempt makes one request; a failure worth repeating is marked unavailable.
func (t *transport) attempt(ctx context.Context, op, method, target string, payload []byte, header http.Header, out any) (time.Duration, *Error) {
	var body io.Reader
	if payload != nil {
		body = bytes.NewReader(payload)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return 0, &Error{Op: op, Message: err.Error(), Err: err}
	}
	for name, values := range header {
		req.Header[name] = values
	}
	req.Header.Set("Authorization", "Bearer "+t.token)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", t.cfg.userAgent)
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := t.cfg.http.Do(req)
	if err != nil {
		return 0, &Error{Op: op, Message: err.Error(), Err: err, unavailable: true}
	}
	defer res.Body.Close()
	data, err := io.ReadAll(io.LimitReader(res.Body, 8<<20))
	if err != nil {
		// An answer cut off mid-way is a network error like any other.
		return 0, &Error{Op: op, Status: res.StatusCode, Message: "reading the answer: " + err.Error(), Err: err, unavailable: true}
	}
	if res.StatusCode >= 200 && res.StatusCode < 300 {
		if out == nil {
			return 0, nil
		}
		if err := json.Unmarshal(data, out); err != nil {
			return 0, &Error{Op: op, Status: res.StatusCode, Message: "the answer is not what trustmsg sends: " + err.Error(), Err: err}
		}
		return 0, nil
	}
	e := &Error{Op: op, Status: res.StatusCode}
	var eb errorBody
	if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
		e.Code, e.Message = eb.Error.Code, eb.Error.Message
	} else {
		text := strings.TrimSpace(string(data[:min(len(data), 200)]))
		if text == "" {
			text = http.StatusText(res.StatusCode)
		}
		e.Message = text
	}
	var retryAfter time.Duration
	if res.StatusCode >= 500 {
		e.unavailable = true
		if s, err := strconv.Atoi(strings.TrimSpace(res.Header.Get("Retry-After"))); err == nil && s > 0 {
			retryAfter = time.Duration(s) * time.Second
		}
	}
	return retryAfter, e
}

// Client is a trustmsg producer over HTTP: its biz_id, its bearer token and
// the service's address. Safe for concurrent use; create one per producer
// and reuse it.
type Client struct {
	t     *transport
	bizID string
}

// NewClient returns a producer client for trustmsg at baseURL (e.g.
// "http://127.0.0.1:8080"; a path prefix is kept) as producer bizID with its
// bearer token (from its registration).
func NewClient(baseURL, bizID, token string, opts ...Option) (*Client, error) {
	if err := checkBizID("new client", bizID); err != nil {
		return nil, err
	}
	t, err := newTransport(baseURL, token, opts)
	if err != nil {
		return nil, err
	}
	return &Client{t: t, bizID: bizID}, nil
}

// BizID is the producer's id.
func (c *Client) BizID() string { return c.bizID }

type prepareRequest struct {
	BizID           string            `json:"biz_id"`
	MessageKey      string            `json:"message_key"`
	Topic           string            `json:"topic"`
	Key             *string           `json:"key,omitempty"`
	Payload         string            `json:"payload"`
	PayloadEncoding string            `json:"payload_encoding,omitempty"`
	Headers         map[string]string `json:"headers,omitempty"`
	DeliverAt       string            `json:"deliver_at,omitempty"`
	DeliverAfterMs  *int64            `json:"deliver_after_ms,omitempty"`
}

// Prepare stores msg as a PREPARED message (POST /v1/messages/prepare).
// The same prepare again is answered with the same view; the same key with
// other content is a conflict ("prepare_conflict", [IsConflict]). The trace
// context is the message's own, else the OpenTelemetry span in ctx.
//
// What trustmsg would refuse as invalid is refused here before sending
// ([IsInvalid], with the API's code).
func (c *Client) Prepare(ctx context.Context, msg Message) (*MessageView, error) {
	const op = "prepare"
	if err := msg.validate(op, time.Now()); err != nil {
		return nil, err
	}
	payload, encoding := msg.payloadField()
	req := prepareRequest{
		BizID: c.bizID, MessageKey: msg.MessageKey, Topic: msg.Topic,
		Payload: payload, PayloadEncoding: encoding, Headers: msg.Headers,
	}
	if len(msg.Headers) == 0 {
		req.Headers = nil
	}
	if msg.Key != "" {
		req.Key = &msg.Key
	}
	afterMs, at, _ := msg.due(op, time.Now())
	if afterMs >= 0 {
		req.DeliverAfterMs = &afterMs
	}
	if !at.IsZero() {
		req.DeliverAt = at.Format("2006-01-02T15:04:05.000Z07:00")
	}
	header := http.Header{}
	if tp, ts := msg.traceHeaders(ctx); tp != "" {
		header.Set(HeaderTraceParent, tp)
		if ts != "" {
			header.Set(HeaderTraceState, ts)
		}
	}
	var view MessageView
	if err := c.t.call(ctx, op, http.MethodPost, c.t.url("v1", "messages", "prepare"), req, header, &view); err != nil {
		return nil, err
	}
	return &view, nil
}

type decisionRequest struct {
	BizID      string `json:"biz_id"`
	MessageKey string `json:"message_key"`
}

// Commit decides message messageKey for delivery (POST
// /v1/messages/commit). Repeating it is fine; after a rollback it is a
// conflict ("already_rolled_back"); an unknown key is [IsNotFound].
func (c *Client) Commit(ctx context.Context, messageKey string) (*MessageView, error) {
	return c.decide(ctx, "commit", messageKey)
}

// Rollback decides message messageKey against delivery (POST
// /v1/messages/rollback). Repeating it is fine; after a commit it is a
// conflict ("already_committed"); for an unknown key it leaves a tombstone
// so a late prepare is refused.
func (c *Client) Rollback(ctx context.Context, messageKey string) (*MessageView, error) {
	return c.decide(ctx, "rollback", messageKey)
}

func (c *Client) decide(ctx context.Context, op, messageKey string) (*MessageView, error) {
	if err := checkMessageKey(op, messageKey); err != nil {
		return nil, err
	}
	var view MessageView
	err := c.t.call(ctx, op, http.MethodPost, c.t.url("v1", "messages", op), decisionRequest{c.bizID, messageKey}, nil, &view)
	if err != nil {
		return nil, err
	}
	return &view, nil
}

// Get returns the message's current view (GET /v1/messages/{biz_id}/{key});
// [IsNotFound] when it was never prepared.
func (c *Client) Get(ctx context.Context, messageKey string) (*MessageView, error) {
	const op = "get"
	if err := checkMessageKey(op, messageKey); err != nil {
		return nil, err
	}
	var view MessageView
	if err := c.t.call(ctx, op, http.MethodGet, c.t.url("v1", "messages", c.bizID, messageKey), nil, nil, &view); err != nil {
		return nil, err
	}
	return &view, nil
}

// Admin is trustmsg's admin API, as far as a producer's set-up needs it:
// registering producers.
type Admin struct{ t *transport }

// NewAdmin returns an admin client for trustmsg at baseURL with the admin
// token.
func NewAdmin(baseURL, adminToken string, opts ...Option) (*Admin, error) {
	t, err := newTransport(baseURL, adminToken, opts)
	if err != nil {
		return nil, err
	}
	return &Admin{t: t}, nil
}

// ProducerSettings is a producer registration (PUT /v1/producers/{biz_id}).
// An update replaces the whole registration.
type ProducerSettings struct {
	// VerifyURL is the producer's check-back endpoint.
	VerifyURL string `json:"verify_url"`
	// Topics it may publish to (exact names, or prefixes ending in *).
	Topics []string `json:"topics,omitempty"`
	// FirstVerifyAfterMs: delay after prepare before the first check-back.
	FirstVerifyAfterMs *int `json:"first_verify_after_ms,omitempty"`
	// MaxVerifyAttempts before the message goes VERIFY_FAILED.
	MaxVerifyAttempts *int `json:"max_verify_attempts,omitempty"`
	// VerifyTimeoutMs: timeout of one check-back call.
	VerifyTimeoutMs *int `json:"verify_timeout_ms,omitempty"`
	// Ordered: messages of one (topic, record key) are sent in order.
	Ordered bool `json:"ordered,omitempty"`
}

// ProducerView is a producer registration. Token and SigningSecret are
// present only in the answer that created the producer.
type ProducerView struct {
	BizID              string    `json:"biz_id"`
	VerifyURL          string    `json:"verify_url"`
	Topics             []string  `json:"topics"`
	FirstVerifyAfterMs int       `json:"first_verify_after_ms"`
	MaxVerifyAttempts  int       `json:"max_verify_attempts"`
	VerifyTimeoutMs    int       `json:"verify_timeout_ms"`
	Ordered            bool      `json:"ordered"`
	Token              string    `json:"token,omitempty"`
	SigningSecret      string    `json:"signing_secret,omitempty"`
	CreatedAt          time.Time `json:"created_at"`
	UpdatedAt          time.Time `json:"updated_at"`
}

// PutProducer creates or updates producer bizID. The answer to a creation
// carries the producer's token and signing secret (shown once).
func (a *Admin) PutProducer(ctx context.Context, bizID string, s ProducerSettings) (*ProducerView, error) {
	const op = "put producer"
	if err := checkBizID(op, bizID); err != nil {
		return nil, err
	}
	var view ProducerView
	if err := a.t.call(ctx, op, http.MethodPut, a.t.url("v1", "producers", bizID), s, nil, &view); err != nil {
		return nil, err
	}
	return &view, nil
}
