package event

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestNewOutputTail(t *testing.T) {
	if NewOutput("", "", "") != nil {
		t.Fatal("an attempt that printed nothing has an output")
	}
	tests := []struct {
		name, in, want string
	}{
		{"short stays whole", "hello\n", "hello\n"},
		{"cut at a line", strings.Repeat("x", 100) + "\n" + strings.Repeat("y", OutputTail-50), strings.Repeat("y", OutputTail-50)},
		{"cut at a rune", strings.Repeat("é", OutputTail), strings.Repeat("é", OutputTail/2)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := NewOutput(tt.in, "", "")
			if o.Stdout != tt.want || o.StdoutBytes != len(tt.in) {
				t.Fatalf("kept %d bytes (%q...), size %d", len(o.Stdout), o.Stdout[:min(10, len(o.Stdout))], o.StdoutBytes)
			}
			if len(o.Stdout) > OutputTail || !utf8.ValidString(o.Stdout) {
				t.Fatalf("kept %d bytes, valid UTF-8 %v", len(o.Stdout), utf8.ValidString(o.Stdout))
			}
		})
	}
}
