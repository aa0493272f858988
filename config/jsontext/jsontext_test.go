package jsontext

import (
	"encoding/json"
	"testing"
)

// FuzzAppendQuoted: a string Plain accepts is quoted to the bytes
// json.Marshal gives it, and every string Plain refuses is one that
// json.Marshal would write otherwise than as it is, or that holds a byte
// outside printable ASCII.
func FuzzAppendQuoted(f *testing.F) {
	for _, s := range []string{"", "a", "GET", "http://127.0.0.1:1/x?a=1", ` `, `"`, `\`, `a"b\c`, "<", ">", "&", "é", "\xff", "\x7f", "\x00", "\t", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if Plain(s) {
			if got := AppendQuoted([]byte("x"), s); string(got) != "x"+string(want) {
				t.Fatalf("AppendQuoted(%q) = %s, json.Marshal %s", s, got[1:], want)
			}
			return
		}
		for i := 0; i < len(s); i++ {
			if c := s[i]; c < 0x20 || c >= 0x7f || c == '<' || c == '>' || c == '&' {
				return
			}
		}
		t.Fatalf("Plain(%q) is false, but every byte is plain", s)
	})
}

// FuzzAppendObject: a map of Plain strings is written as json.Marshal
// writes it (keys sorted), and PlainKeys refuses any map holding a string
// that is not Plain.
func FuzzAppendObject(f *testing.F) {
	f.Add("b", "2", "a", `1"`)
	f.Add("Content-Type", "application/json", "X-Id", "<a>")
	f.Add("", "", "é", "x")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		m := map[string]string{k1: v1, k2: v2}
		keys, ok := PlainKeys(m)
		plain := Plain(k1) && Plain(v1) && Plain(k2) && Plain(v2)
		if k1 == k2 {
			plain = Plain(k1) && Plain(m[k1])
		}
		if ok != plain {
			t.Fatalf("PlainKeys(%q) ok = %v, want %v", m, ok, plain)
		}
		if !ok {
			return
		}
		want, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendObject(nil, m, keys); string(got) != string(want) {
			t.Fatalf("AppendObject(%q) = %s, json.Marshal %s", m, got, want)
		}
	})
}
