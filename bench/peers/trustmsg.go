package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	_ "github.com/go-sql-driver/mysql"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// payloadBytes is each message's content, as in trustmsg bench.
const payloadBytes = 256

const bizID = "peers"

// trustmsgSystem drives trustmsg over its producer API: prepare, then
// commit; a message is delivered when its record is read from Kafka.
type trustmsgSystem struct {
	http                  *http.Client
	prepareURL, commitURL string
	token                 string
	topic                 string
	db                    *sql.DB
	kafka                 *kgo.Client
	check                 *http.Server
	stopConsumer          context.CancelFunc
	consumerDone          chan struct{}
	// With --stages-listen: trustmsg's spans and this side's readings.
	sink *stageSink
}

func (s *trustmsgSystem) stages() *stageSink { return s.sink }

func newTrustmsg(ctx context.Context, cfg runConfig, t *tracker) (*trustmsgSystem, error) {
	if cfg.kafka == "" || cfg.adminToken == "" {
		return nil, errors.New("trustmsg needs --kafka and --admin-token")
	}
	s := &trustmsgSystem{
		http:       httpClient(4096),
		prepareURL: cfg.url + "/v1/messages/prepare",
		commitURL:  cfg.url + "/v1/messages/commit",
		topic:      cfg.topic,
	}
	var err error
	if s.db, err = sql.Open("mysql", cfg.dsn); err != nil {
		return nil, err
	}
	checkURL, err := s.serveCheck()
	if err != nil {
		return nil, err
	}
	if cfg.stagesListen != "" {
		if s.sink, err = newStageSink(cfg.stagesListen); err != nil {
			s.close()
			return nil, err
		}
	}
	if s.token, err = s.register(ctx, cfg.url, cfg.adminToken, checkURL); err != nil {
		s.close()
		return nil, err
	}
	if s.kafka, err = kgo.NewClient(
		kgo.SeedBrokers(cfg.kafka),
		kgo.ConsumeTopics(cfg.topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(fetchMaxWait()),
	); err != nil {
		s.close()
		return nil, err
	}
	if err := s.createTopic(ctx); err != nil {
		s.close()
		return nil, err
	}
	consumeCtx, cancel := context.WithCancel(context.Background())
	s.stopConsumer = cancel
	s.consumerDone = make(chan struct{})
	go s.consume(consumeCtx, t)
	return s, nil
}

// serveCheck answers check-backs (commit): none is expected, every message
// is committed well within the first check-back's delay, but the producer
// registration needs an endpoint.
func (s *trustmsgSystem) serveCheck() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	s.check = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			MessageID int64 `json:"message_id"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"message_id":%d,"decision":"commit"}`, req.MessageID)
	})}
	go s.check.Serve(l)
	return "http://" + l.Addr().String() + "/check", nil
}

// register puts the producer and returns its token (shown once, on creation).
func (s *trustmsgSystem) register(ctx context.Context, base, adminToken, checkURL string) (string, error) {
	body, _ := json.Marshal(map[string]any{"verify_url": checkURL})
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/v1/producers/"+bizID, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := s.http.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	answer, _ := io.ReadAll(res.Body)
	if res.StatusCode/100 != 2 {
		return "", fmt.Errorf("register %s: %s %s", bizID, res.Status, answer)
	}
	var view struct {
		Token *string `json:"token"`
	}
	if err := json.Unmarshal(answer, &view); err != nil {
		return "", fmt.Errorf("register %s: %w", bizID, err)
	}
	if view.Token == nil {
		return "", fmt.Errorf("register %s: already registered, its token is not shown again (use a fresh database)", bizID)
	}
	return *view.Token, nil
}

func (s *trustmsgSystem) createTopic(ctx context.Context) error {
	return createTopic(ctx, s.kafka, s.topic)
}

// createTopic makes topic with 3 partitions (one replica: one broker).
func createTopic(ctx context.Context, client *kgo.Client, topic string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(client)
	res, err := adm.CreateTopics(ctx, 3, 1, nil, topic)
	if err != nil {
		return fmt.Errorf("creating topic %s: %w", topic, err)
	}
	for _, r := range res {
		if r.Err != nil && !strings.Contains(r.Err.Error(), "TOPIC_ALREADY_EXISTS") {
			return fmt.Errorf("creating topic %s: %w", topic, r.Err)
		}
	}
	return nil
}

func (s *trustmsgSystem) consume(ctx context.Context, t *tracker) {
	defer close(s.consumerDone)
	for ctx.Err() == nil {
		fetches := s.kafka.PollFetches(ctx)
		now := time.Now()
		fetches.EachRecord(func(r *kgo.Record) {
			t.delivered(string(r.Key), now)
			if s.sink != nil {
				s.sink.note(string(r.Key), func(c *clientTimes) { c.read = now })
			}
		})
	}
}

type trustmsgPrepare struct {
	BizID      string `json:"biz_id"`
	MessageKey string `json:"message_key"`
	Topic      string `json:"topic"`
	Key        string `json:"key"`
	Payload    string `json:"payload"`
}

type trustmsgCommit struct {
	BizID      string `json:"biz_id"`
	MessageKey string `json:"message_key"`
}

var trustmsgPayload = strings.Repeat("x", payloadBytes)

func (s *trustmsgSystem) send(ctx context.Context, key string) error {
	prepare, _ := json.Marshal(trustmsgPrepare{BizID: bizID, MessageKey: key, Topic: s.topic, Key: key, Payload: trustmsgPayload})
	began := time.Now()
	if err := s.post(ctx, s.prepareURL, prepare); err != nil {
		return fmt.Errorf("prepare: %w", err)
	}
	commit, _ := json.Marshal(trustmsgCommit{BizID: bizID, MessageKey: key})
	prepared := time.Now()
	if err := s.post(ctx, s.commitURL, commit); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if s.sink != nil {
		committed := time.Now()
		s.sink.note(key, func(c *clientTimes) {
			c.prepare, c.prepared, c.commit, c.committed = began, prepared, prepared, committed
		})
	}
	return nil
}

func (s *trustmsgSystem) post(ctx context.Context, url string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
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
	case res.StatusCode/100 != 2:
		return fmt.Errorf("%s %s", res.Status, answer)
	}
	return nil
}

// unsettled: committed rows not yet marked SENT (the mark follows Kafka's
// acknowledgement), the statement trustmsg bench waits on.
func (s *trustmsgSystem) unsettled(ctx context.Context) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx,
		"SELECT COUNT(*) FROM messages WHERE status = 'COMMITTED' AND send_status = 'PENDING' AND biz_id = ?",
		bizID).Scan(&n)
	return n, err
}

func (s *trustmsgSystem) afterSettled() {}

func (s *trustmsgSystem) warnings() []string { return nil }

func (s *trustmsgSystem) close() {
	if s.stopConsumer != nil {
		s.stopConsumer()
		<-s.consumerDone
	}
	if s.kafka != nil {
		s.kafka.Close()
	}
	if s.check != nil {
		s.check.Close()
	}
	if s.sink != nil {
		s.sink.close()
	}
	if s.db != nil {
		s.db.Close()
	}
}

// kafkaWarmupCommand is `peers kafka-warmup --kafka ADDR --records N`: N
// records of payloadBytes produced to a topic of the warm-up's own and
// read back, so the broker's JVM has compiled its produce and fetch paths
// before anything is measured (its CPU per message fell from 189 to 69 µs
// over three runs without it).
func kafkaWarmupCommand(args []string) error {
	fs := flag.NewFlagSet("kafka-warmup", flag.ExitOnError)
	addr := fs.String("kafka", "", "Kafka bootstrap address")
	records := fs.Int("records", 300000, "records to produce and read back")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" {
		return errors.New("kafka-warmup needs --kafka")
	}
	const topic = "peers-warmup"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	client, err := kgo.NewClient(
		kgo.SeedBrokers(*addr),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
	)
	if err != nil {
		return err
	}
	defer client.Close()
	if err := createTopic(ctx, client, topic); err != nil {
		return err
	}
	// Each producer sends its next record once the last is acknowledged,
	// as trustmsg's forwarder sends (lingering 0 ms): small produce
	// requests, the path the measured runs take.
	value := []byte(trustmsgPayload)
	var next atomic.Int64
	errs := make(chan error, 32)
	var wg sync.WaitGroup
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1); i <= int64(*records); i = next.Add(1) {
				r := &kgo.Record{Topic: topic, Key: []byte(strconv.FormatInt(i, 10)), Value: value}
				if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	for read := 0; read < *records; {
		fetches := client.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %d of %d warm-up records: %w", read, *records, err)
		}
		read += fetches.NumRecords()
	}
	return nil
}

// fetchMaxWait is how long the load generator's consumer lets the broker
// hold a fetch that found nothing new (PEERS_FETCH_MAX_WAIT, default 500 ms).
func fetchMaxWait() time.Duration {
	if d, err := time.ParseDuration(os.Getenv("PEERS_FETCH_MAX_WAIT")); err == nil {
		return d
	}
	return 500 * time.Millisecond
}
