package activity

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"
	"unicode/utf8"
)

// TestExecOutputsEncoding: the outputs of an exec attempt encode by hand
// to the bytes json.Marshal gives.
func TestExecOutputsEncoding(t *testing.T) {
	pieces := []string{"", "a", "ok\n", " ", "\t", `"`, `\`, "<", ">", "&", "\u2028", "\u2029", "é", "\xff", "\xe2\x82", "\x7f", "\x00", "\x1b[0m", "{}"}
	results := []json.RawMessage{nil, json.RawMessage(`{"ok":true}`), json.RawMessage(" {\"ok\": true}\n"), json.RawMessage(`"a<b&c>"`), json.RawMessage(`["\u00e9","é"]`), json.RawMessage(`-12.5e3`), json.RawMessage(`"x\"y\\z"`), json.RawMessage("[\"\u2028\"]"), json.RawMessage(`null`)}
	rng := rand.New(rand.NewPCG(3, 4))
	word := func() string {
		var b []byte
		for range rng.IntN(5) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		return string(b)
	}
	cases := []*execOutputs{{ExitCode: -1}, {Stdout: "{\"n\":1}\n", ExitCode: 0, Result: results[1]}}
	for range 3000 {
		cases = append(cases, &execOutputs{Stdout: word(), Stderr: word(), ExitCode: rng.IntN(300) - 1, Result: results[rng.IntN(len(results))]})
	}
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
	bad := &execOutputs{Result: json.RawMessage(`[1,`)}
	if _, err := bad.appendJSON(nil); err == nil {
		t.Fatalf("appendJSON of %q: no error", bad.Result)
	}
	_, want := json.Marshal(bad)
	if _, err := encodeOutputs(bad); err == nil || err.Error() != want.Error() {
		t.Fatalf("encodeOutputs of %q: %v, json.Marshal: %v", bad.Result, err, want)
	}
}

// TestExecPrinted: Result.Printed of an exec attempt, when known, is what
// decoding Outputs gives (the executor uses it instead); it is not known
// when a stream is not valid UTF-8, whose encoding replaces bytes.
func TestExecPrinted(t *testing.T) {
	r := newTestRunner(t, Options{})
	dir := t.TempDir()
	for _, script := range []string{
		"true",
		`echo '{"ok":true}'; echo warn >&2`,
		`printf 'a\377b'`,
		`printf 'x' ; printf '\342\202' >&2; exit 2`,
		`printf '<\303\251>\342\200\250\n'`,
	} {
		res := r.Run(context.Background(), scriptReq(dir, script))
		var o struct{ Stdout, Stderr, Body string }
		if err := json.Unmarshal(res.Outputs, &o); err != nil {
			t.Fatal(err)
		}
		p := res.Printed
		if p.Known && (p.Stdout != o.Stdout || p.Stderr != o.Stderr || p.Body != o.Body) {
			t.Fatalf("%s: Printed %+v, outputs decode to %+v", script, p, o)
		}
		valid := utf8.ValidString(o.Stdout) && utf8.ValidString(o.Stderr) && !bytes.ContainsRune([]byte(o.Stdout+o.Stderr), utf8.RuneError)
		if p.Known != valid {
			t.Fatalf("%s: Printed.Known %v, want %v (outputs %s)", script, p.Known, valid, res.Outputs)
		}
	}
}
