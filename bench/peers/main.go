// Command peers is the load generator of scripts/bench-peers: it drives
// trustmsg and DTM the same way (the same closed loop, the same open loop,
// the same clock for delivery) so their figures can be set side by side.
//
//	peers run --system trustmsg|dtm [flags]   one system, one run; writes --out
//	peers report RESULT.json...               the runs side by side, last line
//	                                          "peers: trustmsg/dtm msg/s ×R, database cpu/msg ×C"
//	peers outbox --system trustmsg|watermill [flags] -- RELAY...
//	                                          the local message table's relay, one run (outbox.go)
//	peers outbox-report RESULT.json...        those runs side by side, last line
//	                                          "peers outbox: trustmsg/watermill rows/s ×R, database cpu/row ×C"
//	peers watermill-forwarder --dsn DSN --kafka ADDR
//	                                          Watermill's SQL forwarder, MySQL to Kafka (watermill.go)
//	peers kafka-warmup --kafka ADDR           the broker's JVM warmed up before anything is measured
//	peers free-ports N                        N free ports of 127.0.0.1
//
// A message is delivered when trustmsg's record is read from Kafka, or when
// DTM calls the branch, a sink in this process. The producer's local step
// between prepare and commit (or submit) is empty for both: only what the
// middleware does is measured.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "run":
		err = runCommand(os.Args[2:])
	case "report":
		err = reportCommand(os.Args[2:])
	case "outbox":
		err = outboxCommand(os.Args[2:])
	case "outbox-report":
		err = outboxReportCommand(os.Args[2:])
	case "watermill-forwarder":
		err = watermillForwarderCommand(os.Args[2:])
	case "kafka-warmup":
		err = kafkaWarmupCommand(os.Args[2:])
	case "free-ports":
		err = freePortsCommand(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "peers:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: peers run --system trustmsg|dtm [flags] | peers report RESULT.json...\n"+
		"     | peers outbox --system trustmsg|watermill [flags] -- RELAY... | peers outbox-report RESULT.json...\n"+
		"     | peers watermill-forwarder --dsn DSN --kafka ADDR | peers kafka-warmup --kafka ADDR | peers free-ports N")
	os.Exit(2)
}

func runCommand(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var cfg runConfig
	fs.StringVar(&cfg.system, "system", "", "trustmsg or dtm")
	fs.StringVar(&cfg.version, "version", "", "the system's version, for the report")
	fs.StringVar(&cfg.label, "label", "", "the run's label, for the report")
	fs.StringVar(&cfg.url, "url", "", "trustmsg's base URL, or DTM's API base (…/api/dtmsvr)")
	fs.StringVar(&cfg.dsn, "dsn", "", "the system's database, go-sql-driver form (user@tcp(host:port)/db)")
	fs.StringVar(&cfg.adminToken, "admin-token", "", "trustmsg's admin token (registers the producer)")
	fs.StringVar(&cfg.kafka, "kafka", "", "trustmsg: Kafka bootstrap address")
	fs.StringVar(&cfg.topic, "topic", "peers", "trustmsg: the topic (created with 3 partitions)")
	fs.IntVar(&cfg.concurrency, "concurrency", 32, "closed loop: producers, each waiting for its answers")
	fs.DurationVar(&cfg.warmup, "warmup", 5*time.Second, "closed loop, not measured")
	fs.DurationVar(&cfg.closed, "closed", 20*time.Second, "closed loop, measured: the peak")
	fs.DurationVar(&cfg.open, "open", 15*time.Second, "each open loop (the fixed rates, then half the peak): latency")
	fs.Var((*rateList)(&cfg.rates), "rates", "fixed open-loop rates, msg/s, comma separated (e.g. 100,250,500), before the half peak")
	fs.DurationVar(&cfg.deliveryTimeout, "delivery-timeout", 60*time.Second, "longest wait for the last delivery of a phase")
	fs.Var((*pidList)(&cfg.servicePids), "service-pid", "the system's own process (repeatable)")
	fs.IntVar(&cfg.brokerPid, "broker-pid", 0, "the Kafka broker's process (trustmsg)")
	fs.IntVar(&cfg.databasePid, "database-pid", 0, "the database server's process (default: the mariadbd or mysqld running here)")
	fs.StringVar(&cfg.stagesListen, "stages-listen", "", "trustmsg: receive its spans here (host:port of its --otlp-endpoint) for the stage budget")
	fs.DurationVar(&cfg.stagesInterval, "stages-interval", 500*time.Millisecond, "trustmsg: its --otlp-export-interval")
	fs.StringVar(&cfg.out, "out", "", "write the result here (JSON)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if cfg.url == "" || cfg.dsn == "" || cfg.out == "" || len(cfg.servicePids) == 0 {
		return errors.New("run needs --url, --dsn, --service-pid and --out")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	res, err := run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", cfg.system, err)
	}
	return writeResult(cfg.out, res)
}

func freePortsCommand(args []string) error {
	if len(args) != 1 {
		return errors.New("free-ports N")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil {
		return err
	}
	// Held together until all are chosen, so the N are distinct.
	var held []net.Listener
	defer func() {
		for _, l := range held {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		held = append(held, l)
		fmt.Println(l.Addr().(*net.TCPAddr).Port)
	}
	return nil
}

// pidList is a repeatable --service-pid.
type pidList []int

func (p *pidList) String() string { return fmt.Sprint(*p) }

func (p *pidList) Set(s string) error {
	n, err := strconv.Atoi(s)
	if err != nil {
		return err
	}
	*p = append(*p, n)
	return nil
}

// rateList is a comma-separated list of rates (msg/s or rows/s), each > 0.
type rateList []float64

func (r *rateList) String() string { return fmt.Sprint(*r) }

func (r *rateList) Set(s string) error {
	*r = nil
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.ParseFloat(f, 64)
		if err != nil || v <= 0 {
			return fmt.Errorf("rate %q: a number of messages per second above 0", f)
		}
		*r = append(*r, v)
	}
	return nil
}
