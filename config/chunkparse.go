package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// parseChunkBytes is the size of the pieces parseChunked parses a large
// file in. Small pieces keep each token slice small, and a small slice
// grows by doubling, where a large one grows by a quarter at a time and so
// is copied more often: parsing 10,000 activity blocks allocates 166 MB in
// pieces of 2 KB (about 600 tokens), 210 MB in pieces of 4 KB; a whole
// load allocated 390 MB in pieces of 4 KB, 450 MB in pieces of 64 KB.
// Smaller pieces than 2 KB allocate no less: each parse has its own
// overhead.
const parseChunkBytes = 2 << 10

// parseChunked parses a large configuration file in pieces of about chunk
// bytes, into the same syntax tree as hclsyntax.ParseConfig of the whole.
// HCL's lexer makes all of a file's tokens before its parser starts, about
// 100 bytes a token, in a slice it grows by copying: for a 1 MB file, 40 MB
// of tokens and as much again while the slice grows, all of it live while
// the tree is built and all of it scanned by every garbage collection. In
// pieces, only one piece's tokens are live at a time.
//
// A body splits between its items, at the lines where no bracket, string
// or comment is open. The file is parsed whole but for the contents of the
// blocks larger than chunk, blanked out (spaces; every newline is kept, so
// every position stays where it was); each such block's body is then
// filled in from its items, parsed in runs of up to chunk bytes, and
// larger blocks among them the same way. Each piece is parsed at its
// position in the file, so every range is the one the whole parse makes.
//
// It is only for files quickScanOK passed (the subset of the language it
// follows, where a newline outside brackets ends an item), and it gives up,
// returning false, wherever it is not sure: at a piece with any diagnostic,
// an argument set twice across pieces, a block whose braces are not where
// it expects. The caller then parses the file whole, so that every
// diagnostic is the one HCL gives.
func parseChunked(src []byte, filename string, chunk int) (*hcl.File, bool) {
	f, _, ok := parseChunkedDeferring(src, filename, chunk, false)
	return f, ok
}

// parseChunkedDeferring is parseChunked that, if deferring, leaves the
// plain activity blocks of the file's large workflow blocks out of the
// tree and returns them by body, for the loader to parse as it loads them
// (deferred.go).
func parseChunkedDeferring(src []byte, filename string, chunk int, deferring bool) (*hcl.File, map[*hclsyntax.Body]*deferredBody, bool) {
	p := &chunkParser{src: src, filename: filename, chunk: chunk, line: 1}
	if deferring {
		p.deferred = map[*hclsyntax.Body]*deferredBody{}
	}
	f, ok := p.parse(0, len(src))
	if !ok {
		return nil, nil, false
	}
	f.Bytes = src
	return f, p.deferred, true
}

type chunkParser struct {
	src      []byte
	filename string
	chunk    int
	// at and line: the last position pos found, where the next one
	// (usually further on) starts counting.
	at, line int
	// deferred, when not nil, receives the activities of the file's large
	// workflow blocks, left out of the tree (deferred.go).
	deferred map[*hclsyntax.Body]*deferredBody
}

// pos is the position of offset, which starts a line: lines are counted in
// newlines, as the lexer counts them (a lone CR is no line break to it, nor
// to quickScan).
func (p *chunkParser) pos(offset int) hcl.Pos {
	if offset < p.at {
		p.at, p.line = 0, 1
	}
	for _, c := range p.src[p.at:offset] {
		if c == '\n' {
			p.line++
		}
	}
	p.at = offset
	return hcl.Pos{Line: p.line, Column: 1, Byte: offset}
}

// parse parses src[lo:hi], whole items that start a line, blanking and
// then filling in the bodies of the blocks larger than chunk.
func (p *chunkParser) parse(lo, hi int) (*hcl.File, bool) {
	var items []int
	if hi-lo > p.chunk {
		// A piece no larger than chunk has no item larger than chunk:
		// fill's runs need no second scan.
		items = itemStarts(p.src, lo, hi)
	}
	var big []bigBlock
	for i, s := range items {
		e := hi
		if i+1 < len(items) {
			e = items[i+1]
		}
		if e-s <= p.chunk {
			continue
		}
		if b, ok := blockInterior(p.src, s, e); ok {
			big = append(big, b)
		}
	}
	piece := p.src[lo:hi]
	if len(big) > 0 {
		piece = append([]byte(nil), piece...)
		for _, b := range big {
			blank(piece[b.lo-lo : b.hi-lo])
		}
	}
	f, diags := hclsyntax.ParseConfig(piece, p.filename, p.pos(lo))
	if len(diags) > 0 || f == nil {
		return nil, false
	}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		return nil, false
	}
	// The tree holds no slice of the piece (its names and literals are
	// copies; one that did would keep it alive), so a blanked copy need
	// not stay live while its large blocks are filled in: parseChunked
	// gives the file its source.
	f.Bytes = nil
	for _, b := range big {
		var block *hclsyntax.Block
		for _, cand := range body.Blocks {
			if cand.OpenBraceRange.Start.Byte == b.open {
				block = cand
				break
			}
		}
		if block == nil || block.CloseBraceRange.Start.Byte != b.close ||
			len(block.Body.Attributes) != 0 || len(block.Body.Blocks) != 0 {
			return nil, false
		}
		if p.deferred != nil && lo == 0 && block.Type == "workflow" {
			// A workflow block of the file itself (lo is 0 only for
			// the whole file).
			def, ok := p.fillDeferred(block.Body, b.lo, b.hi)
			if !ok {
				return nil, false
			}
			if def != nil {
				p.deferred[block.Body] = def
				continue
			}
		}
		if !p.fill(block.Body, b.lo, b.hi) {
			return nil, false
		}
	}
	return f, true
}

// blank overwrites the whole lines of a large block's interior so that
// it parses as nothing but keeps every newline: spaces, then one block
// comment holding all the newlines but the last, then the last. The
// lexer steps over spaces by arithmetic but emits a token per newline
// and walks a comment's bytes by grapheme clusters, so a comment of
// newlines is one token walked briefly, where newlines alone were one
// token each (45,000 tokens, 24 MB of token slices and 60 ms for the
// 10,000 activities of one workflow block) and a comment of the whole
// interior was walked byte by byte. The comment's text is not in the
// tree; the block's closing brace stays on its line, at its column and
// byte. An interior too short for the comment is blanked to spaces and
// newlines.
func blank(interior []byte) {
	newlines := 0
	for _, c := range interior {
		if c == '\n' {
			newlines++
		}
	}
	// "/*", the newlines but the last, "*/", the last newline.
	comment := newlines + 4
	if newlines == 0 || interior[len(interior)-1] != '\n' || len(interior) < comment {
		for i, c := range interior {
			if c != '\n' {
				interior[i] = ' '
			}
		}
		return
	}
	at := len(interior) - comment
	for i := range interior[:at] {
		interior[i] = ' '
	}
	interior[at], interior[at+1] = '/', '*'
	for i := at + 2; i < len(interior)-3; i++ {
		interior[i] = '\n'
	}
	copy(interior[len(interior)-3:], "*/\n")
}

// lineCommentAt reports whether a line comment (# or //) starts at
// src[i], the end of the text being e.
func lineCommentAt(src []byte, i, e int) bool {
	return i < e && (src[i] == '#' || src[i] == '/' && i+1 < e && src[i+1] == '/')
}

// fill parses the items of src[lo:hi] in runs of up to chunk bytes into
// body.
func (p *chunkParser) fill(body *hclsyntax.Body, lo, hi int) bool {
	items := itemStarts(p.src, lo, hi)
	items = append(items, hi)
	for i := 0; i+1 < len(items); {
		j := i + 1
		for j+1 < len(items) && items[j+1]-items[i] <= p.chunk {
			j++
		}
		f, ok := p.parse(items[i], items[j])
		if !ok {
			return false
		}
		part := f.Body.(*hclsyntax.Body)
		for name, attr := range part.Attributes {
			if _, dup := body.Attributes[name]; dup {
				return false // the whole parse says where it was first set
			}
			body.Attributes[name] = attr
		}
		body.Blocks = append(body.Blocks, part.Blocks...)
		i = j
	}
	return true
}

// bigBlock is a block item whose body parse blanks: src[lo:hi] are the
// whole lines between the line of its opening brace, at open, and the line
// of its closing brace, at close.
type bigBlock struct {
	open, lo, hi, close int
}

// blockInterior finds the body of a block item src[s:e]: a header without
// "=", an opening brace that ends its line, and a closing brace alone on
// the item's last line. ok is false for an attribute or a block written
// otherwise, which is then parsed with its item.
func blockInterior(src []byte, s, e int) (bigBlock, bool) {
	open := -1
	for i := s; i < e; i++ {
		c := src[i]
		if c == '{' {
			open = i
			break
		}
		if c == '=' || c == '\n' || c == '#' || c == '/' {
			return bigBlock{}, false
		}
	}
	if open < 0 {
		return bigBlock{}, false
	}
	lo := open + 1
	for lo < e && src[lo] == ' ' {
		lo++
	}
	if lo < e && src[lo] == '\r' {
		lo++
	}
	if lo >= e || src[lo] != '\n' {
		return bigBlock{}, false
	}
	lo++
	// The last line: spaces, "}", spaces, a newline (or the end of file).
	end := e
	if end > s && src[end-1] == '\n' {
		end--
		if end > s && src[end-1] == '\r' {
			end--
		}
	}
	for end > lo && src[end-1] == ' ' {
		end--
	}
	if end <= lo || src[end-1] != '}' {
		return bigBlock{}, false
	}
	hi := end - 1
	for hi > lo && src[hi-1] == ' ' {
		hi--
	}
	if hi <= lo || src[hi-1] != '\n' {
		return bigBlock{}, false
	}
	return bigBlock{open: open, lo: lo, hi: hi, close: end - 1}, true
}

// itemStarts returns the offsets in src[lo:hi] that start an item: lo,
// and each line start after a newline outside brackets, strings and
// comments (a line comment's newline included), that has more than
// spaces before the next such line. src is within what quickScan follows.
func itemStarts(src []byte, lo, hi int) []int {
	starts := []int{lo}
	depth := 0
	// Open interpolations: the depth their closing brace returns to, in a
	// string.
	var interps []int
	inString := false
	lineStart := func(i int) {
		if depth == 0 && i < hi {
			starts = append(starts, i)
		}
	}
	for i := lo; i < hi; {
		c := src[i]
		if inString {
			switch {
			case c == '\\':
				i += 2
			case c == '"':
				inString = false
				depth--
				i++
			case c == '$' && i+1 < hi && src[i+1] == '{':
				depth++
				interps = append(interps, depth)
				inString = false
				i += 2
			default:
				i++
			}
			continue
		}
		switch {
		case c == '"':
			depth++
			inString = true
			i++
		case lineCommentAt(src, i, hi):
			for i < hi && src[i] != '\n' {
				i++
			}
			i++
			lineStart(i)
		case c == '/' && i+1 < hi && src[i+1] == '*':
			i += 2
			for i+1 < hi && !(src[i] == '*' && src[i+1] == '/') {
				i++
			}
			i += 2
		case c == '\n':
			i++
			lineStart(i)
		case c == '{' || c == '[' || c == '(':
			depth++
			i++
		case c == '}':
			if len(interps) > 0 && interps[len(interps)-1] == depth {
				interps = interps[:len(interps)-1]
				inString = true
			}
			depth--
			i++
		case c == ']' || c == ')':
			depth--
			i++
		default:
			i++
		}
	}
	// Drop starts followed by nothing but spaces and newlines up to the
	// next: a blank line belongs to the item before it.
	out := starts[:1]
	for _, s := range starts[1:] {
		blank := true
		for j := s; j < hi && src[j] != '\n'; j++ {
			if src[j] != ' ' && src[j] != '\r' {
				blank = false
				break
			}
		}
		if !blank {
			out = append(out, s)
		}
	}
	return out
}
