package metrics

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/common/expfmt"
)

// contentType is the text exposition format 0.0.4.
const contentType = "text/plain; version=0.0.4; charset=utf-8"

// Handler serves the wf_* metrics followed by the Go runtime and process
// metrics (and any collector added with Register) in the text format. It
// does not compress: the text of a large run is written in a few
// milliseconds, gzip would take longer than the scrape budget.
func (m *Metrics) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		// The runtime metrics first: if a collector fails, say so rather
		// than serve part of them as if they were whole.
		runtime, err := m.appendRuntime(nil)
		if err != nil {
			http.Error(w, "gather metrics: "+err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", contentType)
		if r.Method == http.MethodHead {
			return
		}
		// A client that went away is its own business.
		if m.WriteText(w) == nil {
			_, _ = w.Write(runtime)
		}
	})
}

// appendRuntime appends what the runtime registry gathers, in text.
func (m *Metrics) appendRuntime(b []byte) ([]byte, error) {
	mfs, err := m.runtime.Gather()
	if err != nil {
		return b, err
	}
	w := &appendWriter{b: b}
	enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			return w.b, err
		}
	}
	return w.b, nil
}

type appendWriter struct{ b []byte }

func (w *appendWriter) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}

// Server serves Handler at /metrics on a TCP address.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
}

// Listen binds addr (HOST:PORT; port 0 picks a free one) and serves h at
// /metrics until Close. Binding happens before Listen returns, so a taken
// port is an error here, not later.
func Listen(addr string, h http.Handler) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", h)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprintln(w, "wf: Prometheus metrics are at /metrics")
	})
	s := &Server{
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			// A client that stops reading must not hold a scrape buffer
			// forever.
			WriteTimeout: time.Minute,
		},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed on Close
	}()
	return s, nil
}

// Addr is the address the server listens on.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops the server, letting a scrape in progress finish for a moment.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = s.srv.Close()
	}
	<-s.done
	return err
}

// WriteFile writes the wf_* metrics to path atomically, for
// node_exporter's textfile collector: into a temporary file in the same
// directory (named so the collector ignores it), synced, then renamed over
// path. Readers see the old file or the new one, never a part.
//
// Every step works in the directory opened once at the start (an
// os.Root), not by path: a directory moved or renamed in the middle of a
// write gets the whole file, and a failed write removes its temporary
// file wherever the directory went, so none is ever left behind. The
// next write then looks for the directory at path again.
//
// The Go runtime and process metrics are left out on purpose:
// node_exporter has go_* and process_* metrics of its own, and the same
// names from a text file break its scrape.
func (m *Metrics) WriteFile(path string) error { return m.writeFile(path, nil) }

// writeFile is WriteFile; beforeRename, when set (tests), runs once the
// temporary file is written and synced.
func (m *Metrics) writeFile(path string, beforeRename func()) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fileErr(path, err)
	}
	defer root.Close()
	f, tmp, err := createTemp(root, base)
	if err != nil {
		return fileErr(path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			root.Remove(tmp)
		}
	}()
	if err := m.WriteText(f); err != nil {
		return fileErr(path, err)
	}
	// The collector runs as another user; the metrics are not secret.
	if err := f.Chmod(0o644); err != nil {
		return fileErr(path, err)
	}
	if err := f.Sync(); err != nil {
		return fileErr(path, err)
	}
	if err := f.Close(); err != nil {
		return fileErr(path, err)
	}
	if beforeRename != nil {
		beforeRename()
	}
	if err := root.Rename(tmp, base); err != nil {
		return fileErr(path, err)
	}
	return nil
}

// createTemp creates a new file ".BASE.RANDOM.tmp" in root, as
// os.CreateTemp does in a directory named by path.
func createTemp(root *os.Root, base string) (*os.File, string, error) {
	for range 100 {
		name := "." + base + "." + strconv.FormatUint(rand.Uint64(), 36) + ".tmp"
		f, err := root.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		return f, name, err
	}
	return nil, "", fmt.Errorf("create a temporary file for %s: too many exist", base)
}

// fileErr names path, not the temporary file, and the step that failed.
func fileErr(path string, err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = fmt.Errorf("%s: %w", pe.Op, pe.Err)
	case errors.As(err, &le):
		err = fmt.Errorf("%s: %w", le.Op, le.Err)
	}
	return fmt.Errorf("write metrics file %s: %w", path, err)
}

// FileWriter rewrites a metrics file periodically.
type FileWriter struct {
	m     *Metrics
	path  string
	warn  func(error)
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once
	mu    sync.Mutex
	last  string // the cause of the last failure (failureCause), so a lasting one is said once
	final error
}

// WriteFileEvery writes path now and then every interval until Close.
// The first write's error is returned (a path that cannot be written is
// an error before anything runs); later failures go to warn, once per
// distinct error, and never stop anything.
func (m *Metrics) WriteFileEvery(path string, interval time.Duration, warn func(error)) (*FileWriter, error) {
	if err := m.WriteFile(path); err != nil {
		return nil, err
	}
	fw := &FileWriter{m: m, path: path, warn: warn, stop: make(chan struct{}), done: make(chan struct{})}
	go fw.loop(interval)
	return fw, nil
}

func (fw *FileWriter) loop(interval time.Duration) {
	defer close(fw.done)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			fw.write()
		case <-fw.stop:
			return
		}
	}
}

func (fw *FileWriter) write() error {
	err := fw.m.WriteFile(fw.path)
	fw.mu.Lock()
	defer fw.mu.Unlock()
	cause := failureCause(err)
	if cause != fw.last && err != nil && fw.warn != nil {
		fw.warn(err)
	}
	fw.last = cause
	return err
}

// failureCause is what a lasting failure of WriteFile keeps saying
// whatever step of the write meets it: the innermost error ("no such file
// or directory"), without the step ("open", "rename"). A directory taken
// away while a write is between its create and its rename fails that
// write at the rename and the next ones at the create: one failure, said
// once. "" for nil.
func failureCause(err error) string {
	if err == nil {
		return ""
	}
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			return err.Error()
		}
		err = inner
	}
}

// Close stops the periodic writes and writes the file a last time; call it
// once the metrics have seen the run's last event (Wait). It returns the
// last write's error.
func (fw *FileWriter) Close() error {
	fw.once.Do(func() {
		close(fw.stop)
		<-fw.done
		fw.final = fw.m.WriteFile(fw.path)
	})
	return fw.final
}
