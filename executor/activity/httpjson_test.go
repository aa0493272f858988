package activity

import (
	"bytes"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"unicode/utf8"

	"github.com/wf-engine/wf/config"
)

// TestHTTPOutputsEncoding: the outputs of an http attempt encode to the
// bytes json.Marshal gives, by hand, and Printed is what decoding
// them gives.
func TestHTTPOutputsEncoding(t *testing.T) {
	pieces := []string{"", "a", "ok", " ", "\t", "\n", `"`, `\`, "<", ">", "&", "\u2028", "é", "\xff", "\x7f", "\x00", "{}", "Date", "Tue, 01 Dec 2026 21:26:12 GMT"}
	results := []json.RawMessage{nil, json.RawMessage(`{"ok":true}`), json.RawMessage(`{"ok": true}`), json.RawMessage(`"a<b"`), json.RawMessage(`["\u00e9","é"]`), json.RawMessage(`12`), json.RawMessage(`"x\"y\\z"`), json.RawMessage("[\"\u2028\"]")}
	rng := rand.New(rand.NewPCG(1, 2))
	word := func() string {
		var b []byte
		for range rng.IntN(4) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		return string(b)
	}
	cases := []*httpOutputs{
		{Status: 200, Headers: map[string]string{"Content-Type": "application/json", "Date": "Tue, 01 Dec 2026 21:26:12 GMT"}, Body: `{"ok":true}`, Result: results[1]},
		{Status: 200, Body: "x"},
		{Status: 503, Headers: map[string]string{"Content-Type": "text/plain", "Content-Length": "9"}, Body: "try again", BodyTruncated: true},
		{Status: 200, Headers: map[string]string{"X-E": "5", "X-A": "1", "X-D": "4", "X-B": "2", "X-C": "3", "Date": "now"}, Body: "sorted keys"},
	}
	for range 2000 {
		o := &httpOutputs{Status: rng.IntN(600), Headers: map[string]string{}, Body: word(), Result: results[rng.IntN(len(results))], BodyTruncated: rng.IntN(2) == 0}
		for range rng.IntN(4) {
			o.Headers[word()] = word()
		}
		cases = append(cases, o)
	}
	checkEncodesAsMarshal(t, cases, &httpOutputs{Status: 200, Result: json.RawMessage(`{"a":`)})
}

// TestHTTPPrinted: Result.Printed, when known, is what decoding Outputs
// gives (the executor uses it instead).
func TestHTTPPrinted(t *testing.T) {
	for _, body := range []string{`{"ok":true}`, "", "a\xffb", "<é>\u2028", "line\n"} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) }))
		r := NewRunner(Options{})
		res := r.Run(t.Context(), httpReq(config.HTTPSpec{URL: srv.URL}))
		srv.Close()
		_ = r.Close()
		var o struct{ Stdout, Stderr, Body string }
		if err := json.Unmarshal(res.Outputs, &o); err != nil {
			t.Fatal(err)
		}
		p := res.Printed
		if want := utf8.ValidString(body); p.Known != want {
			t.Fatalf("body %q: Printed.Known %v, want %v", body, p.Known, want)
		}
		if p.Known && (p.Stdout != o.Stdout || p.Stderr != o.Stderr || p.Body != o.Body) {
			t.Fatalf("body %q: Printed %+v, outputs decode to %+v", body, p, o)
		}
	}
}

// TestReadAll: readAll reads what io.ReadAll reads, whatever length the
// response announced (right, too short, too long, unknown).
func TestReadAll(t *testing.T) {
	for _, n := range []int{0, 1, 11, 511, 512, 513, 5000, 70 << 10} {
		body := bytes.Repeat([]byte("x"), n)
		for _, announced := range []int64{-1, 0, int64(n) - 1, int64(n), int64(n) + 1, 1 << 30} {
			for _, limit := range []int64{int64(n), int64(n) + 1, 1 << 20} {
				want, _ := io.ReadAll(io.LimitReader(bytes.NewReader(body), limit))
				got, err := readAll(io.LimitReader(iotestHalf{bytes.NewReader(body)}, limit), announced, limit)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%d bytes, announced %d, limit %d: read %d bytes (%v), want %d", n, announced, limit, len(got), err, len(want))
				}
			}
		}
	}
}

// iotestHalf reads at most half of what is asked (at least one byte), as
// a network connection may.
type iotestHalf struct{ r io.Reader }

func (h iotestHalf) Read(p []byte) (int, error) {
	if len(p) > 1 {
		p = p[:len(p)/2]
	}
	return h.r.Read(p)
}
