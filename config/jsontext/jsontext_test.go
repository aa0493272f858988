package jsontext

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendString: every string is written as json.Marshal writes it.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "a", "GET", "http://127.0.0.1:1/x?a=1", ` `, `"`, `\`, `a"b\c`, "<", ">", "&", "é", "\xff", "\x7f", "\x00", "\t", "\n\r\b\f", "\u2028", "\u2029", "\xe2\x80", "a\xffb\u2028c<d>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString([]byte("x"), s); string(got) != "x"+string(want) {
			t.Fatalf("AppendString(%q) = %s, json.Marshal %s", s, got[1:], want)
		}
	})
}

// FuzzAppendCompact: valid JSON is written as json.Marshal writes a
// json.RawMessage of it, and what json.Marshal refuses is refused with
// its error.
func FuzzAppendCompact(f *testing.F) {
	for _, s := range []string{`{"ok":true}`, `{"ok": true}`, " [1,\n 2 ]\t", `"a<b>&c"`, "[\"\u2028\u2029\"]", `"x\"y\\z"`, `12`, ``, `{`, `{"a":}`, "\"\xff\"", `[1, "a b", {"c": [ ]}]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		want, wantErr := json.Marshal(json.RawMessage(src))
		got, err := AppendCompact([]byte("x"), src)
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("AppendCompact(%q) error %v, json.Marshal's %v", src, err, wantErr)
		}
		if err != nil {
			// The words may differ (json.Marshal names the scanner's
			// error; the caller asks json.Marshal for them): the refusal
			// must not.
			return
		}
		if !bytes.Equal(got, append([]byte("x"), want...)) {
			t.Fatalf("AppendCompact(%q) = %s, json.Marshal %s", src, got[1:], want)
		}
	})
}

// FuzzAppendObject: a map is written as json.Marshal writes it (keys
// sorted), whatever its strings hold.
func FuzzAppendObject(f *testing.F) {
	f.Add("b", "2", "a", `1"`)
	f.Add("Content-Type", "application/json", "X-Id", "<a>")
	f.Add("", "", "é", "x\xff")
	f.Add("\u2028", "\n", "a", "b")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		m := map[string]string{k1: v1, k2: v2}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendObject(nil, m, SortedKeys(m)); string(got) != string(want) {
			t.Fatalf("AppendObject(%q) = %s, json.Marshal %s", m, got, want)
		}
	})
}

// TestAppendRaw: a nil json.RawMessage is null, as json.Marshal has it;
// any other is compacted, and invalid JSON is refused.
func TestAppendRaw(t *testing.T) {
	for _, tt := range []struct {
		raw  []byte
		want string
	}{
		{nil, "null"},
		{[]byte(` {"a": [1, "<"]} `), `{"a":[1,"\u003c"]}`},
		{[]byte(`{"a":`), ""},
	} {
		got, err := AppendRaw([]byte("x="), tt.raw)
		if tt.want == "" {
			if err == nil {
				t.Errorf("AppendRaw(%q): no error", tt.raw)
			}
			continue
		}
		if err != nil || string(got) != "x="+tt.want {
			t.Errorf("AppendRaw(%q) = %q, %v; want %q", tt.raw, got, err, "x="+tt.want)
		}
	}
}
