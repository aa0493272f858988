// Package temporaltest starts a real Temporal development server (the
// Temporal CLI's `temporal server start-dev`) for tests, the way
// net/http/httptest starts an HTTP server. It is for tests only.
package temporaltest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	wftemporal "github.com/wf-engine/wf/executor/temporal"
)

// CLIVersion is the Temporal CLI that .ci/run installs: the newest that
// builds with `go install`.
const CLIVersion = "v1.5.1"

// CacheBin is where .ci/run installs the CLI when it is not on PATH.
func CacheBin() string {
	home, err := os.UserHomeDir()
	if err != nil {
		home = "/root"
	}
	return filepath.Join(home, ".cache", "wf-ci", "bin")
}

// Binary finds the Temporal CLI: $WF_TEMPORAL_CLI, then PATH, then
// CacheBin.
func Binary() (string, error) {
	if p := os.Getenv("WF_TEMPORAL_CLI"); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	p := filepath.Join(CacheBin(), "temporal")
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("the Temporal CLI is neither on PATH nor in %s: install it with `GOBIN=%s go install github.com/temporalio/cli/cmd/temporal@%s` (.ci/run does)", CacheBin(), CacheBin(), CLIVersion)
}

// Server is a running development server.
type Server struct {
	// Address is HOST:PORT of its frontend.
	Address string
	cmd     *exec.Cmd
	exited  chan struct{}
	log     string
}

// Start starts a development server on a free loopback port, with the
// timer floor lowered to 10ms so that sub-second backoffs fire on time.
// It returns once the default namespace answers.
func Start(ctx context.Context, logDir string) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, "temporal-dev-server.log")
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create server log: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "server", "start-dev", "--headless",
		"--ip", "127.0.0.1", "--port", strconv.Itoa(port),
		"--log-level", "warn",
		"--dynamic-config-value", `history.timerProcessorMaxTimeShift="10ms"`,
	)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group, stopped by PID; and killed with the test
	// binary if that dies first (a timeout), so no server outlives a run.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &Server{Address: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() {
		_ = cmd.Wait()
		close(s.exited)
	}()
	deadline := time.Now().Add(90 * time.Second)
	for {
		select {
		case <-s.exited:
			b, _ := os.ReadFile(logPath)
			return nil, fmt.Errorf("temporal dev server exited at start:\n%s", b)
		default:
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cl, err := wftemporal.Dial(cctx, wftemporal.ClientOptions{Address: s.Address})
		cancel()
		if err == nil {
			cl.Close()
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("temporal dev server at %s did not answer within 90s: %v", s.Address, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Stop stops the server by its PID (SIGTERM, then SIGKILL) and waits for
// it to exit.
func (s *Server) Stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
}

// Log is the path of the server's log.
func (s *Server) Log() string { return s.log }

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Shared is one server per test binary, started on first use; StopShared
// (from TestMain) stops it.
var shared struct {
	once sync.Once
	s    *Server
	err  error
	dir  string
}

// Need returns the package's shared server, starting it on first use. In
// CI (CI=true) a missing Temporal CLI fails the test; elsewhere it skips
// the test with a message saying how to install it.
func Need(t testing.TB) *Server {
	t.Helper()
	if _, err := Binary(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI needs the Temporal CLI: %v", err)
		}
		t.Skipf("skipping: %v", err)
	}
	shared.once.Do(func() {
		shared.dir, shared.err = os.MkdirTemp("", "wf-temporal-")
		if shared.err == nil {
			shared.s, shared.err = Start(context.Background(), shared.dir)
		}
	})
	if shared.err != nil {
		t.Fatalf("temporal dev server: %v", shared.err)
	}
	return shared.s
}

// StopShared stops the shared server, if one was started.
func StopShared() {
	if shared.s != nil {
		shared.s.Stop()
	}
	if shared.dir != "" {
		_ = os.RemoveAll(shared.dir)
	}
}
