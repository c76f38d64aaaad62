package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// dtmBranchFlush is how long DTM may hold a branch's status before writing
// it (dtmsvr.UpdateBranchAsyncInterval, 200 ms, and a margin): the batched
// write belongs to the phase it finishes.
const dtmBranchFlush = 300 * time.Millisecond

// dtmSystem drives DTM's 2-phase message over its HTTP API, as dtmcli's Msg
// does (POST prepare, the local step, POST submit, the same body); a
// message is delivered when DTM calls its one branch, a sink here.
type dtmSystem struct {
	http                  *http.Client
	prepareURL, submitURL string
	sinkURL, checkURL     string
	db                    *sql.DB
	sink                  *http.Server
	// Calls DTM answered 500 for a deadlock in its own statements, sent
	// again: prepare and submit are idempotent by gid, and a producer
	// would retry them so.
	deadlocks atomic.Int64
}

// dtmDeadlockRetries bounds how often one call is sent again.
const dtmDeadlockRetries = 10

// dtmMsg is the body dtmcli sends for a msg transaction (its TransBase).
type dtmMsg struct {
	Gid           string              `json:"gid"`
	TransType     string              `json:"trans_type"`
	Steps         []map[string]string `json:"steps"`
	Payloads      []string            `json:"payloads"`
	QueryPrepared string              `json:"query_prepared"`
	Protocol      string              `json:"protocol"`
}

// dtmPayload is the branch's body: a JSON object of payloadBytes bytes, the
// size of trustmsg's payload.
var dtmPayload = `{"data":"` + strings.Repeat("x", payloadBytes-len(`{"data":""}`)) + `"}`

func newDTM(ctx context.Context, cfg runConfig, t *tracker) (*dtmSystem, error) {
	s := &dtmSystem{
		http:       httpClient(4096),
		prepareURL: cfg.url + "/prepare",
		submitURL:  cfg.url + "/submit",
	}
	var err error
	if s.db, err = sql.Open("mysql", cfg.dsn); err != nil {
		return nil, err
	}
	if err := s.db.PingContext(ctx); err != nil {
		s.db.Close()
		return nil, fmt.Errorf("DTM's database: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		s.db.Close()
		return nil, err
	}
	base := "http://" + l.Addr().String()
	s.sinkURL, s.checkURL = base+"/sink", base+"/check"
	mux := http.NewServeMux()
	// DTM calls the branch with the transaction in the query string.
	mux.HandleFunc("/sink", func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		_, _ = io.Copy(io.Discard, r.Body)
		t.delivered(r.URL.Query().Get("gid"), now)
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"dtm_result":"SUCCESS"}`)
	})
	// The check-back of a prepared message left undecided: none is
	// expected (each is submitted at once), and the answer is "done".
	mux.HandleFunc("/check", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"dtm_result":"SUCCESS"}`)
	})
	s.sink = &http.Server{Handler: mux}
	go s.sink.Serve(l)
	return s, nil
}

func (s *dtmSystem) send(ctx context.Context, key string) error {
	body, _ := json.Marshal(dtmMsg{
		Gid:           key,
		TransType:     "msg",
		Steps:         []map[string]string{{"action": s.sinkURL}},
		Payloads:      []string{dtmPayload},
		QueryPrepared: s.checkURL,
		Protocol:      "http",
	})
	if err := s.post(ctx, s.prepareURL, body); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	if err := s.post(ctx, s.submitURL, body); err != nil {
		return fmt.Errorf("submit: %w", err)
	}
	return nil
}

// post succeeds as dtmcli's TransCallDtm does: 200 and no FAILURE in the
// body. A deadlock DTM reports is sent again.
func (s *dtmSystem) post(ctx context.Context, url string, body []byte) error {
	for try := 0; ; try++ {
		err := s.postOnce(ctx, url, body)
		if !errors.Is(err, errDeadlock) || try == dtmDeadlockRetries {
			return err
		}
		s.deadlocks.Add(1)
	}
}

var errDeadlock = errors.New("DTM answered 500: deadlock")

func (s *dtmSystem) postOnce(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := s.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(res.Body)
	switch {
	case res.StatusCode == http.StatusServiceUnavailable:
		return errShed
	case res.StatusCode == http.StatusInternalServerError && bytes.Contains(answer, []byte("Deadlock found")):
		return errDeadlock
	case res.StatusCode != http.StatusOK || bytes.Contains(answer, []byte("FAILURE")):
		return fmt.Errorf("%s %s", res.Status, answer)
	}
	return nil
}

// unsettled: transactions not yet succeeded (DTM marks one so after its
// branches answered), over its (status, next_cron_time) index.
func (s *dtmSystem) unsettled(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM trans_global WHERE status IN ('prepared', 'submitted')").Scan(&n)
	return n, err
}

func (s *dtmSystem) afterSettled() { time.Sleep(dtmBranchFlush) }

func (s *dtmSystem) warnings() []string {
	if n := s.deadlocks.Load(); n > 0 {
		return []string{fmt.Sprintf("%d calls sent again after DTM answered 500 for a deadlock", n)}
	}
	return nil
}

func (s *dtmSystem) close() {
	s.sink.Close()
	s.db.Close()
}
