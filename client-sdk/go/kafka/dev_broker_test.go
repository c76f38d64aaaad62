package kafka_test

// `trustmsg dev`'s in-process broker (a librdkafka mock cluster) is read and
// written by this SDK's own Kafka client, franz-go: a message published
// through trustmsg's HTTP API and one submitted as signed records (the
// Submitter: idempotent producer, acks=all) are consumed with kgo.

import (
	"bufio"
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
	"github.com/trustmsg/trustmsg/client-sdk/go/kafka"
)

// devBin is the trustmsg binary: the kit's, else $TRUSTMSG_BIN.
func devBin(t *testing.T) string {
	if bin := os.Getenv("TRUSTMSG_KIT_BIN"); bin != "" {
		return bin
	}
	if bin := os.Getenv("TRUSTMSG_BIN"); bin != "" {
		return bin
	}
	if os.Getenv("TRUSTMSG_KIT_REQUIRED") != "" {
		t.Fatal("TRUSTMSG_KIT_REQUIRED is set but no trustmsg binary is named (TRUSTMSG_KIT_BIN, TRUSTMSG_BIN)")
	}
	t.Skip("no trustmsg binary: set TRUSTMSG_BIN")
	return ""
}

// startDev runs `trustmsg dev` on free ports and returns the env file it
// wrote (TRUSTMSG_URL, TRUSTMSG_BROKERS, ...). The process is ended by its
// pid when the test ends.
func startDev(t *testing.T) map[string]string {
	t.Helper()
	data := t.TempDir()
	cmd := exec.Command(devBin(t), "dev", "--data", data, "--listen", "127.0.0.1:0", "--kafka-listen", "127.0.0.1:0")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("trustmsg dev's output:\n%s", out.String())
		}
	})
	envFile := filepath.Join(data, "env")
	deadline := time.Now().Add(30 * time.Second)
	for {
		env, err := readEnv(envFile)
		if err == nil && env["TRUSTMSG_URL"] != "" && env["TRUSTMSG_BROKERS"] != "" {
			return env
		}
		if time.Now().After(deadline) {
			t.Fatalf("trustmsg dev wrote no env file in 30 s (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// readEnv reads the `export NAME='value'` lines of the env file.
func readEnv(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if ok && !strings.HasPrefix(name, "#") {
			env[name] = strings.Trim(value, "'")
		}
	}
	return env, sc.Err()
}

// consume reads topic from its start with franz-go until every key in want
// came, and returns those records by key.
func consume(t *testing.T, brokers, topic string, want ...string) map[string]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(strings.Split(brokers, ",")...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	got := map[string]*kgo.Record{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(got) < len(want) {
		fetches := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("franz-go read %d of %d records from %s in 30 s (%v)", len(got), len(want), topic, fetches.Errors())
		}
		fetches.EachRecord(func(r *kgo.Record) {
			k, _ := kittest.Header(r, trustmsg.HeaderMessageKey)
			for _, w := range want {
				if k == w {
					got[k] = r
				}
			}
		})
	}
	return got
}

func TestDevBrokerIsReadAndWrittenByFranzGo(t *testing.T) {
	t.Parallel()
	env := startDev(t)
	ctx := context.Background()
	client, err := trustmsg.NewClient(env["TRUSTMSG_URL"], env["TRUSTMSG_DEMO_BIZ_ID"], env["TRUSTMSG_DEMO_TOKEN"])
	if err != nil {
		t.Fatal(err)
	}
	// Through the HTTP API.
	viaHTTP := trustmsg.Message{MessageKey: "dev-http-" + kittest.Random(), Topic: "orders", Key: "42", Payload: []byte(`{"total":42}`)}
	if _, err := client.Prepare(ctx, viaHTTP); err != nil {
		t.Fatal(err)
	}
	if _, err := client.Commit(ctx, viaHTTP.MessageKey); err != nil {
		t.Fatal(err)
	}
	// Through the Kafka way in: franz-go producing to the mock broker.
	s, err := kafka.NewSubmitter(strings.Split(env["TRUSTMSG_BROKERS"], ","), env["TRUSTMSG_SUBMIT_TOPIC"],
		env["TRUSTMSG_DEMO_BIZ_ID"], env["TRUSTMSG_DEMO_SIGNING_SECRET"])
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	viaKafka := trustmsg.Message{MessageKey: "dev-kafka-" + kittest.Random(), Topic: "orders", Payload: []byte{0, 0xff, 'k'}}
	if _, err := s.Prepare(ctx, viaKafka); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Commit(ctx, viaKafka.MessageKey); err != nil {
		t.Fatal(err)
	}
	got := consume(t, env["TRUSTMSG_BROKERS"], "orders", viaHTTP.MessageKey, viaKafka.MessageKey)
	if r := got[viaHTTP.MessageKey]; string(r.Key) != viaHTTP.Key || !bytes.Equal(r.Value, viaHTTP.Payload) {
		t.Fatalf("the HTTP message's record: key %q value %q", r.Key, r.Value)
	}
	if r := got[viaKafka.MessageKey]; !bytes.Equal(r.Value, viaKafka.Payload) {
		t.Fatalf("the submitted message's record: value %x", r.Value)
	}
}
