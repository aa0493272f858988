package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"testing"
)

// TestMatchesHashOfOlderWf: a state written before hashes left out the
// absolute directory stored sha256 of the exec block with its resolved
// directory. Planned where it was written, such an activity is unchanged,
// not re-run under a new key; anywhere else it no longer matches.
func TestMatchesHashOfOlderWf(t *testing.T) {
	r := &Resolved{Exec: &ExecSpec{
		Command:    []string{"./bin/charge", "1001"},
		Env:        map[string]string{"API": "http://127.0.0.1:8089"},
		Dir:        "/home/ana/shop/orders",
		WrittenDir: ".",
	}}
	// The stored form of the previous wf, spelled out here on purpose so
	// that a change to Resolved's encoding cannot silently change it.
	type oldExec struct {
		Command []string          `json:"command,omitempty"`
		Script  string            `json:"script,omitempty"`
		Env     map[string]string `json:"env,omitempty"`
		Dir     string            `json:"dir"`
	}
	old := func(dir string) string {
		b, err := json.Marshal(struct {
			Exec *oldExec `json:"exec,omitempty"`
		}{&oldExec{Command: r.Exec.Command, Env: r.Exec.Env, Dir: dir}})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		return hex.EncodeToString(sum[:])
	}
	if !r.Matches(r.Hash()) {
		t.Fatal("Matches(Hash()) is false")
	}
	if !r.Matches(old("/home/ana/shop/orders")) {
		t.Error("the hash an older wf stored at the same place does not match")
	}
	if r.Matches(old("/home/ana/elsewhere")) {
		t.Error("the hash an older wf stored at another place matches")
	}
	h := &Resolved{HTTP: &HTTPSpec{URL: "http://x", Method: "GET"}}
	if h.Matches("0000") || !h.Matches(h.Hash()) {
		t.Error("http: Matches is not Hash equality")
	}
}
