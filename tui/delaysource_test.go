package tui

import (
	"testing"

	"github.com/wf-engine/wf/executor/event"
)

// TestDelaySource: a delay the failure asked for is the server's only for
// an http activity; an exec activity asked for it in its error file.
func TestDelaySource(t *testing.T) {
	for _, tt := range []struct{ kind, source, want string }{
		{"http", event.SourceServer, "server"},
		{"exec", event.SourceServer, "activity"},
		{"exec", "policy", "policy"},
		{"", event.SourceServer, "server"},
	} {
		ev := &event.Event{Kind: tt.kind, DelaySource: tt.source}
		if got := delaySource(ev); got != tt.want {
			t.Errorf("kind %q source %q: %q, want %q", tt.kind, tt.source, got, tt.want)
		}
	}
	if got := (retryNote{attempt: 2, source: "activity"}).text(); got != "retry 2 in 0.0s (activity asked)" {
		t.Errorf("retry note: %q", got)
	}
}
