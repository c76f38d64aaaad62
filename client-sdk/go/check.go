package trustmsg

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The Standard Webhooks headers of a check-back call.
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// DefaultTolerance is how far webhook-timestamp may be from the local clock,
// either way (the Standard Webhooks recommendation).
const DefaultTolerance = 5 * time.Minute

// DefaultCheckPath is where the order-service example serves the endpoint.
const DefaultCheckPath = "/trustmsg/check"

// maxCheckBody is the largest check-back request body read.
const maxCheckBody = 64 << 10

// Errors of [Verifier.Verify], found with [errors.Is]. Each means: answer 401.
var (
	ErrMissingHeaders    = errors.New("trustmsg: webhook-id, webhook-timestamp and webhook-signature are required")
	ErrBadTimestamp      = errors.New("trustmsg: webhook-timestamp is not an integer")
	ErrExpired           = errors.New("trustmsg: webhook-timestamp is outside the tolerance (a replay, or a clock off)")
	ErrSignatureMismatch = errors.New("trustmsg: no v1 signature matches")
)

// Verifier checks that a check-back call was signed by trustmsg with the
// producer's signing secret (Standard Webhooks: HMAC-SHA256 over
// "<webhook-id>.<webhook-timestamp>.<raw body>", one or more "v1,<base64>"
// entries, the timestamp within a tolerance of the local clock).
type Verifier struct {
	keys      [][]byte
	tolerance time.Duration
	now       func() time.Time
}

// VerifierOption configures a [Verifier].
type VerifierOption func(*Verifier)

// WithTolerance accepts timestamps at most d away from the local clock
// (default [DefaultTolerance]).
func WithTolerance(d time.Duration) VerifierOption { return func(v *Verifier) { v.tolerance = d } }

// WithClock makes the verifier read the time from now (tests).
func WithClock(now func() time.Time) VerifierOption { return func(v *Verifier) { v.now = now } }

// WithSecrets accepts calls signed with any of more secrets too, e.g. the
// previous one while a rotation is under way.
func WithSecrets(more ...string) VerifierOption {
	return func(v *Verifier) {
		for _, s := range more {
			if k, err := decodeSecret(s); err == nil {
				v.keys = append(v.keys, k)
			} else {
				// Remembered as an impossible key; NewVerifier reports it.
				v.keys = append(v.keys, nil)
			}
		}
	}
}

// decodeSecret turns "whsec_<base64>" (the registration's signing_secret)
// into the HMAC key.
func decodeSecret(secret string) ([]byte, error) {
	b64, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, errors.New("trustmsg: a signing secret is whsec_<base64> (the registration's signing_secret)")
	}
	key, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("trustmsg: the signing secret's base64 part: %w", err)
	}
	if len(key) == 0 {
		return nil, errors.New("trustmsg: the signing secret is empty")
	}
	return key, nil
}

// NewVerifier returns a verifier for the producer's signing secret
// ("whsec_…", the registration's signing_secret). A secret that is not
// whsec_<base64> is an error now, not a 401 on every call later.
func NewVerifier(secret string, opts ...VerifierOption) (*Verifier, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return nil, err
	}
	v := &Verifier{keys: [][]byte{key}, tolerance: DefaultTolerance, now: time.Now}
	for _, o := range opts {
		o(v)
	}
	for _, k := range v.keys {
		if k == nil {
			return nil, errors.New("trustmsg: WithSecrets: a secret is not whsec_<base64>")
		}
	}
	if v.tolerance <= 0 {
		return nil, errors.New("trustmsg: the tolerance must be positive")
	}
	return v, nil
}

// Verify checks a call's headers against its raw body, as received (never
// a re-serialization). nil means authentic; otherwise the error wraps
// [ErrMissingHeaders], [ErrBadTimestamp], [ErrExpired] or
// [ErrSignatureMismatch] and the call must be answered 401.
func (v *Verifier) Verify(h http.Header, body []byte) error {
	id, ts, sigs := h.Get(HeaderWebhookID), h.Get(HeaderWebhookTimestamp), h.Get(HeaderWebhookSignature)
	if id == "" || ts == "" || sigs == "" {
		return ErrMissingHeaders
	}
	sent, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %q", ErrBadTimestamp, ts)
	}
	now := v.now().Unix()
	tol := int64(v.tolerance / time.Second)
	if sent < now-tol || sent > now+tol {
		return fmt.Errorf("%w: %d is %d s from now", ErrExpired, sent, sent-now)
	}
	for _, key := range v.keys {
		mac := hmac.New(sha256.New, key)
		mac.Write([]byte(id))
		mac.Write([]byte{'.'})
		mac.Write([]byte(ts))
		mac.Write([]byte{'.'})
		mac.Write(body)
		want := []byte(base64.StdEncoding.EncodeToString(mac.Sum(nil)))
		for _, entry := range strings.Fields(sigs) {
			version, sig, ok := strings.Cut(entry, ",")
			if ok && version == "v1" && subtle.ConstantTimeCompare([]byte(sig), want) == 1 {
				return nil
			}
		}
	}
	return ErrSignatureMismatch
}

// Sign returns the webhook-signature value ("v1,<base64>") for a call with
// this id, timestamp and body, signed with secret: what trustmsg sends. For
// tests of a check-back endpoint.
func Sign(secret, id string, timestamp int64, body []byte) (string, error) {
	key, err := decodeSecret(secret)
	if err != nil {
		return "", err
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%d.", id, timestamp)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil)), nil
}

// CheckRequest is a verified check-back call.
type CheckRequest struct {
	// BizID is the producer's id.
	BizID string `json:"biz_id"`
	// MessageKey is the producer's key for the message.
	MessageKey string `json:"message_key"`
	// MessageID is trustmsg's id for the message; the answer echoes it.
	MessageID uint64 `json:"message_id"`
	// Attempt is 1 for the first check-back of the message, then 2, 3, ...
	Attempt int `json:"attempt"`
	// PreparedAt is when prepare stored the message.
	PreparedAt time.Time `json:"prepared_at"`
	// TraceParent and TraceState continue the prepare's trace (not signed).
	TraceParent string `json:"-"`
	TraceState  string `json:"-"`
}

// ParseCheckRequest parses a check-back request body (unknown fields are
// ignored). Parse only a body [Verifier.Verify] accepted.
func ParseCheckRequest(body []byte) (CheckRequest, error) {
	var req CheckRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("trustmsg: not a check-back request: %w", err)
	}
	if req.BizID == "" || req.MessageKey == "" || req.MessageID == 0 {
		return req, errors.New("trustmsg: not a check-back request: biz_id, message_key and message_id are required")
	}
	return req, nil
}

// CheckResponse is the answer to a check-back call.
type CheckResponse struct {
	MessageID uint64   `json:"message_id"`
	Decision  Decision `json:"decision"`
}

// DecideFunc decides a verified check-back call: [Commit] when the local
// transaction committed, [Rollback] when it did not and never will,
// [Unknown] when it cannot tell yet. An error is answered 500 (trustmsg asks
// again later). [Barrier.Decide] is one.
type DecideFunc func(ctx context.Context, req CheckRequest) (Decision, error)

// CheckHandler returns the check-back endpoint as an [http.Handler]: it
// accepts POST only, verifies the call with v before anything else (401 for
// a missing, forged or stale signature, without calling decide), parses the
// body (400 if it is not a check-back request), asks decide and answers
// {"message_id": …, "decision": …}.
//
// Of opts only [WithLogger] applies. A decision that failed because
// trustmsg gave up on the call (its verify timeout ended the request's
// context) is logged at Info: trustmsg asks again.
//
//	mux.Handle("POST /trustmsg/check", trustmsg.CheckHandler(verifier, barrier.Decide))
func CheckHandler(v *Verifier, decide DecideFunc, opts ...Option) http.Handler {
	if v == nil || decide == nil {
		panic("trustmsg: CheckHandler needs a verifier and a decide function")
	}
	return &checkHandler{v: v, decide: decide, log: loggerOf(opts)}
}

type checkHandler struct {
	v      *Verifier
	decide DecideFunc
	log    *slog.Logger
}

func (h *checkHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "a check-back call is a POST")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCheckBody))
	if err != nil {
		writeError(w, http.StatusRequestEntityTooLarge, "body_too_large", "a check-back request is at most 64 KiB")
		return
	}
	if err := h.v.Verify(r.Header, body); err != nil {
		code := "bad_signature"
		switch {
		case errors.Is(err, ErrMissingHeaders):
			code = "missing_signature"
		case errors.Is(err, ErrExpired):
			code = "signature_expired"
		case errors.Is(err, ErrBadTimestamp):
			code = "bad_timestamp"
		}
		h.log.WarnContext(r.Context(), "trustmsg: check-back refused", "webhook_id", r.Header.Get(HeaderWebhookID), "error", err)
		writeError(w, http.StatusUnauthorized, code, err.Error())
		return
	}
	req, err := ParseCheckRequest(body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_body", err.Error())
		return
	}
	req.TraceParent, req.TraceState = r.Header.Get(HeaderTraceParent), r.Header.Get(HeaderTraceState)
	d, err := h.decide(r.Context(), req)
	if err == nil && d != Commit && d != Rollback && d != Unknown {
		err = fmt.Errorf("trustmsg: the decide function returned %q, not commit, rollback or unknown", d)
	}
	if err != nil {
		// The cause may be internal detail; trustmsg only needs to ask again.
		logFailure(r.Context(), h.log, slog.LevelError, "trustmsg: check-back decision failed", err, "biz_id", req.BizID, "message_key", req.MessageKey, "message_id", req.MessageID)
		writeError(w, http.StatusInternalServerError, "decision_failed", "the producer could not decide; ask again later")
		return
	}
	h.log.InfoContext(r.Context(), "trustmsg: check-back answered", "biz_id", req.BizID, "message_key", req.MessageKey, "message_id", req.MessageID, "decision", d)
	writeJSON(w, http.StatusOK, CheckResponse{MessageID: req.MessageID, Decision: d})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	var body errorBody
	body.Error.Code, body.Error.Message = code, message
	writeJSON(w, status, body)
}
