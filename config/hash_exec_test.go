package config

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestHashExec: an exec block encodes by hand to the bytes json.Marshal
// gives the block Hash hashes (the definition hash of every stored record
// rests on them), whatever its strings hold.
func TestHashExec(t *testing.T) {
	pieces := []string{"", "a", "true", "/bin/sh", " ", "\t", "\n", `"`, `\`, "<", ">", "&", "é", "\xff", "\x7f", "\x00", "\u2028", "\u2029", "PATH", "=", "."}
	rng := rand.New(rand.NewPCG(5, 6))
	word := func() string {
		var b []byte
		for range rng.IntN(3) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		return string(b)
	}
	cases := []*Resolved{
		{Exec: &ExecSpec{Command: []string{"true"}, Dir: "/abs/cfg"}},
		{Exec: &ExecSpec{Script: "echo hi", Env: map[string]string{"B": "2", "A": "1"}, Dir: "/abs/cfg/bin", WrittenDir: "bin"}, Sensitive: []string{"x"}},
		{Exec: &ExecSpec{Command: []string{}, Env: map[string]string{}}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET"}},
	}
	for range 2000 {
		e := &ExecSpec{Script: word(), Dir: word(), WrittenDir: word()}
		if rng.IntN(2) == 0 {
			e.Command = []string{}
			for range rng.IntN(4) {
				e.Command = append(e.Command, word())
			}
		}
		if rng.IntN(2) == 0 {
			e.Env = map[string]string{}
			for range rng.IntN(5) {
				e.Env[word()] = word()
			}
		}
		cases = append(cases, &Resolved{Exec: e})
	}
	for _, r := range cases {
		got, ok := appendExec(nil, r)
		if r.Exec == nil {
			if ok {
				t.Fatalf("%+v: an http block encoded as exec: %s", r, got)
			}
			continue
		}
		// What Hash marshalled before it encoded by hand.
		h := *r
		e := *r.Exec
		e.Dir = e.WrittenDir
		if e.Dir == "" {
			e.Dir = "."
		}
		h.Exec = &e
		want, err := json.Marshal(&h)
		if err != nil {
			t.Fatal(err)
		}
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("%+v: encoded %s (%v) by hand, json.Marshal gives %s", r.Exec, got, ok, want)
		}
		if r.Hash() != digest(want) {
			t.Fatalf("%+v: Hash is not the digest of %s", r.Exec, want)
		}
	}
}
