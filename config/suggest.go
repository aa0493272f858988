package config

import (
	"fmt"
	"sort"
	"strings"
)

// Suggest returns the candidate a mistyped name most likely meant, or "":
// one edit away, else one that name is the start of ("expo" for
// "exponential"), else two edits away (and fewer than name is long).
// Ties go to the candidate that sorts first, so the answer does not depend
// on map order.
func Suggest(name string, candidates []string) string {
	if name == "" {
		return ""
	}
	sorted := append([]string(nil), candidates...)
	sort.Strings(sorted)
	best, bestDist := "", 3
	n := len([]rune(name))
	for _, c := range sorted {
		if c == name {
			continue
		}
		if d := editDistance(strings.ToLower(name), strings.ToLower(c)); d < bestDist && d < n {
			best, bestDist = c, d
		}
	}
	if bestDist <= 1 {
		return best
	}
	if len(name) >= 2 {
		for _, c := range sorted {
			if c != name && strings.HasPrefix(c, name) {
				return c
			}
		}
	}
	return best
}

// suggest is Suggest for the loader's messages.
func suggest(name string, candidates []string) string { return Suggest(name, candidates) }

// didYouMean is ` Did you mean "x"?` for the closest candidate, or "".
func didYouMean(name string, candidates []string) string {
	if s := Suggest(name, candidates); s != "" {
		return fmt.Sprintf(" Did you mean %q?", s)
	}
	return ""
}

// editDistance is the Levenshtein distance of two short strings.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func keysOf[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
