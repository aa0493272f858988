package config

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestHashPlainHTTP: an http block encodes, by hand or not, to the bytes
// json.Marshal gives (the definition hash of every stored record rests on
// them).
func TestHashPlainHTTP(t *testing.T) {
	pieces := []string{"", "a", "GET", "http://127.0.0.1:1/x?a=1", " ", "\t", `"`, `\`, "<", ">", "&", "é", "\xff", "\x7f", "Content-Type", "application/json"}
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
	// A JSON request body is encoded by hand.
	if _, ok := appendPlainHTTP(nil, cases[1]); !ok {
		t.Fatalf("%+v is not encoded by hand", cases[1].HTTP)
	}
	byHand := 0
	for _, r := range cases {
		want, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendPlainHTTP(nil, r)
		if !ok {
			continue
		}
		byHand++
		if !bytes.Equal(got, want) {
			t.Fatalf("%+v: encoded %s by hand, json.Marshal gives %s", r.HTTP, got, want)
		}
	}
	if byHand < 200 {
		t.Fatalf("only %d of %d encoded by hand: the test does not exercise it", byHand, len(cases))
	}
}
