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

// TestActivityTableKeys: the keys of an activity, its timer and its spawn
// are the table byte and the three escaped names, byte for byte as the
// instance prefix followed by the activity's name (how they were first
// built), whatever the names hold.
func TestActivityTableKeys(t *testing.T) {
	tests := []struct {
		name  string
		table byte
		key   func(workflow, key, activity string) []byte
	}{
		{"activity", tableActivity, activityKey},
		{"timer", tableTimer, timerKey},
		{"spawn", tableSpawn, spawnKey},
	}
	names := [][3]string{{"order", "k1", "charge"}, {"", "", ""}, {"w\x00", "a/b", `fetch["x\x00y"]`}}
	for _, tt := range tests {
		for _, n := range names {
			want := appendName(instancePrefix(tt.table, n[0], n[1]), n[2])
			if got := tt.key(n[0], n[1], n[2]); !bytes.Equal(got, want) {
				t.Errorf("%s key of %q = %q, want %q", tt.name, n, got, want)
			}
		}
	}
	if got, want := activityKey("order", "k1", "charge"), []byte("aorder\x00\x01k1\x00\x01charge\x00\x01"); !bytes.Equal(got, want) {
		t.Errorf("activityKey = %q, want %q", got, want)
	}
}
