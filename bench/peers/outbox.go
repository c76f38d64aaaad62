package main

// `peers outbox`: the local message table side by side (issue 50 item 3).
// trustmsg's relay (`trustmsg serve --outbox-source`) or Watermill's SQL
// forwarder (`peers watermill-forwarder`) relays the same rows (a 256-byte
// payload, no record key: Kafka's partitioner chooses) from a table in
// MariaDB to the same Kafka topic of 3 partitions. The relay is a child of
// this process, the command after `--`, started and stopped here so its
// CPU is its own and the clock starts with it.
//
//  1. warm-up: the relay started (trustmsg: its producer registered), a
//     closed loop of 4 producers for --warmup, every row read from Kafka;
//     the relay stopped;
//  2. rows/s: --rows rows committed by producer transactions of --batch
//     rows while the relay is stopped; then the relay started, the clock
//     with it, until the last record is read from Kafka and the relay has
//     finished its bookkeeping (trustmsg: no source row pending, no message
//     left to mark SENT; Watermill: the offset acknowledged); CPU per row
//     over that time (the relay's own since its start);
//  3. latency: one row per producer transaction at each of --rates, then
//     at half that rate (--peak-batch rows per transaction), each for --open, the relay running (an open
//     loop): from each transaction's commit, and from its intended
//     start, to the record read.

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// outboxPayload is every row's record value.
var outboxPayload = strings.Repeat("x", payloadBytes)

// trustmsgKeyHeader is the record header trustmsg puts the message_key in.
const trustmsgKeyHeader = "trustmsg-message-key"

type outboxConfig struct {
	system, version, label string
	// dsn: the source database; trustmsgDSN: trustmsg's own (its
	// messages left to mark SENT).
	dsn, trustmsgDSN string
	url, adminToken  string
	kafka, topic     string
	rows, batch      int
	// Rows per producer transaction in the half-peak phase (1 at the
	// fixed rates).
	peakBatch              int
	warmup, open           time.Duration
	rates                  []float64
	deliveryTimeout        time.Duration
	brokerPid, databasePid int
	log, out               string
	command                []string
}

// outboxResult is one system's figures in one run.
type outboxResult struct {
	System  string `json:"system"`
	Version string `json:"version"`
	Label   string `json:"label"`
	LoadAvg string `json:"loadavg"`
	Relay   string `json:"relay"`
	Batch   int    `json:"producer_batch"`
	// Throughput: Messages rows, Seconds from the relay's start to the
	// last record read, PerSecond rows/s; P50/Max from the start to half
	// and to all of the rows read; CPU per row.
	Throughput    phase   `json:"throughput"`
	FirstRecordMs float64 `json:"first_record_ms"`
	// Rows/s from the first record read to the last: without the relay's
	// start.
	SteadyPerSecond float64 `json:"steady_per_second"`
	// Latency: P50/P99 from each row's intended start, AnswerP50/P99 from
	// its transaction's commit, to the record read.
	Latency phase `json:"latency"`
	// At the end, apart from the tracker: rows committed in the table in
	// all phases, and records in the topic (end offsets summed; at least
	// the rows, unless some were never sent).
	RowsCommitted  int   `json:"rows_committed"`
	RecordsInTopic int64 `json:"records_in_topic"`
	// The same at each of --rates, the same rates for every system.
	Rates    []phase  `json:"rates,omitempty"`
	Warnings []string `json:"warnings,omitempty"`
}

func outboxCommand(args []string) error {
	fs := flag.NewFlagSet("outbox", flag.ExitOnError)
	var cfg outboxConfig
	fs.StringVar(&cfg.system, "system", "", "trustmsg or watermill")
	fs.StringVar(&cfg.version, "version", "", "the system's version, for the report")
	fs.StringVar(&cfg.label, "label", "", "the run's label, for the report")
	fs.StringVar(&cfg.dsn, "dsn", "", "the source database, go-sql-driver form (user@tcp(host:port)/db)")
	fs.StringVar(&cfg.trustmsgDSN, "trustmsg-dsn", "", "trustmsg: its own database, go-sql-driver form")
	fs.StringVar(&cfg.url, "url", "", "trustmsg: its base URL (readiness, the producer's registration)")
	fs.StringVar(&cfg.adminToken, "admin-token", "", "trustmsg: its admin token")
	fs.StringVar(&cfg.kafka, "kafka", "", "Kafka bootstrap address")
	fs.StringVar(&cfg.topic, "topic", "peers-outbox", "the topic (created with 3 partitions)")
	fs.IntVar(&cfg.rows, "rows", 20000, "rows/s: rows committed before the relay starts")
	fs.IntVar(&cfg.batch, "batch", 100, "rows/s: rows per producer transaction")
	fs.IntVar(&cfg.peakBatch, "peak-batch", 1, "latency at half the rows/s: rows per producer transaction (the fixed rates: one)")
	fs.DurationVar(&cfg.warmup, "warmup", 5*time.Second, "warm-up: a closed loop of 4 producers, the relay running")
	fs.DurationVar(&cfg.open, "open", 15*time.Second, "latency: an open loop at half the rows/s")
	cfg.rates = []float64{250, 1000}
	fs.Var((*rateList)(&cfg.rates), "rates", "latency: then an open loop at each of these rates, rows/s, comma separated")
	fs.DurationVar(&cfg.deliveryTimeout, "delivery-timeout", 120*time.Second, "longest wait for a phase's last record")
	fs.IntVar(&cfg.brokerPid, "broker-pid", 0, "the Kafka broker's process")
	fs.IntVar(&cfg.databasePid, "database-pid", 0, "the database server's process (default: the mariadbd or mysqld running here)")
	fs.StringVar(&cfg.log, "log", "", "the relay's output, appended (default: discarded)")
	fs.StringVar(&cfg.out, "out", "", "write the result here (JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg.command = fs.Args()
	if cfg.dsn == "" || cfg.kafka == "" || cfg.out == "" || len(cfg.command) == 0 {
		return errors.New("outbox needs --dsn, --kafka, --out and the relay's command after --")
	}
	if cfg.system == "trustmsg" && (cfg.url == "" || cfg.adminToken == "" || cfg.trustmsgDSN == "") {
		return errors.New("outbox --system trustmsg needs --url, --admin-token and --trustmsg-dsn")
	}
	if cfg.rows <= 0 || cfg.batch <= 0 || cfg.peakBatch <= 0 {
		return errors.New("--rows, --batch and --peak-batch must be positive")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := runOutbox(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.system, err)
	}
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	printOutbox(res)
	return os.WriteFile(cfg.out, append(b, '\n'), 0o644)
}

// outboxSource is a system's producer side; as a system (load.go) its
// send is one row in a producer transaction of its own.
type outboxSource interface {
	system
	// insert commits keys' rows in one producer transaction.
	insert(ctx context.Context, keys []string) error
	// rows counts the rows in the table (none is deleted in a run).
	rows(ctx context.Context) (int, error)
}

func openSource(dsn string) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	// A producer's pool: the open loop's transactions reuse their
	// connections, and past 64 at once wait for one (counted in the
	// latency from the intended start), as an application's would; the
	// server (shared) allows 1000 connections in all.
	db.SetMaxOpenConns(64)
	db.SetMaxIdleConns(64)
	if err := db.Ping(); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// trustmsgOutbox is the producer's side for trustmsg: rows inserted into
// trustmsg_outbox (made by `trustmsg outbox schema`), only the columns a
// producer must write.
type trustmsgOutbox struct {
	db, own *sql.DB
	topic   string
}

func newTrustmsgOutbox(dsn, ownDSN, topic string) (*trustmsgOutbox, error) {
	db, err := openSource(dsn)
	if err != nil {
		return nil, err
	}
	own, err := sql.Open("mysql", ownDSN)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &trustmsgOutbox{db: db, own: own, topic: topic}, nil
}

func (s *trustmsgOutbox) insert(ctx context.Context, keys []string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit: ErrTxDone
	args := make([]any, 0, 3*len(keys))
	for _, k := range keys {
		args = append(args, k, s.topic, outboxPayload)
	}
	q := "INSERT INTO trustmsg_outbox (message_key, topic, payload) VALUES " +
		strings.TrimSuffix(strings.Repeat("(?, ?, ?), ", len(keys)), ", ")
	if _, err := tx.ExecContext(ctx, q, args...); err != nil {
		return err
	}
	return tx.Commit()
}

func (s *trustmsgOutbox) rows(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM trustmsg_outbox").Scan(&n)
	return n, err
}

func (s *trustmsgOutbox) send(ctx context.Context, key string) error {
	return s.insert(ctx, []string{key})
}

// unsettled: source rows not marked relayed, and relayed messages not
// marked SENT in trustmsg's own database.
func (s *trustmsgOutbox) unsettled(ctx context.Context) (int, error) {
	var pending, unsent int
	if err := s.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM trustmsg_outbox WHERE status = 0").Scan(&pending); err != nil {
		return 0, err
	}
	err := s.own.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM messages WHERE status = 'COMMITTED' AND send_status = 'PENDING' AND biz_id = ?",
		bizID).Scan(&unsent)
	return pending + unsent, err
}

func (s *trustmsgOutbox) afterSettled()      {}
func (s *trustmsgOutbox) warnings() []string { return nil }
func (s *trustmsgOutbox) close() {
	s.db.Close()
	s.own.Close()
}

// relayProcess is the relay under test, a child of this process.
type relayProcess struct {
	command []string
	log     string
	cmd     *exec.Cmd
	done    chan struct{}
}

// start runs the command; the context it returns (parent's child) is
// cancelled, with the reason, when the process ends.
func (r *relayProcess) start(parent context.Context) (int, context.Context, error) {
	var out io.Writer = io.Discard
	if r.log != "" {
		f, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return 0, nil, err
		}
		defer f.Close()
		out = f
	}
	cmd := exec.Command(r.command[0], r.command[1:]...)
	cmd.Stdout, cmd.Stderr = out, out
	// Gone with this process, whatever ends it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return 0, nil, err
	}
	ctx, cancel := context.WithCancelCause(parent)
	r.cmd, r.done = cmd, make(chan struct{})
	go func(done chan struct{}) {
		err := cmd.Wait()
		close(done)
		cancel(fmt.Errorf("the relay exited (%v); its output: %s", err, r.log))
	}(r.done)
	return cmd.Process.Pid, ctx, nil
}

// stop ends the relay with SIGTERM, SIGKILL after 30 s.
func (r *relayProcess) stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(30 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	r.cmd = nil
}

func runOutbox(ctx context.Context, cfg outboxConfig) (*outboxResult, error) {
	mysqld := cfg.databasePid
	if mysqld == 0 {
		var err error
		if mysqld, err = databasePid(); err != nil {
			return nil, err
		}
	}
	var src outboxSource
	var keyHeader string
	var err error
	switch cfg.system {
	case "trustmsg":
		src, err = newTrustmsgOutbox(cfg.dsn, cfg.trustmsgDSN, cfg.topic)
		keyHeader = trustmsgKeyHeader
	case "watermill":
		src, err = newWatermillOutbox(cfg.dsn, cfg.topic)
		keyHeader = watermillUUIDHeader
	default:
		return nil, fmt.Errorf("unknown system %q", cfg.system)
	}
	if err != nil {
		return nil, err
	}
	defer src.close()

	t := newTracker()
	kafka, err := kgo.NewClient(
		kgo.SeedBrokers(cfg.kafka),
		kgo.ConsumeTopics(cfg.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(fetchMaxWait()),
	)
	if err != nil {
		return nil, err
	}
	defer kafka.Close()
	if err := createTopic(ctx, kafka, cfg.topic); err != nil {
		return nil, err
	}
	consumeCtx, stopConsumer := context.WithCancel(context.Background())
	var consumer sync.WaitGroup
	consumer.Add(1)
	go func() {
		defer consumer.Done()
		for consumeCtx.Err() == nil {
			fetches := kafka.PollFetches(consumeCtx)
			now := time.Now()
			fetches.EachRecord(func(r *kgo.Record) {
				for _, h := range r.Headers {
					if h.Key == keyHeader {
						t.delivered(string(h.Value), now)
						return
					}
				}
			})
		}
	}()
	defer func() { stopConsumer(); consumer.Wait() }()

	relay := &relayProcess{command: cfg.command, log: cfg.log}
	defer relay.stop()
	loadCfg := runConfig{label: cfg.label, concurrency: 4, open: cfg.open, deliveryTimeout: cfg.deliveryTimeout}
	// A phase runs on the relay's context: it fails at once, saying so,
	// if the relay dies.
	fail := func(rctx context.Context, what string, err error) error {
		if cause := context.Cause(rctx); cause != nil && ctx.Err() == nil {
			err = cause
		}
		return fmt.Errorf("%s: %w", what, err)
	}

	// 1. Warm-up.
	_, rctx, err := relay.start(ctx)
	if err != nil {
		return nil, err
	}
	if cfg.system == "trustmsg" {
		tm := &trustmsgSystem{http: httpClient(8)}
		if err := waitReady(rctx, tm.http, cfg.url+"/readyz"); err != nil {
			return nil, fail(rctx, "trustmsg not ready", err)
		}
		checkURL, err := tm.serveCheck()
		if err != nil {
			return nil, err
		}
		defer tm.check.Close()
		if _, err := tm.register(rctx, cfg.url, cfg.adminToken, checkURL); err != nil {
			return nil, err
		}
	}
	meter := func() *cpuMeter { return newCPUMeter(mysqld, nil, cfg.brokerPid) }
	if _, err := closedLoop(rctx, src, t, meter(), loadCfg, "w", cfg.warmup); err != nil {
		return nil, fail(rctx, "warm-up", err)
	}
	if err := settle(rctx, src); err != nil {
		return nil, fail(rctx, "warm-up", err)
	}
	relay.stop()

	res := &outboxResult{
		System: cfg.system, Version: cfg.version, Label: cfg.label, LoadAvg: loadAvg(),
		Relay: strings.Join(cfg.command, " "), Batch: cfg.batch,
	}
	db, err := sql.Open("mysql", cfg.dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	var ours []string
	if cfg.system == "trustmsg" {
		ours = append(ours, dsnDatabase(cfg.trustmsgDSN))
	}

	// 2. Rows/s: the rows committed while the relay is stopped.
	t.reset()
	keys := make([]string, cfg.rows)
	for i := range keys {
		keys[i] = messageKey(cfg.label, "t")
	}
	if err := insertAll(ctx, src, keys, cfg.batch); err != nil {
		return nil, fmt.Errorf("rows/s: inserting: %w", err)
	}
	others := watchOthers(db, ours...)
	m := meter()
	start := time.Now()
	for _, k := range keys {
		t.expect(k, start)
	}
	pid, rctx, err := relay.start(ctx)
	if err != nil {
		return nil, err
	}
	m.services = []int{pid}
	m.start[pid] = 0
	lost, err := awaitDeliveries(rctx, src, t, cfg.deliveryTimeout)
	if err != nil {
		return nil, fail(rctx, "rows/s", err)
	}
	if err := settle(rctx, src); err != nil {
		return nil, fail(rctx, "rows/s", err)
	}
	res.Throughput = summarize(t, start, cfg.rows-lost)
	res.Throughput.Lost = lost
	m.charge(&res.Throughput, cfg.rows-lost)
	t.mu.Lock()
	if n := len(t.latencies); n > 0 {
		first, last := t.latencies[0], t.latencies[n-1]
		res.FirstRecordMs = ms(first)
		if last > first {
			res.SteadyPerSecond = float64(n-1) / (last - first).Seconds()
		}
	}
	t.mu.Unlock()
	if w := others.done("rows/s"); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	res.Warnings = append(res.Warnings, lostWarning(src, "rows/s", lost)...)

	// 3. Latency at each fixed rate, the relay running.
	for _, rate := range cfg.rates {
		others = watchOthers(db, ours...)
		m = meter()
		m.services = []int{pid}
		m.start[pid], _ = cpuSeconds(pid)
		at, err := openLoop(rctx, src, t, m, loadCfg, rate)
		if err != nil {
			return nil, fail(rctx, fmt.Sprintf("latency at %.0f rows/s", rate), err)
		}
		res.Rates = append(res.Rates, at)
		name := fmt.Sprintf("%.0f rows/s", rate)
		if w := others.done(name); w != "" {
			res.Warnings = append(res.Warnings, w)
		}
		res.Warnings = append(res.Warnings, lostWarning(src, name, at.Lost)...)
	}
	// 4. Latency at half the rate, last: on a machine whose producers
	// cannot commit that many rows, it leaves a backlog (and the
	// database's flushing) that would weigh on what follows.
	others = watchOthers(db, ours...)
	m = meter()
	m.services = []int{pid}
	m.start[pid], _ = cpuSeconds(pid)
	peakCfg := loadCfg
	peakCfg.perSend = cfg.peakBatch
	open, err := openLoop(rctx, src, t, m, peakCfg, res.Throughput.PerSecond/2)
	if err != nil {
		return nil, fail(rctx, "latency", err)
	}
	res.Latency = open
	if w := others.done("latency"); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	res.Warnings = append(res.Warnings, lostWarning(src, "latency", open.Lost)...)
	if res.RowsCommitted, err = src.rows(ctx); err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(kafka).ListEndOffsets(ctx, cfg.topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("the topic's end offsets: %w", err)
	}
	ends.Each(func(o kadm.ListedOffset) { res.RecordsInTopic += o.Offset })
	if res.RecordsInTopic < int64(res.RowsCommitted) {
		res.Warnings = append(res.Warnings, fmt.Sprintf("the topic holds %d records for %d rows committed: %d rows were never sent",
			res.RecordsInTopic, res.RowsCommitted, int64(res.RowsCommitted)-res.RecordsInTopic))
	}
	if n := t.other.Load(); n > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d records of rows already read (sent twice)", n))
	}
	return res, nil
}

// lostWarning says that a phase's committed rows never reached Kafka.
func lostWarning(src outboxSource, phase string, lost int) []string {
	if lost == 0 {
		return nil
	}
	detail := ""
	if w, ok := src.(*watermillOutbox); ok {
		detail = w.lostDetail()
	}
	return []string{fmt.Sprintf("%s: %d committed rows never reached Kafka, passed over by the relay for good%s",
		phase, lost, detail)}
}

// insertAll commits keys in transactions of batch rows, 8 at a time.
func insertAll(ctx context.Context, src outboxSource, keys []string, batch int) error {
	chunks := make(chan []string)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range chunks {
				if err := src.insert(ctx, c); err != nil {
					errs <- err
					for range chunks {
					}
					return
				}
			}
		}()
	}
	for i := 0; i < len(keys); i += batch {
		chunks <- keys[i:min(i+batch, len(keys))]
	}
	close(chunks)
	wg.Wait()
	close(errs)
	return <-errs
}

func waitReady(ctx context.Context, client *http.Client, url string) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		res, err := client.Do(req)
		if err == nil {
			res.Body.Close()
			if res.StatusCode/100 == 2 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after 60 s", url)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// dsnDatabase is the database a go-sql-driver DSN names.
func dsnDatabase(dsn string) string {
	db := dsn[strings.LastIndexByte(dsn, '/')+1:]
	if i := strings.IndexByte(db, '?'); i >= 0 {
		db = db[:i]
	}
	return db
}

func printOutbox(r *outboxResult) {
	p, l := r.Throughput, r.Latency
	fmt.Printf("%s %s %s: %.0f rows/s (%d rows in %.2f s from the relay's start, the first after %.0f ms; %.0f rows/s from the first to the last); per row: database %.0f µs, relay process %.0f µs, Kafka broker %.0f µs, load generator %.0f µs\n",
		r.Label, r.System, r.Version, p.PerSecond, p.Messages, p.Seconds, r.FirstRecordMs, r.SteadyPerSecond,
		p.DatabaseCPUus, p.ProcessCPUus, p.BrokerCPUus, p.LoadCPUus)
	fmt.Printf("%s %s in all: %d rows committed, %d records in the topic\n", r.Label, r.System, r.RowsCommitted, r.RecordsInTopic)
	for _, l := range append([]phase{l}, r.Rates...) {
		if l.Rate == 0 {
			continue
		}
		fmt.Printf("%s %s %s per transaction at %.0f rows/s: commit→Kafka p50 %.1f ms, p99 %.1f ms, p99.9 %.1f ms; intended start→Kafka p50 %.1f ms, p99 %.1f ms (%.1f ms without the phase's first second), max %.1f ms (%d rows, %d failed, %d lost); per row: database %.0f µs, relay process %.0f µs\n",
			r.Label, r.System, rowsPerTransaction(l), l.Rate, l.AnswerP50ms, l.AnswerP99ms, l.AnswerP999ms, l.P50ms, l.P99ms, l.AfterFirstSecondP99ms, l.MaxMs, l.Messages, l.Failed, l.Lost,
			l.DatabaseCPUus, l.ProcessCPUus)
		if w := worstLine(l); w != "" {
			fmt.Printf("%s %s %s\n", r.Label, r.System, w)
		}
	}
	for _, w := range r.Warnings {
		fmt.Printf("%s %s warning: %s\n", r.Label, r.System, w)
	}
}

// rowsPerTransaction says a phase's producer transactions' size.
func rowsPerTransaction(p phase) string {
	if p.PerSend > 1 {
		return fmt.Sprintf("%d rows", p.PerSend)
	}
	return "one row"
}

// outboxReportCommand is `peers outbox-report RESULT.json...`.
func outboxReportCommand(paths []string) error {
	if len(paths) == 0 {
		return errors.New("outbox-report needs result files")
	}
	by := map[string][]*outboxResult{}
	fmt.Println()
	fmt.Printf("%-6s %-9s %-8s %8s %10s %12s %10s %8s %15s %15s %5s\n",
		"run", "system", "version", "rows/s", "db µs/row", "relay µs/row", "broker µs", "½ rows/s", "commit p50/p99", "intended p50/99", "lost")
	var curve curve
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		var r outboxResult
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		by[r.System] = append(by[r.System], &r)
		t, l := r.Throughput, r.Latency
		lost := t.Lost + l.Lost
		for _, p := range r.Rates {
			curve.add(fmt.Sprintf("%.0f", p.Rate), r.System, p)
			lost += p.Lost
		}
		curve.add("½ peak", r.System, l)
		fmt.Printf("%-6s %-9s %-8s %8.0f %10.0f %12.0f %10.0f %8.0f %15s %15s %5d\n",
			r.Label, r.System, r.Version, t.PerSecond, t.DatabaseCPUus, t.ProcessCPUus, t.BrokerCPUus, l.Rate,
			fmt.Sprintf("%.1f / %.1f", l.AnswerP50ms, l.AnswerP99ms), fmt.Sprintf("%.1f / %.1f", l.P50ms, l.P99ms), lost)
	}
	curve.print("rows/s", "intended→Kafka", "the transaction")
	for _, rs := range [][]*outboxResult{by["trustmsg"], by["watermill"]} {
		for _, r := range rs {
			for _, w := range r.Warnings {
				fmt.Printf("%s %s: %s\n", r.Label, r.System, w)
			}
		}
	}
	tm, wm := by["trustmsg"], by["watermill"]
	if len(tm) == 0 || len(wm) == 0 {
		return errors.New("outbox-report needs runs of both trustmsg and watermill")
	}
	rate := func(r *outboxResult) float64 { return r.Throughput.PerSecond }
	dbCPU := func(r *outboxResult) float64 { return r.Throughput.DatabaseCPUus }
	for i := range min(len(tm), len(wm)) {
		fmt.Printf("%s: trustmsg/watermill rows/s ×%.2f, database cpu/row ×%.2f\n",
			tm[i].Label, rate(tm[i])/rate(wm[i]), dbCPU(tm[i])/dbCPU(wm[i]))
	}
	if len(tm) > 1 {
		fmt.Printf("medians of %d runs each:\n", len(tm))
	}
	fmt.Printf("peers outbox: trustmsg/watermill rows/s ×%.2f, database cpu/row ×%.2f\n",
		median(tm, rate)/median(wm, rate), median(tm, dbCPU)/median(wm, dbCPU))
	return nil
}
