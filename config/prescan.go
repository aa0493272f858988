package config

import (
	"bytes"
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
)

// prescanConfig checks a configuration or variable file for what would make
// HCL's recursive-descent parser, or the evaluation of what it builds,
// recurse without bound or hang: nesting deeper than MaxNesting,
// expressions deeper than MaxExprDepth and numbers out of range. HCL's
// lexer is a state machine that does not recurse, so this is safe on any
// input. It returns the first problem only: the file is not parsed at all
// then, so there is nothing more to say about it.
func prescanConfig(src []byte, filename string) hcl.Diagnostics {
	d, _ := prescanConfigQuick(src, filename)
	return d
}

// prescanConfigQuick is prescanConfig, and whether quickScanOK passed the
// file (which parseChunked needs).
func prescanConfigQuick(src []byte, filename string) (diags hcl.Diagnostics, quick bool) {
	if d := tooManyTokens(src, filename); d != nil {
		return d, false
	}
	if quickScanOK(src) {
		return nil, true
	}
	toks, _ := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	return prescanTokens(toks, true), false
}

// prescanExpression is prescanConfig for a lone expression (-var values).
func prescanExpression(src []byte, filename string) hcl.Diagnostics {
	if d := tooManyTokens(src, filename); d != nil {
		return d
	}
	toks, _ := hclsyntax.LexExpression(src, filename, hcl.InitialPos)
	return prescanTokens(toks, false)
}

// tooManyTokens refuses, without lexing it, a source that may hold more
// than maxTokenBound tokens: the lexer keeps about 100 bytes a token (and
// twice that while its slice grows), so a file of a million commas costs
// a few hundred megabytes before prescan can count them.
func tooManyTokens(src []byte, filename string) hcl.Diagnostics {
	if n := tokenBound(src); n > maxTokenBound {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: "File too large",
			Detail:  fmt.Sprintf("This file may hold up to %d tokens (names, numbers, strings and symbols); wf reads at most %d from one file, about 2 MB of usual HCL. Split the configuration into several files.", n, MaxTokens),
			Subject: &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos}}}
	}
	return nil
}

// maxTokenBound bounds tokenBound; typical HCL has one token for every two
// units of it, so a typical 1 MiB file passes.
const maxTokenBound = 900_000

// tokenBound is an upper bound on the number of tokens HCL's lexer makes of
// src, found in one pass without allocating. Every token starts either at
// a byte that is neither an ASCII letter, digit, underscore, space nor tab
// (counted one each), at the start of a run of spaces and tabs, or within
// a run of letters, digits and underscores, which holds at most two
// tokens (a number then a name, as in 1abc). Non-ASCII bytes count one
// each, so invalid UTF-8 cannot hide tokens.
func tokenBound(src []byte) int {
	n := 0
	const (
		other = iota
		word
		space
	)
	prev := other
	for _, c := range src {
		cls := other
		switch {
		case c == ' ' || c == '\t':
			cls = space
		case c == '_' || (c >= '0' && c <= '9') || (c|0x20 >= 'a' && c|0x20 <= 'z'):
			cls = word
		}
		switch {
		case cls == other:
			n++
		case cls != prev:
			if cls == word {
				n += 2
			} else {
				n++
			}
		}
		prev = cls
	}
	return n + 1 // end of file
}

// scanFrame is one open bracket (or the file itself).
type scanFrame struct {
	// body: newlines end an item here (a body or an object), so they end
	// an operator chain as commas do.
	body bool
	// ops counts the operators since the last separator: a chain of them
	// is a left-deep tree that HCL evaluates recursively.
	ops int
}

func prescanTokens(toks hclsyntax.Tokens, body bool) hcl.Diagnostics {
	stack := []scanFrame{{body: body}}
	depth := 1      // sum over the stack of 1 + ops
	directives := 0 // open %{ if } and %{ for } template directives
	fail := func(tok hclsyntax.Token, summary, format string, args ...any) hcl.Diagnostics {
		return hcl.Diagnostics{{Severity: hcl.DiagError, Summary: summary,
			Detail: fmt.Sprintf(format, args...), Subject: tok.Range.Ptr()}}
	}
	open := func(body bool) {
		stack = append(stack, scanFrame{body: body})
		depth++
	}
	for i, tok := range toks {
		// Problems are reported in file order: a file both too deep and
		// too long is too deep where it first is.
		if i == MaxTokens {
			return fail(tok, "File too large",
				"This file has %d tokens (names, numbers, strings and symbols); wf reads at most %d from one file, about 2 MB of usual HCL. Split the configuration into several files.", len(toks), MaxTokens)
		}
		top := &stack[len(stack)-1]
		switch tok.Type {
		case hclsyntax.TokenOBrace:
			open(true)
		case hclsyntax.TokenOBrack, hclsyntax.TokenOParen, hclsyntax.TokenTemplateInterp,
			hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc:
			open(false)
		case hclsyntax.TokenTemplateControl:
			open(false)
			if kw := nextIdent(toks, i+1); kw == "if" || kw == "for" {
				directives++
			} else if (kw == "endif" || kw == "endfor") && directives > 0 {
				directives--
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenTemplateSeqEnd,
			hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc:
			// A stray closer is a syntax error the parser reports.
			if len(stack) > 1 {
				depth -= 1 + top.ops
				stack = stack[:len(stack)-1]
			}
		case hclsyntax.TokenComma:
			depth -= top.ops
			top.ops = 0
		case hclsyntax.TokenNewline:
			if top.body {
				depth -= top.ops
				top.ops = 0
			}
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash, hclsyntax.TokenPercent,
			hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq,
			hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq, hclsyntax.TokenAnd, hclsyntax.TokenOr,
			hclsyntax.TokenBang, hclsyntax.TokenQuestion:
			top.ops++
			depth++
		case hclsyntax.TokenNumberLit:
			if len(tok.Bytes) > MaxNumberLiteral {
				return fail(tok, "Number too long", "This number is %d characters long; wf allows numbers of up to %d characters.", len(tok.Bytes), MaxNumberLiteral)
			}
			// Without an exponent, MaxNumberLiteral digits stay in range.
			if !bytes.ContainsAny(tok.Bytes, "eE") {
				continue
			}
			v, err := cty.ParseNumberVal(string(tok.Bytes))
			if err != nil {
				continue // the parser reports it
			}
			if le := checkNumber(v.AsBigFloat()); le != nil {
				return fail(tok, le.Summary, "%s.", capitalize(le.Detail))
			}
		}
		if n := len(stack) - 1 + directives; n > MaxNesting {
			return fail(tok, "Too deeply nested",
				"This is nested %d levels deep (brackets, braces, parentheses, templates and template directives inside one another); wf allows %d.", n, MaxNesting)
		}
		if depth > MaxExprDepth {
			return fail(tok, "Expression too complex",
				"This expression is more than %d levels deep, counting each operator of a chain (a + b + c ...) and each level of nesting; wf allows %d. Split it into local values.", MaxExprDepth, MaxExprDepth)
		}
	}
	return nil
}

// nextIdent returns the identifier at position i, if there is one (the
// keyword of a template directive; a strip marker is part of %{~).
func nextIdent(toks hclsyntax.Tokens, i int) string {
	if i < len(toks) && toks[i].Type == hclsyntax.TokenIdent {
		return string(toks[i].Bytes)
	}
	return ""
}
