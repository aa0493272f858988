package tui

import (
	"fmt"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/golden"
)

// keys turns a key list into messages; "type:abc" types the letters.
func keys(ks ...string) []tea.Msg {
	var out []tea.Msg
	for _, k := range ks {
		if t, ok := strings.CutPrefix(k, "type:"); ok {
			for _, r := range t {
				out = append(out, press(string(r)))
			}
			continue
		}
		out = append(out, press(k))
	}
	return out
}

func repeat(k string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = k
	}
	return out
}

// TestGoldenViews renders every screen at 80x24 and 200x60.
func TestGoldenViews(t *testing.T) {
	down := func(n int, more ...string) []string { return append(repeat("down", n), more...) }
	views := []struct {
		name string
		keys []string
	}{
		{"dashboard", nil},
		{"help", []string{"?"}},
		{"filter_typing", []string{"/", "type:fail"}},
		{"filter_applied", []string{"/", "type:live !budget", "enter"}},
		{"filter_no_match", []string{"/", "type:nothing-like-this", "enter"}},
		{"history", down(1, "enter")},
		{"logs_succeeded", down(1, "l")},
		{"logs_failed", down(1, "l", "left")},
		{"logs_running", down(2, "l")},
		{"error", down(6, "e")},
		{"error_retrying", down(3, "e")},
		{"no_error", down(1, "e")},
		{"events_scrolled", []string{"tab", "up", "up", "up"}},
		{"stopping", []string{"q"}},
		{"rules_and_interrupts", down(9)},
	}
	for _, v := range views {
		for _, size := range [][2]int{{80, 24}, {200, 60}} {
			t.Run(fmt.Sprintf("%s_%dx%d", v.name, size[0], size[1]), func(t *testing.T) {
				m, _ := newTestModel(10*time.Second, &fakeController{})
				msgs := append([]tea.Msg{EventsMsg{Events: richRun()}}, keys(v.keys...)...)
				out := frame(t, m, size[0], size[1], msgs...)
				checkFrame(t, m, size[0], size[1], "")
				golden.RequireEqual(t, out)
			})
		}
	}
}
