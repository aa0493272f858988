// Package wf_test guards the import rules of docs/architecture.md: the pure
// packages must never grow a dependency on I/O-heavy layers.
package wf_test

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/wf-engine/wf"

// deps lists every package pkg imports, directly or not.
func deps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+"/"+pkg).Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, stderr)
	}
	return strings.Fields(string(out))
}

func TestLayering(t *testing.T) {
	const (
		badger = "github.com/dgraph-io/badger"
		tea    = "charm.land/"
		tui    = module + "/tui"
		state  = module + "/statefile"
		prom   = "github.com/prometheus/"
		sdk    = "go.temporal.io/"
	)
	tests := []struct {
		pkg       string
		forbidden []string // import path prefixes
		// ownAllowed limits imports from this module to these packages
		// (nil: any, except the forbidden ones).
		ownAllowed []string
	}{
		{pkg: "retry", ownAllowed: []string{module + "/retry"}},
		{pkg: "config", forbidden: []string{badger, tea, tui, state, module + "/executor", module + "/planner"}},
		// Synthetic configurations for scale tests: text, nothing of wf.
		{pkg: "config/configtest", ownAllowed: []string{module + "/config/configtest"}},
		// JSON as encoding/json writes it, by hand: nothing of wf.
		{pkg: "config/jsontext", ownAllowed: []string{module + "/config/jsontext"}},
		{pkg: "planner", forbidden: []string{badger, tea, tui, module + "/executor"}},
		{pkg: "statefile/record", forbidden: []string{badger, tea, tui}},
		{pkg: "executor/event", forbidden: []string{badger, tea, tui, state, module + "/config", prom}},
		{pkg: "executor/core", forbidden: []string{badger, tea, tui, state + "$", module + "/executor/activity", module + "/executor/proc", "net/http", "os/exec", prom, sdk}},
		// proc reads /proc and signals processes; it knows nothing of wf.
		{pkg: "executor/proc", ownAllowed: []string{module + "/executor/proc"}},
		// Metrics are a view of the event stream: no store, no shell, no core.
		{pkg: "executor/metrics", forbidden: []string{badger, tea, tui, state, module + "/executor$", module + "/executor/core", module + "/config", module + "/planner", sdk},
			ownAllowed: []string{module + "/executor/metrics", module + "/executor/event"}},
		// wf stats is arithmetic over plain records.
		{pkg: "executor/metrics/stats", ownAllowed: []string{module + "/executor/metrics/stats", module + "/statefile/record", module + "/config/jsontext"}, forbidden: []string{badger, prom, sdk}},
		{pkg: "executor", forbidden: []string{tea, tui, module + "/planner", sdk}},
		// Reads of a running apply's state: records over the event socket,
		// nothing of the store itself.
		{pkg: "executor/livestate", forbidden: []string{badger, tea, tui, prom, sdk},
			ownAllowed: []string{module + "/executor/livestate", module + "/executor/event", module + "/statefile/record", module + "/config/jsontext"}},
		{pkg: "tui", forbidden: []string{badger, state, module + "/executor/core", module + "/config", sdk}},
		// The Temporal shell: the SDK, but no local state store and no views.
		{pkg: "executor/temporal", forbidden: []string{badger, tea, tui, state + "$", module + "/planner"}},
	}
	// Only the Temporal shell and the commands may use the Temporal SDK.
	for _, pkg := range []string{"retry", "config", "config/jsontext", "planner", "statefile", "statefile/record", "executor/event", "executor/activity", "executor/proc"} {
		tests = append(tests, struct {
			pkg        string
			forbidden  []string
			ownAllowed []string
		}{pkg: pkg, forbidden: []string{sdk}})
	}
	for _, tt := range tests {
		t.Run(tt.pkg, func(t *testing.T) {
			for _, d := range deps(t, tt.pkg) {
				for _, f := range tt.forbidden {
					exact := strings.HasSuffix(f, "$")
					f = strings.TrimSuffix(f, "$")
					if (exact && d == f) || (!exact && strings.HasPrefix(d, f)) {
						t.Errorf("%s imports %s, which the layering forbids", tt.pkg, d)
					}
				}
				if tt.ownAllowed != nil && strings.HasPrefix(d, module+"/") {
					ok := false
					for _, a := range tt.ownAllowed {
						ok = ok || d == a
					}
					if !ok {
						t.Errorf("%s imports %s; it may import nothing of ours", tt.pkg, d)
					}
				}
			}
		})
	}
}
