package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	trustmsg "github.com/trustmsg/trustmsg/client-sdk/go"
	"github.com/trustmsg/trustmsg/client-sdk/go/internal/kittest"
)

func TestConfigSaysWhatIsMissing(t *testing.T) {
	_, err := configFromEnv(func(string) string { return "" })
	if err == nil || !strings.Contains(err.Error(), "DATABASE_URL") || !strings.Contains(err.Error(), "TRUSTMSG_URL") {
		t.Fatalf("%v", err)
	}
	env := map[string]string{
		"TRUSTMSG_URL": "http://127.0.0.1:8080", "TRUSTMSG_DEMO_TOKEN": "t", "TRUSTMSG_DEMO_SIGNING_SECRET": "whsec_c2VjcmV0",
		"DATABASE_URL": "mysql://root@127.0.0.1:3306/shop",
	}
	c, err := configFromEnv(func(k string) string { return env[k] })
	if err != nil || c.BizID != "order-service" || c.Listen != "127.0.0.1:3000" || c.Token != "t" {
		t.Fatalf("%+v, %v", c, err)
	}
	if _, _, err := openDB("sqlite://x"); err == nil {
		t.Fatal("sqlite:// accepted")
	}
}

// The service as a newcomer runs it, against the real trustmsg (the kit's),
// on MariaDB and PostgreSQL: an order is placed and its event reaches
// Kafka; an order over the credit limit is rolled back with its message;
// trustmsg's check-back is answered from the barrier.
func TestOrderService(t *testing.T) {
	e := kittest.Kit(t)
	for _, db := range []struct{ name, url string }{{"mysql", e.MySQLURL}, {"postgres", e.PostgresURL}} {
		t.Run(db.name, func(t *testing.T) {
			base, set := kittest.ServeLater(t)
			p := kittest.Register(t, e, "orders", base+trustmsg.DefaultCheckPath, 1000, "")
			conn, dialect, err := openDB(db.url)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			var s *service
			kittest.WithDDL(func() {
				s, err = newService(context.Background(), config{TrustmsgURL: e.URL, BizID: p.BizID, Token: p.Token, SigningSecret: p.Secret}, conn, dialect)
			})
			if err != nil {
				t.Fatal(err)
			}
			set(s.routes())

			id := kittest.Random()
			post := func(body string) (int, map[string]any) {
				res, err := http.Post(base+"/orders", "application/json", strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				defer res.Body.Close()
				var out map[string]any
				_ = json.NewDecoder(res.Body).Decode(&out)
				return res.StatusCode, out
			}
			status, out := post(fmt.Sprintf(`{"id":%q,"customer":"7","amount_cents":1250}`, id))
			if status != http.StatusCreated {
				t.Fatalf("placing an order: %d %v", status, out)
			}
			view := kittest.Await(t, p.Client, "order-"+id, 30*time.Second, func(v *trustmsg.MessageView) bool {
				return v.Status == trustmsg.StatusCommitted && v.SendStatus == trustmsg.SendSent
			})
			var r *kgo.Record // the order's record; other tests write to "orders" too
			kittest.ReadUntil(t, e, "orders", 30*time.Second, func(rec *kgo.Record) bool {
				got, _ := kittest.Header(rec, trustmsg.HeaderMessageID)
				if got == strconv.FormatInt(view.ID, 10) {
					r = rec
				}
				return r != nil
			})
			var event struct {
				Event string `json:"event"`
				Order order  `json:"order"`
			}
			if err := json.Unmarshal(r.Value, &event); err != nil || event.Event != "order_placed" || event.Order.ID != id || string(r.Key) != "7" {
				t.Fatalf("record %q %s: %v", r.Key, r.Value, err)
			}
			if res, err := http.Get(base + "/orders/" + id); err != nil || res.StatusCode != http.StatusOK {
				t.Fatalf("GET /orders/%s: %v %v", id, res, err)
			}
			// The client's retry of a placed order: placed before, nothing new.
			if status, out := post(fmt.Sprintf(`{"id":%q,"customer":"7","amount_cents":1250}`, id)); status != http.StatusOK || out["status"] != "already_placed" {
				t.Fatalf("the same order again: %d %v", status, out)
			}
			if status, out := post(fmt.Sprintf(`{"id":%q,"customer":"8","amount_cents":1}`, id)); status != http.StatusConflict {
				t.Fatalf("the same id with other content: %d %v", status, out)
			}

			big := kittest.Random()
			if status, out := post(fmt.Sprintf(`{"id":%q,"customer":"7","amount_cents":99999999}`, big)); status != http.StatusUnprocessableEntity {
				t.Fatalf("over the limit: %d %v", status, out)
			}
			if v, err := p.Client.Get(context.Background(), "order-"+big); err != nil || v.Status != trustmsg.StatusRolledBack {
				t.Fatalf("%+v %v", v, err)
			}
			if res, _ := http.Get(base + "/orders/" + big); res.StatusCode != http.StatusNotFound {
				t.Fatalf("the rolled-back order is there: %d", res.StatusCode)
			}
			// Its retry is refused for good (409), never "try again" (503).
			if status, out := post(fmt.Sprintf(`{"id":%q,"customer":"7","amount_cents":1250}`, big)); status != http.StatusConflict || out["status"] != "refused" {
				t.Fatalf("the rolled-back order again: %d %v", status, out)
			}

			// A prepare left without decision is committed by check-back
			// through the service's endpoint once its order is in.
			lost := kittest.Random()
			if _, err := p.Client.Prepare(context.Background(), trustmsg.Message{MessageKey: "order-" + lost, Topic: "orders", Payload: []byte("{}")}); err != nil {
				t.Fatal(err)
			}
			if err := s.barrier.RunInTx(context.Background(), p.BizID, "order-"+lost, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "INSERT INTO orders (id, customer, amount_cents) VALUES ("+s.ph(1)+", '7', 1)", lost)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			kittest.Await(t, p.Client, "order-"+lost, 30*time.Second, func(v *trustmsg.MessageView) bool { return v.Status == trustmsg.StatusCommitted })
		})
	}
}
