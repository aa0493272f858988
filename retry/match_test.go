package retry

import "testing"

func TestMatch(t *testing.T) {
	tests := []struct {
		pattern, typ string
		want         bool
	}{
		{"http:5*", "http:503", true},
		{"http:5*", "http:5", true},
		{"http:5*", "http:429", false},
		{"http:5*", "xhttp:503", false},
		{"exit:*", "exit:1", true},
		{"exit:*", "exit:", true},
		{"exit:*", "signal:SIGKILL", false},
		{"*", "anything", true},
		{"*", "", true},
		{"**", "x", true},
		{"CardDeclined", "CardDeclined", true},
		{"CardDeclined", "carddeclined", false},
		{"CardDeclined", "CardDeclinedX", false},
		{"CardDeclined", "Card", false},
		{"", "", true},
		{"", "timeout", false},
		{"*:connection", "http:connection", true},
		{"h*p:*3", "http:503", true},
		{"h*p:*3", "http:504", false},
		{"a*b*c", "aXbYbZc", true},
		{"a*b*c", "aXbYbZ", false},
		{"*a*a*a*a*b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", false},
		{"http:429", "http:4*", false}, // the type is never a pattern
	}
	for _, tt := range tests {
		if got := Match(tt.pattern, tt.typ); got != tt.want {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.pattern, tt.typ, got, tt.want)
		}
	}
}

func TestMatchAny(t *testing.T) {
	tests := []struct {
		patterns []string
		typ      string
		want     bool
	}{
		{nil, "x", false},
		{[]string{}, "", false},
		{[]string{"CardDeclined", "http:4*"}, "http:404", true},
		{[]string{"CardDeclined", "http:4*"}, "CardDeclined", true},
		{[]string{"CardDeclined", "http:4*"}, "http:503", false},
	}
	for _, tt := range tests {
		if got := MatchAny(tt.patterns, tt.typ); got != tt.want {
			t.Errorf("MatchAny(%q, %q) = %v, want %v", tt.patterns, tt.typ, got, tt.want)
		}
	}
}
