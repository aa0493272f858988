package statefile

import (
	"bytes"
	"testing"
)

// TestAppendNameEscapes: a name is written byte for byte with each NUL
// as 0 0xFF and ends with 0 1, and reads back as itself.
func TestAppendNameEscapes(t *testing.T) {
	byteByByte := func(b []byte, s string) []byte {
		for i := 0; i < len(s); i++ {
			if s[i] == 0 {
				b = append(b, 0, 0xFF)
				continue
			}
			b = append(b, s[i])
		}
		return append(b, 0, 1)
	}
	for _, s := range []string{"", "a", "activity-12", "\x00", "a\x00b", "\x00\x00", "ab\x00", "\x00ab", "a\x00\x01\xff\x00"} {
		got := appendName([]byte("p"), s)
		if want := byteByByte([]byte("p"), s); !bytes.Equal(got, want) {
			t.Errorf("appendName(%q) = %q, want %q", s, got, want)
		}
		name, rest, err := readName(append(got[1:], "tail"...))
		if err != nil || name != s || string(rest) != "tail" {
			t.Errorf("readName(appendName(%q)) = %q, %q, %v", s, name, rest, err)
		}
	}
}
