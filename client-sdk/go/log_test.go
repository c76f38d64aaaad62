package trustmsg_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
)

// checkCall is a correctly signed check-back request for secret.
func checkCall(t *testing.T, secret string) *http.Request {
	t.Helper()
	body := `{"biz_id":"shop","message_key":"order-1","message_id":7,"attempt":1,"prepared_at":"2026-01-01T00:00:00Z"}`
	ts := time.Now().Unix()
	sig, err := trustmsg.Sign(secret, "chk_7_1", ts, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	req := httptest.NewRequest(http.MethodPost, "/trustmsg/check", strings.NewReader(body))
	req.Header.Set(trustmsg.HeaderWebhookID, "chk_7_1")
	req.Header.Set(trustmsg.HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(trustmsg.HeaderWebhookSignature, sig)
	return req
}

func TestCheckHandlerLogsToTheCallersLoggerAndAnEndedCallIsNotAnError(t *testing.T) {
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	v, err := trustmsg.NewVerifier(secret)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		err   error
		level string
	}{
		// trustmsg's verify timeout ended the request: it asks again.
		{"the caller's deadline", fmt.Errorf("trustmsg: barrier check: %w", context.DeadlineExceeded), "INFO"},
		{"the caller gone", context.Canceled, "INFO"},
		{"a fault", errors.New("disk on fire"), "ERROR"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var buf bytes.Buffer
			logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
			h := trustmsg.CheckHandler(v, func(context.Context, trustmsg.CheckRequest) (trustmsg.Decision, error) {
				return "", c.err
			}, trustmsg.WithLogger(logger))
			res := httptest.NewRecorder()
			h.ServeHTTP(res, checkCall(t, secret))
			if res.Code != http.StatusInternalServerError {
				t.Fatalf("answered %d, want 500 (ask again)", res.Code)
			}
			var line struct {
				Level string `json:"level"`
				Msg   string `json:"msg"`
				Error string `json:"error"`
			}
			if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
				t.Fatalf("the caller's logger got %q: %v", buf.String(), err)
			}
			if line.Level != c.level || !strings.Contains(line.Msg, "check-back decision failed") || line.Error != c.err.Error() {
				t.Fatalf("logged %+v, want level %s with the error", line, c.level)
			}
		})
	}
}

func TestWithLoggerDiscardSilencesTheSDK(t *testing.T) {
	v, err := trustmsg.NewVerifier("whsec_" + base64.StdEncoding.EncodeToString(make([]byte, 32)))
	if err != nil {
		t.Fatal(err)
	}
	// A forged call is logged (Warn); to a discarding logger nothing
	// reaches the global default.
	var global bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&global, nil)))
	defer slog.SetDefault(old)
	h := trustmsg.CheckHandler(v, func(context.Context, trustmsg.CheckRequest) (trustmsg.Decision, error) {
		return trustmsg.Commit, nil
	}, trustmsg.WithLogger(slog.New(slog.DiscardHandler)))
	res := httptest.NewRecorder()
	h.ServeHTTP(res, checkCall(t, "whsec_"+base64.StdEncoding.EncodeToString([]byte("another secret, 32 bytes long!!!"))))
	if res.Code != http.StatusUnauthorized {
		t.Fatalf("answered %d, want 401", res.Code)
	}
	if global.Len() != 0 {
		t.Fatalf("the SDK logged to slog.Default: %s", global.String())
	}
}
