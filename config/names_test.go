package config

import (
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

func TestValidIdentifierAgreesWithHCL(t *testing.T) {
	for _, s := range []string{
		"", "a", "Z", "a000001", "build-and-test", "x_y", "_x", "-x", "0a", "a.b", "a b",
		"a\n", "é", "aé", "a-", "a--b", "A9_-", "a$", "a{", "ab\x00", "日本", "a\u200d",
	} {
		if got, want := validIdentifier(s), hclsyntax.ValidIdentifier(s); got != want {
			t.Errorf("validIdentifier(%q) = %v, HCL says %v", s, got, want)
		}
	}
}

func FuzzValidIdentifier(f *testing.F) {
	for _, s := range []string{"a", "a-b_c9", "_", "9", "é", "a b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validIdentifier(s), hclsyntax.ValidIdentifier(s); got != want {
			t.Errorf("validIdentifier(%q) = %v, HCL says %v", s, got, want)
		}
	})
}
