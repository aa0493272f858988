package activity

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/wf-engine/wf/config"
)

// connServer is a loopback server that counts the TCP connections it
// accepted.
func connServer(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var conns atomic.Int64
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv, &conns
}

// TestHTTPReusesConnections: rounds of Parallelism requests at once to one
// host reuse the connections of the round before, whatever the status,
// instead of the two idle connections per host that Go's default
// transport keeps (which opened 18 new connections in every round of 20).
func TestHTTPReusesConnections(t *testing.T) {
	const (
		parallel = 20
		rounds   = 5
	)
	tests := []struct {
		name string
		spec config.HTTPSpec
	}{
		{name: "200 with a body", spec: config.HTTPSpec{}},
		{name: "503 failure", spec: config.HTTPSpec{}},
		{name: "body exactly max_response_bytes", spec: config.HTTPSpec{MaxResponseBytes: 5}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv, conns := connServer(t, func(w http.ResponseWriter, r *http.Request) {
				if i == 1 {
					w.WriteHeader(http.StatusServiceUnavailable)
				}
				io.WriteString(w, "hello")
			})
			r := newTestRunner(t, Options{Parallelism: parallel})
			spec := tt.spec
			spec.URL = srv.URL
			for range rounds {
				var wg sync.WaitGroup
				for range parallel {
					wg.Add(1)
					go func() {
						defer wg.Done()
						res := r.Run(context.Background(), httpReq(spec))
						if (res.Failure != nil) != (i == 1) {
							t.Errorf("failure %+v", res.Failure)
						}
					}()
				}
				wg.Wait()
			}
			// At most one connection per request running at once, with
			// room for the transport's dial races (a dial started just
			// before another request returns its connection).
			if got := conns.Load(); got > 2*parallel {
				t.Errorf("%d requests opened %d connections, want at most %d", parallel*rounds, got, 2*parallel)
			}
		})
	}
}

// TestHTTPTruncatedBodyDropsConnection: the rest of a body beyond
// max_response_bytes is not read (it may never end): the attempt returns
// and its connection is closed rather than drained.
func TestHTTPTruncatedBodyDropsConnection(t *testing.T) {
	srv, conns := connServer(t, func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, strings.Repeat("x", 1<<20))
		w.(http.Flusher).Flush()
		<-r.Context().Done() // never ends on its own
	})
	r := newTestRunner(t, Options{Parallelism: 4})
	for range 3 {
		res := r.Run(context.Background(), httpReq(config.HTTPSpec{URL: srv.URL, MaxResponseBytes: 10}))
		if res.Failure != nil {
			t.Fatalf("failure %+v", *res.Failure)
		}
		if out := decodeOutputs(t, res.Outputs); out["body_truncated"] != true {
			t.Fatalf("body_truncated = %v, want true", out["body_truncated"])
		}
	}
	if got := conns.Load(); got != 3 {
		t.Errorf("3 truncated responses used %d connections, want 3 (none reused mid-body)", got)
	}
}
