package config

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestHashByHand: http and exec blocks encode by hand to the bytes
// json.Marshal gives the block Hash hashes (marshalResolved: the
// definition hash of every stored record rests on them), whatever their
// strings hold; a block of the other kind is not encoded.
func TestHashByHand(t *testing.T) {
	common := []string{"", "a", " ", "\t", "\n", `"`, `\`, "<", ">", "&", "é", "\xff", "\x7f", "\x00", "\u2028", "\u2029", "="}
	tests := []struct {
		name   string
		pieces []string
		fixed  []*Resolved
		random func(word func() string, rng *rand.Rand) *Resolved
		encode func([]byte, *Resolved) ([]byte, bool)
		is     func(*Resolved) bool
	}{
		{
			name:   "http",
			pieces: []string{"GET", "http://127.0.0.1:1/x?a=1", "Content-Type", "application/json"},
			fixed: []*Resolved{
				{HTTP: &HTTPSpec{URL: "http://127.0.0.1:4567", Method: "GET"}, Sensitive: []string{"x"}},
				{HTTP: &HTTPSpec{URL: "http://h/", Method: "POST", Headers: map[string]string{"X-B": "2", "X-A": "1", "X-C": "3", "Accept": "*/*"}, Body: `{"id":"a\\b"}`, ExpectStatus: []int{200, 404}, InsecureSkipVerify: true, MaxResponseBytes: 1 << 20}},
				{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET", Headers: map[string]string{}}},
				{Exec: &ExecSpec{Command: []string{"true"}}},
			},
			random: func(word func() string, rng *rand.Rand) *Resolved {
				h := &HTTPSpec{URL: word(), Method: word(), Body: word(), InsecureSkipVerify: rng.IntN(2) == 0, MaxResponseBytes: int64(rng.IntN(3))}
				if rng.IntN(2) == 0 {
					h.Headers = map[string]string{}
					for range rng.IntN(5) {
						h.Headers[word()] = word()
					}
				}
				for range rng.IntN(3) {
					h.ExpectStatus = append(h.ExpectStatus, 100+rng.IntN(500))
				}
				return &Resolved{HTTP: h}
			},
			encode: appendHTTP,
			is:     func(r *Resolved) bool { return r.HTTP != nil },
		},
		{
			name:   "exec",
			pieces: []string{"true", "/bin/sh", "PATH", "."},
			fixed: []*Resolved{
				{Exec: &ExecSpec{Command: []string{"true"}, Dir: "/abs/cfg"}},
				{Exec: &ExecSpec{Script: "echo hi", Env: map[string]string{"B": "2", "A": "1"}, Dir: "/abs/cfg/bin", WrittenDir: "bin"}, Sensitive: []string{"x"}},
				{Exec: &ExecSpec{Command: []string{}, Env: map[string]string{}}},
				{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET"}},
			},
			random: func(word func() string, rng *rand.Rand) *Resolved {
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
				return &Resolved{Exec: e}
			},
			encode: appendExec,
			is:     func(r *Resolved) bool { return r.Exec != nil },
		},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pieces := append(append([]string(nil), common...), tt.pieces...)
			rng := rand.New(rand.NewPCG(uint64(i), 7))
			word := func() string {
				var b []byte
				for range rng.IntN(3) {
					b = append(b, pieces[rng.IntN(len(pieces))]...)
				}
				return string(b)
			}
			cases := tt.fixed
			for range 2000 {
				cases = append(cases, tt.random(word, rng))
			}
			for _, r := range cases {
				got, ok := tt.encode(nil, r)
				if !tt.is(r) {
					if ok {
						t.Fatalf("%+v: a block of another kind encoded as %s: %s", r, tt.name, got)
					}
					continue
				}
				want := marshalResolved(r)
				if !ok || !bytes.Equal(got, want) {
					t.Fatalf("%+v: encoded %s (%v) by hand, json.Marshal gives %s", r, got, ok, want)
				}
				if r.Hash() != digest(want) {
					t.Fatalf("%+v: Hash is not the digest of %s", r, want)
				}
			}
		})
	}
}
