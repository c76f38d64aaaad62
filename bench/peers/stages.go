package main

// The stage budget (issue 61 item 2): where each message's milliseconds go
// on trustmsg's path. trustmsg exports its own spans over OTLP/HTTP
// (`serve --otlp-endpoint`) to a receiver here: "trustmsg prepare" and
// "trustmsg commit" (server spans, each with the events
// "trustmsg.write.began", when the group commit began writing the batch
// its write is in, and "trustmsg.write.done", when the request got its
// answer) and "trustmsg send" (the forwarder's produce, from its start to
// Kafka's acknowledgement). With the load generator's own clock readings
// (each call's start and answer, the record read from Kafka: the same
// machine, the same wall clock) each message's path splits into:
//
//	prepare: HTTP in, queue, write, answer   the client's start to the span's,
//	                                         the span's to its batch's, the
//	                                         batch, its answer to the client's
//	commit:  the same four
//	hand-off                                 commit answered in trustmsg → the send began
//	produce → ack                            the send span
//	send → read                              the send began → the record read here

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"sync"
	"time"

	common "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// stageNames are the stages in the order of the path.
var stageNames = []string{
	"prepare: HTTP in", "prepare: queue", "prepare: write", "prepare: answer",
	"commit: HTTP in", "commit: queue", "commit: write", "commit: answer",
	"hand-off", "produce → ack", "send → read", "prepare → read",
}

// spanTimes is one server span: its start and end, and its write's stages.
type spanTimes struct {
	start, end, writeBegan, written time.Time
}

// clientTimes are the load generator's readings of one message.
type clientTimes struct {
	prepare, prepared, commit, committed, read time.Time
}

// stageSink receives trustmsg's spans and the load generator's readings,
// by message key.
type stageSink struct {
	srv      *http.Server
	mu       sync.Mutex
	prepares map[string]spanTimes
	commits  map[string]spanTimes
	keyOf    map[int64]string
	sends    map[int64]spanTimes
	client   map[string]*clientTimes
	spans    int
}

// newStageSink listens on addr (the URL given to `--otlp-endpoint`).
func newStageSink(addr string) (*stageSink, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("the OTLP receiver on %s: %w", addr, err)
	}
	s := &stageSink{}
	s.reset()
	s.srv = &http.Server{Handler: http.HandlerFunc(s.export)}
	go s.srv.Serve(l)
	return s, nil
}

func (s *stageSink) close() { s.srv.Close() }

// reset starts a phase.
func (s *stageSink) reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prepares = map[string]spanTimes{}
	s.commits = map[string]spanTimes{}
	s.keyOf = map[int64]string{}
	s.sends = map[int64]spanTimes{}
	s.client = map[string]*clientTimes{}
	s.spans = 0
}

// export is the OTLP/HTTP receiver. An ExportTraceServiceRequest is read
// as the TracesData it is on the wire (both are field 1, the resource
// spans), which spares the collector package and its gRPC.
func (s *stageSink) export(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var req tracepb.TracesData
	if err := proto.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	for _, rs := range req.GetResourceSpans() {
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				s.spans++
				t := spanTimes{start: nanos(sp.GetStartTimeUnixNano()), end: nanos(sp.GetEndTimeUnixNano())}
				for _, e := range sp.GetEvents() {
					switch e.GetName() {
					case "trustmsg.write.began":
						t.writeBegan = nanos(e.GetTimeUnixNano())
					case "trustmsg.write.done":
						t.written = nanos(e.GetTimeUnixNano())
					}
				}
				key, id := attributes(sp.GetAttributes())
				switch sp.GetName() {
				case "trustmsg prepare":
					s.prepares[key] = t
					if id != 0 {
						s.keyOf[id] = key
					}
				case "trustmsg commit":
					s.commits[key] = t
					s.keyOf[id] = key
				case "trustmsg send":
					// The first send of a message: a resend is not its path.
					if _, ok := s.sends[id]; !ok {
						s.sends[id] = t
					}
				}
			}
		}
	}
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.WriteHeader(http.StatusOK)
}

func attributes(kvs []*common.KeyValue) (key string, id int64) {
	for _, kv := range kvs {
		switch kv.GetKey() {
		case "trustmsg.message_key":
			key = kv.GetValue().GetStringValue()
		case "trustmsg.message_id":
			id = kv.GetValue().GetIntValue()
		}
	}
	return key, id
}

func nanos(n uint64) time.Time { return time.Unix(0, int64(n)) }

// note records one of the load generator's readings of key.
func (s *stageSink) note(key string, f func(*clientTimes)) {
	s.mu.Lock()
	c := s.client[key]
	if c == nil {
		c = &clientTimes{}
		s.client[key] = c
	}
	f(c)
	s.mu.Unlock()
}

// settle waits until no span has come for two export intervals (at most
// 30 s): the phase's last spans are exported after it.
func (s *stageSink) settle(interval time.Duration) {
	deadline := time.Now().Add(30 * time.Second)
	last := -1
	for time.Now().Before(deadline) {
		s.mu.Lock()
		n := s.spans
		s.mu.Unlock()
		if n == last {
			return
		}
		last = n
		time.Sleep(2 * interval)
	}
}

// slowMessage is one of a phase's slowest messages: when it began (to
// set beside a GC log or vmstat) and its stages, ms.
type slowMessage struct {
	Began  time.Time          `json:"began"`
	Stages map[string]float64 `json:"stages"`
}

// slowest is how many of a phase's slowest messages are kept.
const slowest = 5

// budget is the phase's stages: p50, p99 and p99.9 of each over the
// messages whose every reading and span came, how many those were, and
// the slowest of them.
func (s *stageSink) budget() (map[string][3]float64, int, []slowMessage) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sendByKey := map[string]spanTimes{}
	for id, t := range s.sends {
		if key, ok := s.keyOf[id]; ok {
			sendByKey[key] = t
		}
	}
	samples := map[string][]time.Duration{}
	var slow []slowMessage
	n := 0
	for key, c := range s.client {
		p, okP := s.prepares[key]
		cm, okC := s.commits[key]
		send, okS := sendByKey[key]
		if !okP || !okC || !okS || c.read.IsZero() || c.committed.IsZero() || p.written.IsZero() || cm.written.IsZero() {
			continue
		}
		n++
		stages := map[string]time.Duration{
			"prepare: HTTP in": p.start.Sub(c.prepare),
			"prepare: queue":   p.writeBegan.Sub(p.start),
			"prepare: write":   p.written.Sub(p.writeBegan),
			"prepare: answer":  c.prepared.Sub(p.written),
			"commit: HTTP in":  cm.start.Sub(c.commit),
			"commit: queue":    cm.writeBegan.Sub(cm.start),
			"commit: write":    cm.written.Sub(cm.writeBegan),
			"commit: answer":   c.committed.Sub(cm.written),
			"hand-off":         send.start.Sub(cm.written),
			"produce → ack":    send.end.Sub(send.start),
			"send → read":      c.read.Sub(send.start),
			"prepare → read":   c.read.Sub(c.prepare),
		}
		for name, d := range stages {
			samples[name] = append(samples[name], d)
		}
		slow = append(slow, slowMessage{Began: c.prepare, Stages: map[string]float64{}})
		for name, d := range stages {
			slow[len(slow)-1].Stages[name] = ms(d)
		}
		sort.Slice(slow, func(i, j int) bool { return slow[i].Stages["prepare → read"] > slow[j].Stages["prepare → read"] })
		slow = slow[:min(len(slow), slowest)]
	}
	out := map[string][3]float64{}
	for name, d := range samples {
		p50, p99, p999 := quantiles(d)
		out[name] = [3]float64{p50, p99, p999}
	}
	return out, n, slow
}

// printBudget prints a phase's stages in the order of the path.
func printBudget(label, system string, p phase) {
	if len(p.Stages) == 0 {
		return
	}
	fmt.Printf("%s %s stage budget at %.0f msg/s (%d messages with every span; ms p50 / p99 / p99.9):\n",
		label, system, p.Rate, p.StagedMessages)
	for _, name := range stageNames {
		if q, ok := p.Stages[name]; ok {
			fmt.Printf("  %-18s %8.2f %8.2f %8.2f\n", name, q[0], q[1], q[2])
		}
	}
	for _, m := range p.Slowest {
		fmt.Printf("  slow: began %s:", m.Began.UTC().Format("15:04:05.000"))
		for _, name := range stageNames {
			if d := m.Stages[name]; d >= 1 {
				fmt.Printf(" %s %.1f", name, d)
			}
		}
		fmt.Println()
	}
}
