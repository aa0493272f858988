package config

import "unicode/utf8"

// quickScanOK reports whether src, a configuration file, is certainly
// within the limits prescanTokens checks, found with one pass over its
// bytes and no allocation. The lexer builds about 100 bytes of token for
// every token, so lexing a large file only to look at its tokens would
// cost as much time and memory again as parsing it; this scanner keeps
// only counters.
//
// It follows HCL's lexer (hclsyntax/scan_tokens.rl) token by token, but
// for the common subset of the language only: ASCII outside string
// literals, quoted templates with interpolations, comments. At anything
// else (a heredoc, a template directive, a strip marker, an escape such as
// $${, a number with an exponent, a bracket it cannot place, invalid
// UTF-8) it gives up, and so it does wherever a limit is reached: false
// means "not known", and prescanConfig then lexes the file and judges it
// token by token, with the diagnostic it always gave. So this scanner
// decides no diagnostic: it only lets ordinary files skip the lexing.
//
// Where it counts tokens it counts at least as many as the lexer makes
// (FuzzQuickScan holds it to the lexer and the token prescan).
func quickScanOK(src []byte) bool {
	_, ok := quickScan(src)
	return ok
}

// quickScan is quickScanOK, and the tokens it counted (tests compare them
// with the lexer's).
func quickScan(src []byte) (tokens int, ok bool) {
	// The prescan's view: open brackets (the file itself is one frame),
	// whether each is a body, and the operators since the last separator.
	type frame struct {
		body bool
		ops  int
	}
	var stackBuf [MaxNesting + 2]frame
	stack := append(stackBuf[:0], frame{body: true})
	depth := 1
	// The lexer's view: it counts braces and, for each open
	// interpolation, the brace count its closing brace brings back.
	braces := 0
	var retBuf [MaxNesting + 2]int
	ret := retBuf[:0]
	inString := false
	tokens = 1 // end of file

	open := func(body bool) bool {
		if len(stack) > MaxNesting { // the new frame would be one too many
			return false
		}
		stack = append(stack, frame{body: body})
		depth++
		return depth <= MaxExprDepth
	}
	closeFrame := func() {
		if len(stack) > 1 {
			top := stack[len(stack)-1]
			depth -= 1 + top.ops
			stack = stack[:len(stack)-1]
		}
	}
	op := func() bool {
		stack[len(stack)-1].ops++
		depth++
		return depth <= MaxExprDepth
	}

	n := len(src)
	for i := 0; i < n; {
		if tokens > MaxTokens {
			return tokens, false
		}
		c := src[i]
		if inString {
			switch {
			case c == '"':
				tokens++ // TokenCQuote
				closeFrame()
				inString = false
				i++
			case c == '$' || c == '%':
				if i+1 >= n {
					return tokens, false
				}
				next := src[i+1]
				if next == c || (c == '%' && next == '{') || (next == '{' && i+2 < n && src[i+2] == '~') {
					return tokens, false // an escape ($${, %%{), a directive, a strip marker
				}
				if next != '{' {
					// "$" or "%" alone is a literal token of its own; the
					// literal after it is another, counted below.
					tokens++
					i++
					continue
				}
				tokens++ // TokenTemplateInterp
				braces++
				if len(ret) == cap(ret) || !open(false) {
					return tokens, false
				}
				ret = append(ret, braces)
				inString = false
				i += 2
			case c == '\n' || c == '\r':
				return tokens, false // TokenQuotedNewline: a syntax error
			default:
				// One TokenQuotedLit: a run of characters and escapes
				// up to a quote, a newline, $ or %.
				tokens++
				for i < n {
					c := src[i]
					if c == '"' || c == '$' || c == '%' || c == '\n' || c == '\r' {
						break
					}
					if c == '\\' {
						i++
						if i >= n || src[i] == '\n' || src[i] == '\r' {
							return tokens, false
						}
						c = src[i]
					}
					if c < utf8.RuneSelf {
						i++
						continue
					}
					r, size := utf8.DecodeRune(src[i:])
					if r == utf8.RuneError && size <= 1 {
						return tokens, false
					}
					i += size
				}
			}
			continue
		}

		switch {
		case c == ' ' || c == '\t':
			i++
			continue
		case c == '\n':
			tokens++
			if top := &stack[len(stack)-1]; top.body {
				depth -= top.ops
				top.ops = 0
			}
			i++
			continue
		case c == '\r':
			if i+1 < n && src[i+1] == '\n' {
				tokens++
				if top := &stack[len(stack)-1]; top.body {
					depth -= top.ops
					top.ops = 0
				}
				i += 2
				continue
			}
			return tokens, false
		case lineCommentAt(src, i, n):
			// A line comment, its newline included: one TokenComment,
			// which ends no item for the prescan.
			tokens++
			for i < n && src[i] != '\n' {
				i++
			}
			i++
			continue
		case c == '/' && i+1 < n && src[i+1] == '*':
			tokens++
			end := -1
			for j := i + 2; j+1 < n; j++ {
				if src[j] == '*' && src[j+1] == '/' {
					end = j + 2
					break
				}
			}
			if end < 0 {
				return tokens, false
			}
			i = end
			continue
		case c >= '0' && c <= '9':
			// NumberLit: digits and dots, not ending in a dot; an
			// exponent is left to the token prescan, which checks its
			// range.
			tokens++
			j, end := i+1, i+1
			for j < n {
				d := src[j]
				if d >= '0' && d <= '9' {
					j++
					end = j
				} else if d == '.' {
					j++
				} else if d == 'e' || d == 'E' {
					return tokens, false
				} else {
					break
				}
			}
			if end-i > MaxNumberLiteral {
				return tokens, false
			}
			i = end
			continue
		case c == '_' || (c|0x20 >= 'a' && c|0x20 <= 'z'):
			// Ident: ASCII letters, digits, underscores and dashes; a
			// name that goes on in other letters is left to the lexer.
			tokens++
			i++
			for i < n {
				d := src[i]
				if d == '_' || d == '-' || (d >= '0' && d <= '9') || (d|0x20 >= 'a' && d|0x20 <= 'z') {
					i++
					continue
				}
				if d >= utf8.RuneSelf {
					return tokens, false
				}
				break
			}
			continue
		}

		// Symbols.
		tokens++
		two := byte(0)
		if i+1 < n {
			two = src[i+1]
		}
		i++
		switch c {
		case '{':
			braces++
			if !open(true) {
				return tokens, false
			}
		case '}':
			// TokenCBrace, or TokenTemplateSeqEnd back into the string.
			if len(ret) > 0 && ret[len(ret)-1] == braces {
				ret = ret[:len(ret)-1]
				inString = true
			}
			braces--
			closeFrame()
		case '[', '(':
			if !open(false) {
				return tokens, false
			}
		case ']', ')':
			closeFrame()
		case '"':
			if !open(false) {
				return tokens, false
			}
			inString = true
		case ',':
			top := &stack[len(stack)-1]
			depth -= top.ops
			top.ops = 0
		case '=':
			if two == '=' { // ==
				i++
				if !op() {
					return tokens, false
				}
			} else if two == '>' { // =>
				i++
			}
		case '!', '>':
			if two == '=' {
				i++
			}
			if !op() {
				return tokens, false
			}
		case '<':
			if two == '<' {
				return tokens, false // a heredoc, or two operators
			}
			if two == '=' {
				i++
			}
			if !op() {
				return tokens, false
			}
		case '&', '|':
			if two != c {
				return tokens, false // not an operator wf knows
			}
			i++
			if !op() {
				return tokens, false
			}
		case '+', '-', '*', '/', '%', '?':
			if !op() {
				return tokens, false
			}
		case '.':
			if two == '.' && i+1 < n && src[i+1] == '.' { // ...
				i += 2
			}
		case ':':
			if two == ':' {
				i++
			}
		default:
			// ~, ;, ^, `, ', control characters, non-ASCII: rare, or
			// errors the parser reports.
			return tokens, false
		}
	}
	return tokens, !inString && tokens <= MaxTokens
}
