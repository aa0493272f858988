package activity

import (
	"context"
	"strings"
	"syscall"
	"testing"
)

// An attempt's captured output: capped, and read to its end.

func TestExecOutputCap(t *testing.T) {
	const max = 1000
	tests := []struct {
		name     string
		script   string
		wantType string // "" for success
		wantMsg  []string
	}{
		{name: "failure notes truncation",
			script:   `head -c 5000 /dev/zero | tr '\0' a; head -c 3000 /dev/zero | tr '\0' b >&2; echo THE-END >&2; exit 1`,
			wantType: "exit:1",
			wantMsg:  []string{"stdout truncated to the first 1000 of 5000 bytes", "stderr truncated to the first 1000 of 3008 bytes", "THE-END"}},
		{name: "truncated json stdout is not a result",
			script: `printf '[1'; head -c 3000 /dev/zero | tr '\0' 1; printf ']'`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newTestRunner(t, Options{MaxOutput: max})
			res := r.Run(context.Background(), scriptReq(t.TempDir(), tt.script))
			out := decodeOutputs(t, res.Outputs)
			if n := len(out["stdout"].(string)); n != max {
				t.Errorf("len(stdout) = %d, want %d", n, max)
			}
			if out["result"] != nil {
				t.Errorf("result = %v, want null for a truncated stdout", out["result"])
			}
			if tt.wantType == "" {
				if res.Failure != nil {
					t.Fatalf("failure %+v", *res.Failure)
				}
				return
			}
			if res.Failure == nil || res.Failure.Type != tt.wantType {
				t.Fatalf("failure = %+v, want %s", res.Failure, tt.wantType)
			}
			if n := len(out["stderr"].(string)); n != max {
				t.Errorf("len(stderr) = %d, want %d", n, max)
			}
			for _, s := range tt.wantMsg {
				if !strings.Contains(res.Failure.Message, s) {
					t.Errorf("message %q does not contain %q", res.Failure.Message, s)
				}
			}
		})
	}
}

func TestCapBuffer(t *testing.T) {
	tests := []struct {
		name      string
		max       int64
		writes    []string
		head      string
		tail      string
		truncated bool
	}{
		{name: "fits", max: 10, writes: []string{"abc", "def"}, head: "abcdef", tail: "abcdef"},
		{name: "exactly full", max: 6, writes: []string{"abc", "def"}, head: "abcdef", tail: "abcdef"},
		{name: "overflow in one write", max: 4, writes: []string{"abcdef"}, head: "abcd", tail: "abcdef", truncated: true},
		{name: "overflow across writes", max: 4, writes: []string{"ab", "cd", "ef"}, head: "abcd", tail: "abcdef", truncated: true},
		{name: "tail keeps the end", max: 2, writes: []string{strings.Repeat("x", 600), "  the end\n"},
			head: "xx", tail: strings.Repeat("x", tailSize-len("  the end\n")) + "  the end", truncated: true},
		{name: "tail from a big write", max: 1, writes: []string{strings.Repeat("y", 700) + "z"},
			head: "y", tail: strings.Repeat("y", tailSize-1) + "z", truncated: true},
		{name: "tail drops a cut rune", max: 1, writes: []string{"a" + strings.Repeat("€", 200)},
			head: "a", tail: strings.Repeat("€", 170), truncated: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCapBuffer(tt.max)
			for _, w := range tt.writes {
				if n, err := c.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			if string(c.Bytes()) != tt.head {
				t.Errorf("head = %q, want %q", c.Bytes(), tt.head)
			}
			if c.Tail() != tt.tail {
				t.Errorf("tail = %q, want %q", c.Tail(), tt.tail)
			}
			if c.Truncated() != tt.truncated {
				t.Errorf("truncated = %v", c.Truncated())
			}
		})
	}
}

func TestSignalName(t *testing.T) {
	tests := []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGKILL, "SIGKILL"},
		{syscall.SIGTERM, "SIGTERM"},
		{syscall.SIGSEGV, "SIGSEGV"},
		{syscall.Signal(40), "SIG40"},
	}
	for _, tt := range tests {
		if got := signalName(tt.sig); got != tt.want {
			t.Errorf("signalName(%d) = %q, want %q", tt.sig, got, tt.want)
		}
	}
}
