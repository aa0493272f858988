package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// nobody is the uid and gid the prober runs as.
const nobody = 65534

// TestHelperSocketProbe is not a test: TestEventSocketUnreachableByOtherUsers
// runs the test binary as another user with WF_SOCKET_PROBE set, and this
// then dials the socket as fast as it can until the stop file appears,
// printing what it saw.
func TestHelperSocketProbe(t *testing.T) {
	path := os.Getenv("WF_SOCKET_PROBE")
	if path == "" {
		return
	}
	stop := os.Getenv("WF_SOCKET_PROBE_STOP")
	var attempts, denied, connected int
	for i := 0; ; i++ {
		if i%256 == 0 {
			if _, err := os.Stat(stop); err == nil {
				break
			}
		}
		attempts++
		c, err := net.Dial("unix", path)
		switch {
		case err == nil:
			connected++
			c.Close()
		case errors.Is(err, syscall.EACCES):
			denied++
		}
	}
	fmt.Printf("attempts=%d denied=%d connected=%d\n", attempts, denied, connected)
	os.Exit(0)
}

// worldReadable makes dir and its parents up to the temp root traversable
// by other users (t.TempDir creates them 0700).
func worldReadable(t *testing.T, dir string) {
	t.Helper()
	root := os.TempDir()
	for d := dir; strings.HasPrefix(d, root) && d != root; d = filepath.Dir(d) {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// TestEventSocketUnreachableByOtherUsers: while real applies run under
// umask 000, a process of another user dialling the event socket in a tight
// loop never connects, not even in the instant after the socket is created.
// (Before the socket was bound in a private directory, it got in during 40
// of 60 applies.) The state directory is made 0755 on purpose: the socket
// must be private on its own, whatever the directory around it allows.
func TestEventSocketUnreachableByOtherUsers(t *testing.T) {
	needRoot(t, "running a process as another user")
	dir := durSetup(t, `
variable "k" {
  type = string
}
workflow "sock" {
  key = var.k
  activity "nap" {
    sleep { duration = "30ms" }
  }
}
`)
	worldReadable(t, dir)
	apply := func(k int) {
		t.Helper()
		cmd := exec.Command("/bin/sh", "-c", `umask 000 && exec "$0" apply -auto-approve -no-color -var k="$1" "$2"`,
			durBinary(t), fmt.Sprint(k), dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("apply %d: %v\n%s", k, err, out)
		}
	}
	apply(0)
	state := filepath.Join(dir, ".wf")
	if err := os.Chmod(state, 0o755); err != nil {
		t.Fatal(err)
	}

	// The prober is this test binary, copied where the other user can run it.
	probeDir := t.TempDir()
	worldReadable(t, probeDir)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	probe := filepath.Join(probeDir, "probe")
	copyFile(t, self, probe, 0o755)
	stop := filepath.Join(probeDir, "stop")
	cmd := exec.Command(probe, "-test.run=^TestHelperSocketProbe$")
	cmd.Env = []string{"WF_SOCKET_PROBE=" + filepath.Join(state, socketName), "WF_SOCKET_PROBE_STOP=" + stop}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	})

	const applies = 40
	for k := 1; k <= applies; k++ {
		apply(k)
	}
	if err := os.WriteFile(stop, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("prober: %v\n%s", waitErr, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("prober did not stop")
	}
	var attempts, denied, connected int
	if _, err := fmt.Sscanf(strings.TrimSpace(out.String()), "attempts=%d denied=%d connected=%d", &attempts, &denied, &connected); err != nil {
		t.Fatalf("prober output %q: %v", out.String(), err)
	}
	t.Logf("prober as uid %d: %d dials during %d applies, %d refused for permission, %d connected", nobody, attempts, applies, denied, connected)
	if connected > 0 {
		t.Errorf("another user connected to the event socket %d times", connected)
	}
	if denied == 0 {
		t.Error("the prober never found the socket: it proves nothing")
	}
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
