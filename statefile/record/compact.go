package record

// isMarshaledRaw reports whether src is exactly what json.Marshal writes
// for a json.RawMessage holding it: valid JSON (as encoding/json's
// json.Valid has it, invalid UTF-8 inside strings included), with no
// white space outside strings, no '<', '>' or '&' and no U+2028 or
// U+2029 (json.Marshal escapes those). It accepts and rejects exactly
// what appendCompactJSON followed by a comparison with src does (the
// tests and FuzzIsMarshaledRaw hold it to that), in one pass and without
// a copy: reopening a state checks the outputs of every activity, and the
// validation, rebuild and comparison were a quarter of decoding one.
func isMarshaledRaw(src []byte) bool {
	// The open containers, innermost last: '{' or '['. json.Valid
	// refuses more than jsonMaxDepth of them.
	var stackBuf [32]byte
	stack := stackBuf[:0]
	i := 0
	for {
		// A value is next.
		if i >= len(src) {
			return false
		}
		switch c := src[i]; {
		case c == '{' || c == '[':
			if len(stack) == jsonMaxDepth {
				return false
			}
			i++
			if i < len(src) && src[i] == c+2 { // '}' is '{'+2, ']' is '['+2
				i++
				break
			}
			stack = append(stack, c)
			if c == '{' {
				if i = rawKey(src, i); i < 0 {
					return false
				}
			}
			continue
		case c == '"':
			if i = rawString(src, i); i < 0 {
				return false
			}
		case c == '-' || '0' <= c && c <= '9':
			if i = rawNumber(src, i); i < 0 {
				return false
			}
		case c == 't':
			if i = rawLiteral(src, i, "true"); i < 0 {
				return false
			}
		case c == 'f':
			if i = rawLiteral(src, i, "false"); i < 0 {
				return false
			}
		case c == 'n':
			if i = rawLiteral(src, i, "null"); i < 0 {
				return false
			}
		default:
			return false
		}
		// After a value: the ends of containers, then a comma or the end.
		for {
			if len(stack) == 0 {
				return i == len(src)
			}
			if i >= len(src) {
				return false
			}
			top := stack[len(stack)-1]
			c := src[i]
			if c == top+2 {
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			if c != ',' {
				return false
			}
			i++
			if top == '{' {
				if i = rawKey(src, i); i < 0 {
					return false
				}
			}
			break
		}
	}
}

// jsonMaxDepth is encoding/json's limit on nesting (its scanner's
// maxNestingDepth).
const jsonMaxDepth = 10000

// rawKey reads `"name":` at i; it returns the index after it, or -1.
func rawKey(src []byte, i int) int {
	if i >= len(src) || src[i] != '"' {
		return -1
	}
	if i = rawString(src, i); i < 0 || i >= len(src) || src[i] != ':' {
		return -1
	}
	return i + 1
}

// rawString reads the string that begins at i (src[i] is '"'); it returns
// the index after it, or -1.
func rawString(src []byte, i int) int {
	for i++; i < len(src); i++ {
		c := src[i]
		if !stringStop[c] {
			continue
		}
		switch {
		case c == '"':
			return i + 1
		case c == '\\':
			i++
			if i >= len(src) {
				return -1
			}
			switch src[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(src) {
					return -1
				}
				for _, h := range src[i+1 : i+5] {
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return -1
					}
				}
				i += 4
			default:
				return -1
			}
		case c < 0x20 || c == '<' || c == '>' || c == '&':
			return -1
		case c == 0xE2 && i+2 < len(src) && src[i+1] == 0x80 && src[i+2]&^1 == 0xA8:
			return -1
		}
	}
	return -1
}

// stringStop marks the bytes rawString looks at: the end of a string, an
// escape, what a string may not hold as it is, and the first byte of
// U+2028 and U+2029.
var stringStop = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	for _, c := range []byte{'"', '\\', '<', '>', '&', 0xE2} {
		t[c] = true
	}
	return t
}()

// rawNumber reads the number that begins at i; it returns the index
// after it, or -1. What follows is for the caller to check.
func rawNumber(src []byte, i int) int {
	if src[i] == '-' {
		i++
	}
	switch {
	case i >= len(src):
		return -1
	case src[i] == '0':
		i++
	case '1' <= src[i] && src[i] <= '9':
		i = digits(src, i+1)
	default:
		return -1
	}
	if i < len(src) && src[i] == '.' {
		if i++; i >= len(src) || !isDigit(src[i]) {
			return -1
		}
		i = digits(src, i+1)
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		if i++; i < len(src) && (src[i] == '+' || src[i] == '-') {
			i++
		}
		if i >= len(src) || !isDigit(src[i]) {
			return -1
		}
		i = digits(src, i+1)
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func digits(src []byte, i int) int {
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	return i
}

func rawLiteral(src []byte, i int, lit string) int {
	if len(src)-i < len(lit) || string(src[i:i+len(lit)]) != lit {
		return -1
	}
	return i + len(lit)
}
