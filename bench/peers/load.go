package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type runConfig struct {
	system, version, label string
	url, dsn, adminToken   string
	kafka, topic           string
	concurrency            int
	warmup, closed, open   time.Duration
	// Fixed arrival rates, msg/s, each an open loop of --open after the
	// closed loop, the same for every system (the half peak comes last).
	rates []float64
	// trustmsg: where its spans come (--otlp-endpoint), for the stage
	// budget of each open loop, and its export interval.
	stagesListen    string
	stagesInterval  time.Duration
	deliveryTimeout time.Duration
	// Open loops: messages per send (0 or 1: one), for a system that
	// commits several in one call (batchSender); the arrival rate stays
	// messages per second, so the sends come perSend times less often.
	perSend                int
	servicePids            []int
	brokerPid, databasePid int
	out                    string
}

// batchSender is a system that also commits several messages in one call
// (the local message table's producer transaction of several rows).
type batchSender interface {
	insert(ctx context.Context, keys []string) error
}

// system is one middleware as the load generator drives it.
type system interface {
	// send is one message's producer side: prepare, the local step (empty)
	// and commit (trustmsg) or submit (DTM), returning once the last call
	// is answered. Delivery is reported to the tracker, not here.
	send(ctx context.Context, key string) error
	// unsettled counts the messages whose bookkeeping in the database is not
	// finished (trustmsg: committed, not marked SENT; DTM: not succeeded).
	unsettled(ctx context.Context) (int, error)
	// afterSettled is called once unsettled is 0, before the phase's CPU is
	// read: what the system still writes after that (DTM's batched branch
	// status) belongs to the phase.
	afterSettled()
	// warnings are what the run should say about the system's answers.
	warnings() []string
	close()
}

// errShed is a call the system refused as overloaded (HTTP 503): the open
// loop counts these and goes on.
var errShed = errors.New("503: shed")

// tracker matches deliveries to the messages sent: the latency of a message
// runs from its intended start to the moment it was delivered.
type tracker struct {
	mu        sync.Mutex
	pending   map[string]time.Time
	latencies []time.Duration
	// When each message's last call (commit, submit) was answered, and
	// from then to its delivery: the part of the latency after the
	// producer was told its message is safe. 0 for a delivery that came
	// before the answer was read.
	answeredAt  map[string]time.Time
	afterAnswer []time.Duration
	// What the producer's own request waits: from the first call's start
	// to the last call's answer (prepare and commit, or prepare and
	// submit; the outbox: the transaction), for each message sent.
	calls []time.Duration
	last  time.Time
	// The slowest deliveries: when each was meant to start and how long
	// it took (to set beside a database's or a broker's log).
	worst []lateDelivery
	// An open loop's start, and the latencies of the messages meant to
	// start a second or more after it: the phase without its first second.
	phaseStart time.Time
	afterFirst []time.Duration
	// Deliveries of keys not pending (a second delivery, or one from
	// before this phase): counted, not timed.
	other atomic.Int64
	done  chan struct{}
}

func newTracker() *tracker {
	return &tracker{pending: map[string]time.Time{}, answeredAt: map[string]time.Time{}}
}

// expect registers a message before its prepare: a delivery may come back
// before the call that caused it is answered.
func (t *tracker) expect(key string, intended time.Time) {
	t.mu.Lock()
	t.pending[key] = intended
	t.mu.Unlock()
}

// answered notes that the message's last call was answered, at, its
// first call having begun at began.
func (t *tracker) answered(key string, began, at time.Time) {
	t.mu.Lock()
	t.calls = append(t.calls, at.Sub(began))
	if _, ok := t.pending[key]; ok {
		t.answeredAt[key] = at
	} else {
		t.afterAnswer = append(t.afterAnswer, 0)
	}
	t.mu.Unlock()
}

// forget drops a message whose send failed.
func (t *tracker) forget(key string) {
	t.mu.Lock()
	delete(t.pending, key)
	delete(t.answeredAt, key)
	t.signal()
	t.mu.Unlock()
}

func (t *tracker) delivered(key string, at time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	start, ok := t.pending[key]
	if !ok {
		t.other.Add(1)
		return
	}
	delete(t.pending, key)
	t.latencies = append(t.latencies, at.Sub(start))
	if !t.phaseStart.IsZero() && start.Sub(t.phaseStart) >= time.Second {
		t.afterFirst = append(t.afterFirst, at.Sub(start))
	}
	t.worst = keepWorst(t.worst, lateDelivery{Start: start, Ms: ms(at.Sub(start))})
	if answered, ok := t.answeredAt[key]; ok {
		delete(t.answeredAt, key)
		t.afterAnswer = append(t.afterAnswer, at.Sub(answered))
	}
	if at.After(t.last) {
		t.last = at
	}
	t.signal()
}

// signal closes done once nothing is pending and a waiter asked for it.
// Called with mu held.
func (t *tracker) signal() {
	if t.done != nil && len(t.pending) == 0 {
		close(t.done)
		t.done = nil
	}
}

// pendingKeys are the messages expected and not delivered yet.
func (t *tracker) pendingKeys() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	keys := make([]string, 0, len(t.pending))
	for k := range t.pending {
		keys = append(keys, k)
	}
	return keys
}

// reset starts a phase: what it returns are the previous phase's figures.
func (t *tracker) reset() {
	t.mu.Lock()
	t.pending = map[string]time.Time{}
	t.latencies = nil
	t.answeredAt = map[string]time.Time{}
	t.afterAnswer = nil
	t.calls = nil
	t.worst = nil
	t.last = time.Time{}
	t.phaseStart = time.Time{}
	t.afterFirst = nil
	t.mu.Unlock()
}

// startPhase notes an open loop's start (after reset).
func (t *tracker) startPhase(at time.Time) {
	t.mu.Lock()
	t.phaseStart = at
	t.mu.Unlock()
}

// wait returns once every expected message was delivered, or an error
// naming how many were not.
func (t *tracker) wait(ctx context.Context, timeout time.Duration) error {
	t.mu.Lock()
	if len(t.pending) == 0 {
		t.mu.Unlock()
		return nil
	}
	done := make(chan struct{})
	t.done = done
	t.mu.Unlock()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		t.mu.Lock()
		n := len(t.pending)
		t.done = nil
		t.mu.Unlock()
		return fmt.Errorf("%d messages not delivered %s after the last send", n, timeout)
	}
}

// result is one system's figures in one run.
type result struct {
	System      string `json:"system"`
	Version     string `json:"version"`
	Label       string `json:"label"`
	Concurrency int    `json:"concurrency"`
	LoadAvg     string `json:"loadavg"`
	Closed      phase  `json:"closed"`
	Open        phase  `json:"open"`
	// Open loops at the fixed rates (--rates), in their order.
	Rates    []phase  `json:"rates,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

// phase is what one phase measured. CPU figures are µs per delivered
// message, from /proc/<pid>/stat deltas between the phase's start and the
// moment its last message was delivered and settled.
type phase struct {
	Messages  int     `json:"messages"`
	Seconds   float64 `json:"seconds"`
	PerSecond float64 `json:"per_second"`
	// Open loop only: the arrival rate asked for, and the sends that failed
	// (503 shed or an error).
	Rate   float64 `json:"rate,omitempty"`
	Failed int     `json:"failed,omitempty"`
	// Open loop only: messages per send, when more than one.
	PerSend int `json:"per_send,omitempty"`
	// Messages sent (committed) that the system passed over for good and
	// never delivered (lossReporter); not in Messages.
	Lost   int     `json:"lost,omitempty"`
	P50ms  float64 `json:"p50_ms"`
	P99ms  float64 `json:"p99_ms"`
	P999ms float64 `json:"p99_9_ms"`
	MaxMs  float64 `json:"max_ms"`
	// From the last call's answer to delivery.
	AnswerP50ms  float64 `json:"answer_to_delivery_p50_ms"`
	AnswerP99ms  float64 `json:"answer_to_delivery_p99_ms"`
	AnswerP999ms float64 `json:"answer_to_delivery_p99_9_ms"`
	// The producer's calls, from the first one's start to the last one's
	// answer (what the producer's own request waits for the middleware).
	CallsP50ms  float64 `json:"calls_p50_ms"`
	CallsP99ms  float64 `json:"calls_p99_ms"`
	CallsP999ms float64 `json:"calls_p99_9_ms"`
	// trustmsg with --stages-listen: each stage's p50, p99, p99.9 in ms
	// (stages.go), over StagedMessages messages.
	Stages map[string][3]float64 `json:"stages,omitempty"`
	// When its first message was due, and its slowest messages, slowest
	// first (each also as seconds into the phase: a stall at a phase's
	// start is the previous phase's wake, not this rate's).
	Began time.Time `json:"began"`
	// Open loop only: p99 of the messages meant to start a second or more
	// into the phase (without the phase's start).
	AfterFirstSecondP99ms float64        `json:"after_first_second_p99_ms,omitempty"`
	Worst                 []lateDelivery `json:"worst,omitempty"`
	StagedMessages        int            `json:"staged_messages,omitempty"`
	Slowest               []slowMessage  `json:"slowest,omitempty"`
	// Database (mysqld/mariadbd), the system's own process(es), the Kafka
	// broker (trustmsg only) and this load generator (HTTP clients, the
	// sink or the Kafka consumer).
	DatabaseCPUus float64 `json:"database_cpu_us"`
	ProcessCPUus  float64 `json:"process_cpu_us"`
	BrokerCPUus   float64 `json:"broker_cpu_us,omitempty"`
	LoadCPUus     float64 `json:"load_generator_cpu_us"`
}

func run(ctx context.Context, cfg runConfig) (*result, error) {
	mysqld := cfg.databasePid
	if mysqld == 0 {
		var err error
		if mysqld, err = databasePid(); err != nil {
			return nil, err
		}
	}
	t := newTracker()
	var sys system
	var err error
	switch cfg.system {
	case "trustmsg":
		sys, err = newTrustmsg(ctx, cfg, t)
	case "dtm":
		sys, err = newDTM(ctx, cfg, t)
	default:
		return nil, fmt.Errorf("unknown system %q", cfg.system)
	}
	if err != nil {
		return nil, err
	}
	defer sys.close()
	res := &result{System: cfg.system, Version: cfg.version, Label: cfg.label, Concurrency: cfg.concurrency, LoadAvg: loadAvg()}
	meter := func() *cpuMeter {
		return newCPUMeter(mysqld, cfg.servicePids, cfg.brokerPid)
	}

	if cfg.warmup > 0 {
		if _, err := closedLoop(ctx, sys, t, meter(), cfg, "w", cfg.warmup); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	db, err := sql.Open("mysql", cfg.dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	others := watchOthers(db)
	closed, err := closedLoop(ctx, sys, t, meter(), cfg, "c", cfg.closed)
	if err != nil {
		return nil, fmt.Errorf("closed loop: %w", err)
	}
	res.Closed = closed
	if w := others.done("closed loop"); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	for _, rate := range cfg.rates {
		others = watchOthers(db)
		p, err := openLoop(ctx, sys, t, meter(), cfg, rate)
		if err != nil {
			return nil, fmt.Errorf("open loop at %.0f msg/s: %w", rate, err)
		}
		res.Rates = append(res.Rates, p)
		if w := others.done(fmt.Sprintf("open loop at %.0f msg/s", rate)); w != "" {
			res.Warnings = append(res.Warnings, w)
		}
	}
	others = watchOthers(db)
	open, err := openLoop(ctx, sys, t, meter(), cfg, closed.PerSecond/2)
	if err != nil {
		return nil, fmt.Errorf("open loop: %w", err)
	}
	res.Open = open
	if w := others.done("open loop"); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	res.Warnings = append(res.Warnings, sys.warnings()...)
	if n := t.other.Load(); n > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d deliveries of messages already delivered", n))
	}
	return res, nil
}

// closedLoop runs concurrency producers, each sending its next message once
// its last was answered, for d; then waits for every delivery. msg/s is the
// messages sent over the time from the start to the last delivery.
func closedLoop(ctx context.Context, sys system, t *tracker, m *cpuMeter, cfg runConfig, prefix string, d time.Duration) (phase, error) {
	t.reset()
	start := time.Now()
	end := start.Add(d)
	var sent atomic.Int64
	errs := make(chan error, cfg.concurrency)
	var wg sync.WaitGroup
	for range cfg.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(end) {
				key := messageKey(cfg.label, prefix)
				began := time.Now()
				t.expect(key, began)
				if err := sys.send(ctx, key); err != nil {
					t.forget(key)
					errs <- err
					return
				}
				t.answered(key, began, time.Now())
				sent.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return phase{}, err
	}
	lost, err := awaitDeliveries(ctx, sys, t, cfg.deliveryTimeout)
	if err != nil {
		return phase{}, err
	}
	if err := settle(ctx, sys); err != nil {
		return phase{}, err
	}
	n := int(sent.Load()) - lost
	p := summarize(t, start, n)
	p.Lost = lost
	m.charge(&p, n)
	return p, nil
}

// openLoop sends at a fixed rate for cfg.open, whatever the answers take;
// each message's latency runs from its intended start (no coordinated
// omission).
func openLoop(ctx context.Context, sys system, t *tracker, m *cpuMeter, cfg runConfig, rate float64) (phase, error) {
	if rate <= 0 {
		return phase{}, errors.New("no peak to take half of")
	}
	perSend := max(cfg.perSend, 1)
	send := func(ctx context.Context, keys []string) error { return sys.send(ctx, keys[0]) }
	if perSend > 1 {
		batch, ok := sys.(batchSender)
		if !ok {
			return phase{}, fmt.Errorf("%d messages per send: this system sends one at a time", perSend)
		}
		send = batch.insert
	}
	t.reset()
	sink := stagesOf(sys)
	if sink != nil {
		sink.reset()
	}
	interval := time.Duration(float64(perSend) * float64(time.Second) / rate)
	start := time.Now()
	t.startPhase(start)
	var sent, failed atomic.Int64
	// The first error; a pointer, as atomic.Value refuses errors of
	// different concrete types.
	var firstErr atomic.Pointer[error]
	// A bound on calls in flight, far above what either system holds at
	// half its peak: past it the schedule slips, and the latencies show it.
	slots := make(chan struct{}, 4096)
	var wg sync.WaitGroup
	for i := 0; ; i++ {
		at := start.Add(time.Duration(i) * interval)
		if at.Sub(start) >= cfg.open {
			break
		}
		if wait := time.Until(at); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return phase{}, ctx.Err()
			}
		}
		slots <- struct{}{}
		keys := make([]string, perSend)
		for k := range keys {
			keys[k] = messageKey(cfg.label, "o")
			t.expect(keys[k], at)
		}
		wg.Add(1)
		go func() {
			defer func() { <-slots; wg.Done() }()
			began := time.Now()
			if err := send(ctx, keys); err != nil {
				for _, key := range keys {
					t.forget(key)
				}
				failed.Add(int64(len(keys)))
				if !errors.Is(err, errShed) {
					firstErr.CompareAndSwap(nil, &err)
				}
				return
			}
			answered := time.Now()
			for _, key := range keys {
				t.answered(key, began, answered)
			}
			sent.Add(int64(len(keys)))
		}()
	}
	wg.Wait()
	if err := firstErr.Load(); err != nil {
		return phase{}, *err
	}
	lost, err := awaitDeliveries(ctx, sys, t, cfg.deliveryTimeout)
	if err != nil {
		return phase{}, err
	}
	if err := settle(ctx, sys); err != nil {
		return phase{}, err
	}
	n := int(sent.Load()) - lost
	p := summarize(t, start, n)
	p.Lost = lost
	p.Rate = rate
	if perSend > 1 {
		p.PerSend = perSend
	}
	p.Failed = int(failed.Load())
	m.charge(&p, n)
	if sink != nil {
		sink.settle(cfg.stagesInterval)
		p.Stages, p.StagedMessages, p.Slowest = sink.budget()
	}
	return p, nil
}

// lateDelivery is one slow message: its intended start and its latency.
type lateDelivery struct {
	Start time.Time `json:"start"`
	Ms    float64   `json:"ms"`
}

// keepWorst adds d to the slowest few, slowest first.
func keepWorst(worst []lateDelivery, d lateDelivery) []lateDelivery {
	const keep = 5
	if len(worst) == keep && d.Ms <= worst[keep-1].Ms {
		return worst
	}
	worst = append(worst, d)
	sort.Slice(worst, func(i, j int) bool { return worst[i].Ms > worst[j].Ms })
	return worst[:min(len(worst), keep)]
}

// worstLine says when a phase's slowest messages were meant to start.
func worstLine(p phase) string {
	if len(p.Worst) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("slowest (intended start, s into the phase, ms):")
	for _, w := range p.Worst {
		fmt.Fprintf(&b, " %s +%.2fs %.1f", w.Start.UTC().Format("15:04:05.000"), w.Start.Sub(p.Began).Seconds(), w.Ms)
	}
	return b.String()
}

// stager is a system whose spans come to a stageSink.
type stager interface {
	stages() *stageSink
}

func stagesOf(sys system) *stageSink {
	if s, ok := sys.(stager); ok {
		return s.stages()
	}
	return nil
}

// lossReporter is a system that can tell a message it will never deliver
// (Watermill's forwarder: a row behind its acknowledged offset).
type lossReporter interface {
	// lost returns those of keys (committed, not delivered) the system has
	// passed over for good.
	lost(ctx context.Context, keys []string) ([]string, error)
}

// lossGrace is how long keys a lossReporter says it passed over must stay
// undelivered (and passed over) before they are counted lost.
const lossGrace = 5 * time.Second

// awaitDeliveries waits, at most timeout, for every expected message. For
// a lossReporter, messages it passed over for good (and still so after
// lossGrace) are forgotten and counted instead of waited for.
func awaitDeliveries(ctx context.Context, sys system, t *tracker, timeout time.Duration) (int, error) {
	lr, ok := sys.(lossReporter)
	if !ok {
		return 0, t.wait(ctx, timeout)
	}
	deadline := time.Now().Add(timeout)
	var since time.Time
	for {
		err := t.wait(ctx, time.Second)
		if err == nil || ctx.Err() != nil {
			return 0, err
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("%d messages not delivered %s after the last send", len(t.pendingKeys()), timeout)
		}
		// Only once the system has finished with every row: before, a
		// key not delivered yet is in its way.
		if n, uerr := sys.unsettled(ctx); uerr != nil || n > 0 {
			since = time.Time{}
			continue
		}
		keys := t.pendingKeys()
		lost, lerr := lr.lost(ctx, keys)
		if lerr != nil {
			return 0, lerr
		}
		switch {
		case len(keys) == 0 || len(lost) < len(keys):
			since = time.Time{}
		case since.IsZero():
			since = time.Now()
		case time.Since(since) >= lossGrace:
			for _, k := range lost {
				t.forget(k)
			}
			return len(lost), nil
		}
	}
}

// settle waits (at most a minute) until the system has finished its
// bookkeeping for what was delivered, polling with an indexed count.
func settle(ctx context.Context, sys system) error {
	deadline := time.Now().Add(time.Minute)
	for {
		n, err := sys.unsettled(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			sys.afterSettled()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d messages delivered but not settled after a minute", n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// messageKey is unique and random, as DTM's own gids (shortuuid) and
// trustmsg's producers' keys are: consecutive keys would put every
// producer's inserts side by side in the unique indexes.
func messageKey(label, phase string) string {
	return fmt.Sprintf("%s%s-%016x", label, phase, rand.Uint64())
}

func summarize(t *tracker, start time.Time, n int) phase {
	t.mu.Lock()
	defer t.mu.Unlock()
	lat := t.latencies
	seconds := t.last.Sub(start).Seconds()
	p := phase{Messages: n, Seconds: seconds, Began: start}
	if seconds > 0 {
		p.PerSecond = float64(n) / seconds
	}
	if len(lat) > 0 {
		p.P50ms, p.P99ms, p.P999ms = quantiles(lat)
		if len(t.afterFirst) > 0 {
			_, p.AfterFirstSecondP99ms, _ = quantiles(t.afterFirst)
		}
		p.MaxMs = ms(lat[len(lat)-1])
	}
	p.AnswerP50ms, p.AnswerP99ms, p.AnswerP999ms = quantiles(t.afterAnswer)
	p.CallsP50ms, p.CallsP99ms, p.CallsP999ms = quantiles(t.calls)
	p.Worst = append([]lateDelivery(nil), t.worst...)
	return p
}

// quantiles sorts samples and returns their p50, p99 and p99.9 in ms
// (zeros for none).
func quantiles(samples []time.Duration) (p50, p99, p999 float64) {
	if len(samples) == 0 {
		return 0, 0, 0
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	return ms(percentile(samples, 0.50)), ms(percentile(samples, 0.99)), ms(percentile(samples, 0.999))
}

// percentile of sorted samples, nearest rank.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[max(i, 0)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// httpClient keeps a connection per producer: neither system should pay
// for the load generator's TCP handshakes.
func httpClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns
	tr.MaxIdleConnsPerHost = conns
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}
