package record

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/wf-engine/wf/config/jsontext"
)

// marshaledRawOracle is the check isMarshaledRaw replaced: validate and
// compact as json.Marshal does, then compare.
func marshaledRawOracle(src []byte) bool {
	c, err := jsontext.AppendCompact(nil, src)
	return err == nil && bytes.Equal(c, src)
}

// checkMarshaledRaw holds isMarshaledRaw to the old check and to
// json.Marshal itself.
func checkMarshaledRaw(t *testing.T, src []byte) bool {
	t.Helper()
	got, want := isMarshaledRaw(src), marshaledRawOracle(src)
	if got != want {
		t.Fatalf("isMarshaledRaw(%q) = %v, the compact-and-compare check says %v", src, got, want)
	}
	m, err := json.Marshal(json.RawMessage(src))
	if marshaled := err == nil && bytes.Equal(m, src); marshaled != got {
		t.Fatalf("isMarshaledRaw(%q) = %v, json.Marshal gives %q, %v", src, got, m, err)
	}
	return got
}

func TestIsMarshaledRaw(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{`{"result":{"ok":true}}`, true},
		{`[1,-2.5e+10,0,-0,1E3,"x",null,false,{}]`, true},
		{`"a \"b\" \\ \/ \b\f\n\r\t \u00e9\u003C"`, true},
		{"\"\xff\xfe\"", true},
		{`{"a":[[],{}],"b":{"c":[{"d":"\u2028"}]}}`, true},
		{"\"\x7f é 中\"", true},
		{``, false},
		{` {}`, false},
		{`{} `, false},
		{`{"a": 1}`, false},
		{`[1, 2]`, false},
		{"[1,\n2]", false},
		{`"<"`, false},
		{`"a&b"`, false},
		{`">"`, false},
		{"\"\u2028\"", false},
		{"\"\u2029\"", false},
		{"\"\xe2\x80\"", true},
		{"\"\t\"", false},
		{`01`, false},
		{`1.`, false},
		{`.5`, false},
		{`1e`, false},
		{`1e+`, false},
		{`-`, false},
		{`+1`, false},
		{`tru`, false},
		{`truex`, false},
		{`nul`, false},
		{`{"a"}`, false},
		{`{"a":}`, false},
		{`{"a":1,}`, false},
		{`[1,]`, false},
		{`[1}`, false},
		{`{"a":1]`, false},
		{`{1:2}`, false},
		{`"\x"`, false},
		{`"\u12"`, false},
		{`"\u12g4"`, false},
		{`"abc`, false},
		{`[`, false},
		{`{}{}`, false},
		{`1 2`, false},
	} {
		if got := checkMarshaledRaw(t, []byte(tc.in)); got != tc.want {
			t.Errorf("isMarshaledRaw(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// TestIsMarshaledRawDepth: json.Valid allows 10,000 open containers and
// no more; so does isMarshaledRaw.
func TestIsMarshaledRawDepth(t *testing.T) {
	for _, depth := range []int{jsonMaxDepth - 1, jsonMaxDepth, jsonMaxDepth + 1} {
		for _, inner := range []string{"", "1", "[]", "{}"} {
			src := strings.Repeat("[", depth) + inner + strings.Repeat("]", depth)
			want := depth+len(inner)/2 <= jsonMaxDepth
			if got := checkMarshaledRaw(t, []byte(src)); got != want {
				t.Errorf("depth %d then %q: %v, want %v", depth, inner, got, want)
			}
			src = strings.Repeat(`{"k":`, depth-1) + "[" + inner + "]" + strings.Repeat("}", depth-1)
			if got := checkMarshaledRaw(t, []byte(src)); got != want {
				t.Errorf("objects depth %d then %q: %v, want %v", depth, inner, got, want)
			}
		}
	}
}

func FuzzIsMarshaledRaw(f *testing.F) {
	for _, s := range []string{`{"result":{"ok":true}}`, `{"a": [1, 2.5e-3, "x<y", null]}`, "\"\u2028\"", `[{"a":"\u00e9"},-0.1E+2,true,false]`, "\"\xff\xe2\x80\"", `{"a":1,}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkMarshaledRaw(t, src) })
}

func BenchmarkIsMarshaledRaw(b *testing.B) {
	src := []byte(`{"result":{"ok":true,"id":"order-1001","items":[1,2,3],"note":"shipped \u00e9"}}`)
	b.Run("one-pass", func(b *testing.B) {
		for b.Loop() {
			if !isMarshaledRaw(src) {
				b.Fatal("rejected")
			}
		}
	})
	b.Run("compact-and-compare", func(b *testing.B) {
		for b.Loop() {
			if !marshaledRawOracle(src) {
				b.Fatal("rejected")
			}
		}
	})
}

// TestDecodeRefusesOutputsMarshalWouldNotWrite: a stored activity whose
// outputs json.Marshal could not have written (not valid, not compact,
// unescaped) is damage.
func TestDecodeRefusesOutputsMarshalWouldNotWrite(t *testing.T) {
	const stored = `{"a":[1,2]}`
	good, err := Encode(&Activity{Workflow: "w", Instance: "k", Name: "n", Status: StatusPending, Outputs: json.RawMessage(stored)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeActivity(good); err != nil {
		t.Fatalf("the record as written: %v", err)
	}
	for _, bad := range []string{`{"a":[12 ]}`, `{"a":"1<2"}`, `{"a":[1,2}}`, "{\"a\":\"\u2028\"}"[:len(stored)], ` {"a":[12]}`} {
		if len(bad) != len(stored) {
			t.Fatalf("%q: not the length of %q", bad, stored)
		}
		b := bytes.Replace(good, []byte(stored), []byte(bad), 1)
		_, err := DecodeActivity(b)
		if err == nil || !strings.Contains(err.Error(), "outputs are not compact JSON") {
			t.Errorf("outputs %q: %v, want outputs are not compact JSON", bad, err)
		}
	}
}
