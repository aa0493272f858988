package retry

// Match reports whether errType matches pattern. A '*' in the pattern
// matches any run of characters, including none, anywhere in the pattern;
// every other character must match exactly (case-sensitive). The empty
// pattern matches only the empty type.
func Match(pattern, errType string) bool {
	// Classic greedy glob with a single backtrack point: linear in
	// practice and never exponential, unlike naive recursion.
	p, s := 0, 0
	star, mark := -1, 0
	for s < len(errType) {
		switch {
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, s
			p++
		case p < len(pattern) && pattern[p] == errType[s]:
			p++
			s++
		case star >= 0:
			p = star + 1
			mark++
			s = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// MatchAny reports whether errType matches at least one pattern.
func MatchAny(patterns []string, errType string) bool {
	for _, pat := range patterns {
		if Match(pat, errType) {
			return true
		}
	}
	return false
}
