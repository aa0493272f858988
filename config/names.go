package config

import (
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// validIdentifier is hclsyntax.ValidIdentifier with a shortcut for the
// names nearly every configuration uses: an ASCII letter, then ASCII
// letters, digits, underscores and dashes, an identifier to HCL as well.
// HCL's own check lexes the name (a token slice for each), which for the
// 10,000 activities of one workflow was 20,000 lexings; anything else is
// still judged by it.
func validIdentifier(s string) bool {
	if s == "" {
		return false
	}
	if !asciiLetter(s[0]) {
		return hclsyntax.ValidIdentifier(s)
	}
	for i := 1; i < len(s); i++ {
		if !identPart(s[i]) {
			return hclsyntax.ValidIdentifier(s)
		}
	}
	return true
}

func asciiLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// identStart and identPart are the ASCII bytes that start and continue a
// plain identifier (every such word is one to HCL too).
func identStart(c byte) bool { return asciiLetter(c) || c == '_' }

func identPart(c byte) bool { return identStart(c) || '0' <= c && c <= '9' || c == '-' }

// internCalls returns the set of called functions equal to calls that
// the loader returned first, so that activities calling the same
// functions share one read-only map instead of keeping a map each (10,000
// activities kept 10,000 maps of one or no name).
func (l *loader) internCalls(calls map[string]bool) map[string]bool {
	names := make([]string, 0, len(calls))
	for name := range calls {
		names = append(names, name)
	}
	sort.Strings(names)
	key := strings.Join(names, ",") // a function's name has no comma
	if seen, ok := l.callSets[key]; ok {
		return seen
	}
	if l.callSets == nil {
		l.callSets = map[string]map[string]bool{}
	}
	l.callSets[key] = calls
	return calls
}
