package activity

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/wf-engine/wf/config"
)

// dedupEnv passes the environment as os/exec did: the last entry of each
// name, in the order of those entries.
func TestDedupEnv(t *testing.T) {
	tests := []struct {
		name string
		env  []string
		want []string
	}{
		{name: "nothing to do", env: []string{"A=1", "B=2"}, want: []string{"A=1", "B=2"}},
		{name: "last wins, at its place", env: []string{"A=1", "B=2", "A=3"}, want: []string{"B=2", "A=3"}},
		{name: "empty value is a value", env: []string{"A=1", "A="}, want: []string{"A="}},
		{name: "no '=' kept, empty dropped", env: []string{"odd", "", "A=1"}, want: []string{"odd", "A=1"}},
		{name: "leading '=' is part of the name", env: []string{"=C:=x", "=C:=y", "C:=z"}, want: []string{"=C:=y", "C:=z"}},
		{name: "empty", env: nil, want: nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := dedupEnv(slices.Clone(tt.env))
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("dedupEnv(%q) = %q, want %q", tt.env, got, tt.want)
			}
		})
	}
	if _, err := dedupEnv([]string{"A=1", "B=x\x00y"}); !errors.Is(err, errEnvNUL) {
		t.Errorf("NUL in a value: err = %v, want %v", err, errEnvNUL)
	}
}

// A NUL in the activity's environment fails the start (execve would cut
// the value there), and nothing runs.
func TestExecEnvNULFailsStart(t *testing.T) {
	dir := t.TempDir()
	r := newTestRunner(t, Options{})
	req := scriptReq(dir, "touch ran")
	req.Spec = &config.Resolved{Exec: &config.ExecSpec{Script: "touch ran", Dir: dir, Env: map[string]string{"X": "a\x00b"}}}
	res := r.Run(context.Background(), req)
	if res.Failure == nil || res.Failure.Type != TypeExecStart || !strings.Contains(res.Failure.Message, "NUL") {
		t.Fatalf("failure = %+v, want %s naming the NUL", res.Failure, TypeExecStart)
	}
	if _, err := os.Stat(filepath.Join(dir, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the process ran: %v", err)
	}
}

// dedupEnvAfter, which checks only what an attempt appends to a base
// environment checked once, passes what dedupEnv passes, for every base
// and appended part.
func TestDedupEnvAfterAgrees(t *testing.T) {
	bases := [][]string{
		nil,
		{"A=1", "B=2", "PATH=/bin"},
		{"A=1", "A=2"},     // a base with a repeated name: no shortcut
		{"odd", "A=1"},     // an entry without "=" is kept as is
		{"", "A=1"},        // an empty entry is dropped: no shortcut
		{"=C:=x", "C:=z"},  // a leading "=" is part of the name
		{"A=1", "N=x\x00"}, // a NUL in the base still fails the start
	}
	tails := [][]string{
		nil,
		{"X=1"},
		{"X=1", "Y=2", "X=3"},
		{"A=9"},
		{"PATH=/usr/bin", "WF_ATTEMPT=1"},
		{""},
		{"odd", "odd"},
		{"=C:=y"},
		{"X=a\x00b"},
		slices.Repeat([]string{"Z=1"}, maxEnvTail+1),
	}
	for _, base := range bases {
		names := baseEnvNames(base)
		for _, tail := range tails {
			env := append(slices.Clone(base), tail...)
			want, wantErr := dedupEnv(slices.Clone(env))
			got, err := dedupEnvAfter(slices.Clone(env), len(base), names)
			if !errors.Is(err, wantErr) || (err == nil) != (wantErr == nil) || !slices.Equal(got, want) {
				t.Errorf("base %q + %q: dedupEnvAfter = %q, %v; dedupEnv = %q, %v", base, tail, got, err, want, wantErr)
			}
		}
	}
	if baseEnvNames([]string{"A=1", "A=2"}) != nil || baseEnvNames([]string{"A=1", "B=x\x00"}) != nil {
		t.Error("a base that dedupEnv would change has names")
	}
}
