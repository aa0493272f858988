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

// TestIsActivityKey: comparing a key in place agrees with building the
// key and comparing bytes, for names with NULs, empty names, keys of other
// tables, truncated keys and keys with trailing bytes.
func TestIsActivityKey(t *testing.T) {
	names := []string{"", "a", "ab", "activity-12", "\x00", "a\x00b", "\x00\x00", "ab\x00", "\x00ab", "a\x00\x01\xff\x00", "\x01", "\xff"}
	var keys [][]byte
	for _, w := range names {
		for _, k := range names[:6] {
			for _, a := range names {
				key := appendActivityKey(nil, w, k, a)
				keys = append(keys, key, key[:len(key)-1], append(bytes.Clone(key), 0), timerKey(w, k, a))
			}
		}
	}
	for _, key := range keys {
		for _, w := range names {
			for _, k := range names[:6] {
				for _, a := range names {
					want := bytes.Equal(key, appendActivityKey(nil, w, k, a))
					if got := isActivityKey(key, w, k, a); got != want {
						t.Fatalf("isActivityKey(%q, %q, %q, %q) = %v, want %v", key, w, k, a, got, want)
					}
				}
			}
		}
	}
	if isActivityKey(nil, "", "", "") {
		t.Fatal("an empty key is no activity's")
	}
}
