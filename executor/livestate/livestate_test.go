package livestate

import (
	"context"
	"encoding/json"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile"
	"github.com/wf-engine/wf/statefile/record"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// openServed opens a store with a few records of every kind and serves
// reads from it over a socket, as wf apply does.
func openServed(t *testing.T) (*statefile.Store, *Client) {
	t.Helper()
	dir := t.TempDir()
	store, err := statefile.Open(filepath.Join(dir, "state"), statefile.Options{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	var muts []record.Mutation
	for _, key := range []string{"b", "a"} {
		muts = append(muts, record.Mutation{Instance: &record.Instance{Workflow: "order", Key: key, Created: t0, Updated: t0}})
		for _, name := range []string{"charge", "ship"} {
			muts = append(muts, record.Mutation{Activity: &record.Activity{
				Workflow: "order", Instance: key, Name: name, Generation: 1, DefHash: "h", IdempotencyKey: "k-" + name,
				Status: record.StatusWaiting, Attempts: 2, FirstStart: t0,
				Timer:     &record.Timer{Kind: record.TimerRetry, FireAt: t0.Add(time.Hour), Attempt: 3, Set: t0, Delay: time.Hour, Source: "policy"},
				LastError: &record.Error{Type: "http:503", Message: strings.Repeat("long message ", 100)},
			}})
			for n := 1; n <= 2; n++ {
				muts = append(muts, record.Mutation{Attempt: &record.Attempt{
					Workflow: "order", Instance: key, Activity: name, Generation: 1, Number: n, IdempotencyKey: "k-" + name,
					Start: t0, End: t0.Add(time.Second), Outcome: record.OutcomeFailed,
					Error:  &record.Error{Type: "http:503", Message: "busy"},
					Output: &record.Output{Stdout: "out\n", Stderr: "err\n"},
				}})
			}
		}
	}
	muts = append(muts, record.Mutation{Budget: &record.Budget{Name: "api", Stamps: []time.Time{t0}}})
	if err := store.Commit(muts); err != nil {
		t.Fatal(err)
	}
	bus := event.NewBus()
	t.Cleanup(bus.Close)
	sock := filepath.Join(dir, "events.sock")
	srv, err := event.Serve(context.Background(), sock, bus, event.ServeOptions{OnRead: Serve(store)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	c, err := Dial(context.Background(), sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return store, c
}

// TestClientReadsWhatTheStoreHolds: every read over the socket returns
// what the store itself returns, record for record.
func TestClientReadsWhatTheStoreHolds(t *testing.T) {
	store, c := openServed(t)
	same := func(name string, want, got any, wantErr, gotErr error) {
		t.Helper()
		if wantErr != nil || gotErr != nil {
			t.Fatalf("%s: store %v, client %v", name, wantErr, gotErr)
		}
		if !reflect.DeepEqual(want, got) {
			w, _ := json.Marshal(want)
			g, _ := json.Marshal(got)
			t.Errorf("%s over the socket differs:\nstore  %s\nclient %s", name, w, g)
		}
	}
	wi, we := store.Instances()
	gi, ge := c.Instances()
	same("Instances", wi, gi, we, ge)
	for _, key := range []string{"a", "b", "missing"} {
		w1, e1 := store.Instance("order", key)
		g1, e2 := c.Instance("order", key)
		same("Instance "+key, w1, g1, e1, e2)
		wa, e1 := store.Activities("order", key)
		ga, e2 := c.Activities("order", key)
		same("Activities "+key, wa, ga, e1, e2)
		for _, act := range []string{"", "charge"} {
			w, e1 := store.Attempts("order", key, act)
			g, e2 := c.Attempts("order", key, act)
			same("Attempts "+key+"/"+act, w, g, e1, e2)
		}
	}
	wb, e1 := store.Budgets()
	gb, e2 := c.Budgets()
	same("Budgets", wb, gb, e1, e2)
	wr, e1 := store.Breakers()
	gr, e2 := c.Breakers()
	same("Breakers", wr, gr, e1, e2)
}

// TestClientAfterTheApplyEnded: a read after the apply closed its socket
// says that no apply answers, so the command can open the state itself.
func TestClientAfterTheApplyEnded(t *testing.T) {
	dir := t.TempDir()
	_, err := Dial(context.Background(), filepath.Join(dir, "events.sock"))
	if !IsNoApply(err) {
		t.Fatalf("Dial without an apply: %v, want ErrNoApply", err)
	}
}
