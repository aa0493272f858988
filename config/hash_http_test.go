package config

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestHashHTTP: an http block encodes by hand to the bytes json.Marshal
// gives (the definition hash of every stored record rests on them),
// whatever its strings hold.
func TestHashHTTP(t *testing.T) {
	pieces := []string{"", "a", "GET", "http://127.0.0.1:1/x?a=1", " ", "\t", "\n", `"`, `\`, "<", ">", "&", "é", "\xff", "\x7f", "\x00", "\u2028", "\u2029", "Content-Type", "application/json"}
	rng := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		var b []byte
		for range rng.IntN(3) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		return string(b)
	}
	cases := []*Resolved{
		{HTTP: &HTTPSpec{URL: "http://127.0.0.1:4567", Method: "GET"}, Sensitive: []string{"x"}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "POST", Headers: map[string]string{"X-B": "2", "X-A": "1", "X-C": "3", "Accept": "*/*"}, Body: `{"id":"a\\b"}`, ExpectStatus: []int{200, 404}, InsecureSkipVerify: true, MaxResponseBytes: 1 << 20}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET", Headers: map[string]string{}}},
		{Exec: &ExecSpec{Command: []string{"true"}}},
	}
	for range 2000 {
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
		cases = append(cases, &Resolved{HTTP: h})
	}
	for _, r := range cases {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendHTTP(nil, r)
		if r.HTTP == nil {
			if ok {
				t.Fatalf("%+v: an exec block encoded as http: %s", r, got)
			}
			continue
		}
		if !ok || !bytes.Equal(got, want) {
			t.Fatalf("%+v: encoded %s (%v) by hand, json.Marshal gives %s", r.HTTP, got, ok, want)
		}
	}
}
