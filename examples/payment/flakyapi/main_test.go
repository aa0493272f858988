package main

import (
	"context"
	"encoding/json"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

type step struct {
	method, path, key, body string
	wantStatus              int
	wantRetryAfter          string
	wantError               string // "error" field of the answer, if any
	sameIDAs                int    // index of an earlier step whose "id" must be repeated; -1 for none
}

func TestAPI(t *testing.T) {
	tests := []struct {
		name            string
		throttle, fail  int
		steps           []step
		wantChargeCount int
	}{
		{
			name:     "throttle then fail then charge, one charge only",
			throttle: 1, fail: 2,
			steps: []step{
				{"POST", "/charges", "k1", `{"order":"1","amount_cents":5,"card":"4242"}`, 429, "1", "RateLimited", -1},
				{"POST", "/charges", "k1", `{"order":"1","amount_cents":5,"card":"4242"}`, 503, "1", "Unavailable", -1},
				{"POST", "/charges", "k1", `{"order":"1","amount_cents":5,"card":"4242"}`, 503, "1", "Unavailable", -1},
				{"POST", "/charges", "k1", `{"order":"1","amount_cents":5,"card":"4242"}`, 201, "", "", -1},
				{"POST", "/charges", "k1", `{"order":"1","amount_cents":5,"card":"4242"}`, 201, "", "", 3},
			},
			wantChargeCount: 1,
		},
		{
			name: "failures are counted per order",
			fail: 1,
			steps: []step{
				{"POST", "/charges", "a", `{"order":"1","card":"4242"}`, 503, "1", "Unavailable", -1},
				{"POST", "/charges", "b", `{"order":"2","card":"4242"}`, 503, "1", "Unavailable", -1},
				{"POST", "/charges", "a", `{"order":"1","card":"4242"}`, 201, "", "", -1},
			},
			wantChargeCount: 1,
		},
		{
			name: "declined card is final and replayed",
			steps: []step{
				{"POST", "/charges", "d", `{"order":"9","card":"4000000000000002"}`, 402, "", "CardDeclined", -1},
				{"POST", "/charges", "d", `{"order":"9","card":"4242"}`, 402, "", "CardDeclined", -1},
			},
		},
		{
			name: "new key charges again",
			steps: []step{
				{"POST", "/charges", "x", `{"order":"1","card":"4242"}`, 201, "", "", -1},
				{"POST", "/charges", "y", `{"order":"1","card":"4242"}`, 201, "", "", -1},
			},
			wantChargeCount: 2,
		},
		{
			name: "bad body",
			steps: []step{
				{"POST", "/charges", "", `nope`, 400, "", "BadRequest", -1},
				{"POST", "/shipments", "", `{}`, 400, "", "BadRequest", -1},
			},
		},
		{
			name: "shipment needs a charge of the same order",
			steps: []step{
				{"POST", "/shipments", "s0", `{"order":"1","charge":"ch_nope"}`, 422, "", "UnknownCharge", -1},
			},
		},
		{
			name: "healthz",
			steps: []step{
				{"GET", "/healthz", "", "", 200, "", "", -1},
				{"DELETE", "/charges", "", "", 405, "", "", -1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAPI(tt.throttle, tt.fail, log.New(io.Discard, "", 0), time.Now)
			ids := make([]string, len(tt.steps))
			for i, s := range tt.steps {
				req := httptest.NewRequest(s.method, s.path, strings.NewReader(s.body))
				if s.key != "" {
					req.Header.Set("Idempotency-Key", s.key)
				}
				rec := httptest.NewRecorder()
				a.ServeHTTP(rec, req)
				if rec.Code != s.wantStatus {
					t.Fatalf("step %d: status %d, want %d (body %s)", i, rec.Code, s.wantStatus, rec.Body)
				}
				if got := rec.Header().Get("Retry-After"); got != s.wantRetryAfter {
					t.Errorf("step %d: Retry-After %q, want %q", i, got, s.wantRetryAfter)
				}
				if s.path == "/healthz" || rec.Code == http.StatusMethodNotAllowed {
					continue
				}
				var body map[string]any
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
					t.Fatalf("step %d: body %q: %v", i, rec.Body, err)
				}
				if got, _ := body["error"].(string); got != s.wantError {
					t.Errorf("step %d: error %q, want %q", i, got, s.wantError)
				}
				ids[i], _ = body["id"].(string)
				if s.sameIDAs >= 0 && ids[i] != ids[s.sameIDAs] {
					t.Errorf("step %d: id %q, want the id of step %d (%q)", i, ids[i], s.sameIDAs, ids[s.sameIDAs])
				}
			}
			if got := len(a.charges); got != tt.wantChargeCount {
				t.Errorf("%d charges made, want %d", got, tt.wantChargeCount)
			}
		})
	}
}

func TestChargeThenShip(t *testing.T) {
	a := newAPI(0, 0, log.New(io.Discard, "", 0), time.Now)
	do := func(path, key, body string) (int, map[string]any) {
		t.Helper()
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		var out map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		return rec.Code, out
	}
	_, c := do("/charges", "c", `{"order":"7","amount_cents":100,"card":"4242"}`)
	id, _ := c["id"].(string)
	if !strings.HasPrefix(id, "ch_") {
		t.Fatalf("charge id %q", id)
	}
	if code, _ := do("/shipments", "s1", `{"order":"8","charge":"`+id+`"}`); code != 422 {
		t.Errorf("shipping another order's charge: status %d, want 422", code)
	}
	code, s := do("/shipments", "s2", `{"order":"7","charge":"`+id+`"}`)
	if code != 201 || s["charge"] != id {
		t.Errorf("ship: status %d body %v", code, s)
	}
	if _, again := do("/shipments", "s2", `{"order":"7","charge":"`+id+`"}`); again["id"] != s["id"] {
		t.Errorf("replayed shipment id %v, want %v", again["id"], s["id"])
	}

	req := httptest.NewRequest("GET", "/charges?order=7", nil)
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, req)
	var list []charge
	if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil || len(list) != 1 || list[0].ID != id {
		t.Errorf("GET /charges?order=7 = %s (%v)", rec.Body, err)
	}
}

func TestRunServesProbesAndExitsWhenIdle(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := run(ctx, []string{"-addr", addr, "-healthcheck"}, io.Discard); err == nil {
		t.Fatal("healthcheck succeeded with no server")
	}
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-addr", addr, "-idle", "400ms"}, io.Discard) }()

	deadline := time.Now().Add(3 * time.Second)
	for run(ctx, []string{"-addr", addr, "-healthcheck"}, io.Discard) != nil {
		if time.Now().After(deadline) {
			t.Fatal("server never answered /healthz")
		}
		time.Sleep(20 * time.Millisecond)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("server did not exit after -idle")
	}
}

// TestOutage: from the first charge request on, every charge answers 503
// without Retry-After for the outage's length; then the API behaves as
// configured, with no order's counts used up by the outage.
func TestOutage(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := newAPI(0, 1, log.New(io.Discard, "", 0), func() time.Time { return now })
	a.outage = 10 * time.Second
	charge := func(key string) (int, string) {
		req := httptest.NewRequest("POST", "/charges", strings.NewReader(`{"order":"1","card":"4242"}`))
		req.Header.Set("Idempotency-Key", key)
		rec := httptest.NewRecorder()
		a.ServeHTTP(rec, req)
		return rec.Code, rec.Header().Get("Retry-After")
	}
	for _, off := range []time.Duration{0, time.Second, 9 * time.Second} {
		now = now.Add(off)
		if code, ra := charge("k"); code != 503 || ra != "" {
			t.Fatalf("during the outage: %d Retry-After %q", code, ra)
		}
		now = now.Add(-off)
	}
	now = now.Add(10 * time.Second)
	if code, ra := charge("k"); code != 503 || ra != "1" {
		t.Fatalf("after the outage the order's first -fail answer: %d %q", code, ra)
	}
	if code, _ := charge("k"); code != 201 {
		t.Fatalf("then the charge: %d", code)
	}
}
