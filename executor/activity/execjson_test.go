package activity

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
)

// TestExecOutputsEncoding: the outputs of an exec attempt encode to the
// bytes json.Marshal gives, by hand.
func TestExecOutputsEncoding(t *testing.T) {
	pieces := []string{"", "a", " ", "\t", "\n", "\r", `"`, `\`, "<", ">", "&", "\u2028", "\u2029", "é", "\xff", "\xe2\x82", "\x7f", "\x00", "\x1b[31m", "{}"}
	results := []json.RawMessage{nil, json.RawMessage(`{"ok":true}`), json.RawMessage(" {\"ok\": true}\n"), json.RawMessage(`"a<b"`), json.RawMessage(`[1, 2.5e3, null]`), json.RawMessage(`-7`), json.RawMessage("[\"\u2028\"]")}
	rng := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		var b []byte
		for range rng.IntN(5) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		return string(b)
	}
	cases := []*execOutputs{
		{ExitCode: -1},
		{Stdout: "{\"id\": 7}\n", ExitCode: 0, Result: json.RawMessage(`{"id": 7}`)},
		{Stderr: "boom\n", ExitCode: 255},
	}
	for range 3000 {
		cases = append(cases, &execOutputs{Stdout: word(), Stderr: word(), ExitCode: rng.IntN(300) - 1, Result: results[rng.IntN(len(results))]})
	}
	checkEncodesAsMarshal(t, cases, &execOutputs{Result: json.RawMessage(`{"a":`)})
}

// checkEncodesAsMarshal checks that every case encodes by hand to the
// bytes json.Marshal gives, and that bad (a result that is not JSON) is
// refused, with json.Marshal's own error from encodeOutputs.
func checkEncodesAsMarshal[T jsonAppender](t *testing.T, cases []T, bad T) {
	t.Helper()
	for _, o := range cases {
		want, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		got, err := o.appendJSON(nil)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%+v: encoded %s (%v) by hand, json.Marshal gives %s", o, got, err, want)
		}
	}
	if _, err := bad.appendJSON(nil); err == nil {
		t.Fatalf("appendJSON of %+v: no error", bad)
	}
	_, want := json.Marshal(bad)
	if _, err := encodeOutputs(bad); err == nil || err.Error() != want.Error() {
		t.Fatalf("encodeOutputs of %+v: %v, json.Marshal: %v", bad, err, want)
	}
}

// TestExecPrinted: Result.Printed, when known, is what decoding Outputs
// gives (the executor uses it instead); it is not known when a stream is
// not valid UTF-8.
func TestExecPrinted(t *testing.T) {
	r := newTestRunner(t, Options{})
	for _, tt := range []struct {
		script string
		known  bool
	}{
		{`true`, true},
		{`echo '{"ok":true}'; echo warn >&2`, true},
		{`printf '<\342\200\250>\n'`, true},
		{`printf 'a\377b'`, false},
		{`printf 'ok'; printf '\377' >&2; exit 2`, false},
	} {
		res := r.Run(context.Background(), scriptReq(t.TempDir(), tt.script))
		var o struct{ Stdout, Stderr, Body string }
		if err := json.Unmarshal(res.Outputs, &o); err != nil {
			t.Fatal(err)
		}
		p := res.Printed
		if p.Known != tt.known {
			t.Fatalf("%s: Printed.Known %v, want %v (outputs %s)", tt.script, p.Known, tt.known, res.Outputs)
		}
		if p.Known && (p.Stdout != o.Stdout || p.Stderr != o.Stderr || p.Body != o.Body) {
			t.Fatalf("%s: Printed %+v, outputs decode to %+v", tt.script, p, o)
		}
	}
}
