// Command flakyapi is a tiny, deliberately unreliable payment API for the wf
// payment example. It listens on 127.0.0.1 only and uses nothing but the
// standard library, so `go build ./flakyapi/main.go` works on a fresh machine.
//
// Endpoints:
//
//	GET  /healthz    200 "ok"
//	POST /charges    {"order","amount_cents","card"} -> 201 {"id",...}
//	GET  /charges    every charge made, to check that nothing was charged twice
//	POST /shipments  {"order","charge"} -> 201 {"id",...}
//
// The first -throttle charge requests of each order answer 429 and the next
// -fail answer 503, both with `Retry-After: 1`. With -outage D the API is
// down hard for D from the first charge request on: every charge request
// answers 503 at once, without Retry-After, and counts for no order (what a
// circuit breaker is for). The card 4000000000000002 is
// declined with 402 {"error":"CardDeclined"}. A repeated Idempotency-Key gets
// the stored answer back without charging (or shipping) again. The server
// exits by itself after -idle without requests, so an example run never
// leaves it behind for long.
//
// With -healthcheck it does not serve: it probes -addr once and exits 0 when
// the API answers, 1 otherwise (the example's start script has no curl).
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync"
	"syscall"
	"time"
)

// declinedCard is the test card number that is always declined.
const declinedCard = "4000000000000002"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "flakyapi:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, logOut io.Writer) error {
	fs := flag.NewFlagSet("flakyapi", flag.ContinueOnError)
	fs.SetOutput(logOut)
	addr := fs.String("addr", "127.0.0.1:8089", "listen address (keep it on 127.0.0.1)")
	fail := fs.Int("fail", 0, "answer 503 to the first N charge requests of each order (after -throttle)")
	throttle := fs.Int("throttle", 0, "answer 429 to the first N charge requests of each order")
	idle := fs.Duration("idle", 60*time.Second, "exit after this long without requests")
	outage := fs.Duration("outage", 0, "answer 503 to every charge request for this long from the first one on")
	health := fs.Bool("healthcheck", false, "probe -addr/healthz once and exit 0 if it answers")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *health {
		return probe(ctx, *addr)
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	logger := log.New(logOut, "flakyapi: ", log.LstdFlags|log.Lmicroseconds)
	api := newAPI(*throttle, *fail, logger, time.Now)
	api.outage = *outage
	srv := &http.Server{Handler: api, ReadHeaderTimeout: 5 * time.Second}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go watchIdle(ctx, cancel, api, *idle, logger)
	go func() {
		<-ctx.Done()
		shutdownCtx, done := context.WithTimeout(context.Background(), 2*time.Second)
		defer done()
		_ = srv.Shutdown(shutdownCtx)
	}()
	logger.Printf("listening on http://%s (throttle=%d fail=%d outage=%s idle=%s)", ln.Addr(), *throttle, *fail, *outage, *idle)
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	logger.Printf("stopped")
	return nil
}

// watchIdle cancels the server once no request has arrived for idle.
func watchIdle(ctx context.Context, cancel context.CancelFunc, api *api, idle time.Duration, logger *log.Logger) {
	tick := time.NewTicker(idle / 10)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if now.Sub(api.lastRequest()) >= idle {
				logger.Printf("idle for %s, exiting", idle)
				cancel()
				return
			}
		}
	}
}

func probe(ctx context.Context, addr string) error {
	ctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("healthcheck: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("healthcheck: status %d", resp.StatusCode)
	}
	return nil
}

// reply is a stored answer, replayed for a repeated Idempotency-Key.
type reply struct {
	status int
	body   any
}

// charge is one successful charge.
type charge struct {
	ID          string    `json:"id"`
	Order       string    `json:"order"`
	AmountCents int       `json:"amount_cents"`
	Status      string    `json:"status"`
	Created     time.Time `json:"created"`
}

type shipment struct {
	ID      string `json:"id"`
	Order   string `json:"order"`
	Charge  string `json:"charge"`
	Carrier string `json:"carrier"`
}

type api struct {
	throttle, fail int
	// outage is how long charges fail hard from the first charge request
	// (outageFrom) on.
	outage     time.Duration
	outageFrom time.Time
	logger     *log.Logger
	now        func() time.Time

	mu       sync.Mutex
	last     time.Time
	requests map[string]int   // charge requests seen per order
	replies  map[string]reply // by "endpoint " + Idempotency-Key
	charges  map[string]charge
	mux      *http.ServeMux
}

func newAPI(throttle, fail int, logger *log.Logger, now func() time.Time) *api {
	a := &api{
		throttle: throttle,
		fail:     fail,
		logger:   logger,
		now:      now,
		last:     now(),
		requests: map[string]int{},
		replies:  map[string]reply{},
		charges:  map[string]charge{},
		mux:      http.NewServeMux(),
	}
	a.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok\n")
	})
	a.mux.HandleFunc("POST /charges", a.createCharge)
	a.mux.HandleFunc("GET /charges", a.listCharges)
	a.mux.HandleFunc("POST /shipments", a.createShipment)
	return a
}

func (a *api) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	a.last = a.now()
	a.mu.Unlock()
	a.mux.ServeHTTP(w, r)
}

func (a *api) lastRequest() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.last
}

func (a *api) createCharge(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Order       string `json:"order"`
		AmountCents int    `json:"amount_cents"`
		Card        string `json:"card"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Order == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "BadRequest", "message": "want a JSON body with order, amount_cents and card"})
		return
	}
	key := r.Header.Get("Idempotency-Key")

	a.mu.Lock()
	defer a.mu.Unlock()
	if rep, ok := a.replies["charge "+key]; ok && key != "" {
		a.logger.Printf("POST /charges order=%s key=%s -> %d (replayed, not charged again)", in.Order, key, rep.status)
		writeJSON(w, rep.status, rep.body)
		return
	}
	if a.outage > 0 {
		now := a.now()
		if a.outageFrom.IsZero() {
			a.outageFrom = now
			a.logger.Printf("outage: charges fail for %s", a.outage)
		}
		if now.Sub(a.outageFrom) < a.outage {
			a.logger.Printf("POST /charges order=%s key=%s -> 503 (outage, %s left)", in.Order, key, (a.outage - now.Sub(a.outageFrom)).Round(time.Millisecond))
			writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "Outage"})
			return
		}
	}
	n := a.requests[in.Order]
	a.requests[in.Order] = n + 1
	switch {
	case n < a.throttle:
		a.logger.Printf("POST /charges order=%s key=%s -> 429 (throttled)", in.Order, key)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusTooManyRequests, map[string]string{"error": "RateLimited"})
		return
	case n < a.throttle+a.fail:
		a.logger.Printf("POST /charges order=%s key=%s -> 503 (flaky)", in.Order, key)
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "Unavailable"})
		return
	}

	var rep reply
	if in.Card == declinedCard {
		rep = reply{http.StatusPaymentRequired, map[string]string{"error": "CardDeclined", "message": "the card was declined"}}
	} else {
		c := charge{ID: newID("ch_"), Order: in.Order, AmountCents: in.AmountCents, Status: "succeeded", Created: a.now().UTC()}
		a.charges[c.ID] = c
		rep = reply{http.StatusCreated, c}
	}
	// Only final answers are remembered: a retry after a 503 must be able
	// to succeed, but a retry after a success must not charge again.
	if key != "" {
		a.replies["charge "+key] = rep
	}
	a.logger.Printf("POST /charges order=%s key=%s -> %d", in.Order, key, rep.status)
	writeJSON(w, rep.status, rep.body)
}

func (a *api) listCharges(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	order := r.URL.Query().Get("order")
	out := []charge{}
	for _, c := range a.charges {
		if order == "" || c.Order == order {
			out = append(out, c)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Created.Before(out[j].Created) })
	writeJSON(w, http.StatusOK, out)
}

func (a *api) createShipment(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Order  string `json:"order"`
		Charge string `json:"charge"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Order == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "BadRequest", "message": "want a JSON body with order and charge"})
		return
	}
	key := r.Header.Get("Idempotency-Key")

	a.mu.Lock()
	defer a.mu.Unlock()
	if rep, ok := a.replies["ship "+key]; ok && key != "" {
		a.logger.Printf("POST /shipments order=%s key=%s -> %d (replayed)", in.Order, key, rep.status)
		writeJSON(w, rep.status, rep.body)
		return
	}
	var rep reply
	if c, ok := a.charges[in.Charge]; !ok || c.Order != in.Order {
		rep = reply{http.StatusUnprocessableEntity, map[string]string{"error": "UnknownCharge", "message": "no charge " + in.Charge + " for order " + in.Order}}
	} else {
		rep = reply{http.StatusCreated, shipment{ID: newID("shp_"), Order: in.Order, Charge: in.Charge, Carrier: "loopback-express"}}
	}
	if key != "" {
		a.replies["ship "+key] = rep
	}
	a.logger.Printf("POST /shipments order=%s key=%s -> %d", in.Order, key, rep.status)
	writeJSON(w, rep.status, rep.body)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func newID(prefix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return prefix + hex.EncodeToString(b[:])
}
