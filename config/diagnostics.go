package config

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

const (
	ansiReset     = "\x1b[0m"
	ansiBold      = "\x1b[1m"
	ansiBoldRed   = "\x1b[1;31m"
	ansiBoldYellw = "\x1b[1;33m"
)

// WriteDiagnostics prints diags the way Terraform does: severity and
// summary, the file:line:col with the enclosing top-level block, the source
// line with the subject underlined, then the detail. sources maps
// diagnostic filenames to file contents (Config.Sources); a diagnostic
// whose file is not there is printed without its source line. color adds
// ANSI colours (bold red errors, bold yellow warnings).
func WriteDiagnostics(w io.Writer, diags hcl.Diagnostics, sources map[string][]byte, color bool) error {
	bw := bufio.NewWriter(w)
	files := map[string]*hcl.File{}
	for i, d := range diags {
		if d == nil {
			continue
		}
		if i > 0 {
			bw.WriteString("\n")
		}
		writeDiagnostic(bw, d, sources, files, color)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write diagnostics: %w", err)
	}
	return nil
}

func writeDiagnostic(w *bufio.Writer, d *hcl.Diagnostic, sources map[string][]byte, files map[string]*hcl.File, color bool) {
	label, colour := "Error", ansiBoldRed
	if d.Severity == hcl.DiagWarning {
		label, colour = "Warning", ansiBoldYellw
	}
	if color {
		fmt.Fprintf(w, "%s%s:%s %s%s%s\n", colour, label, ansiReset, ansiBold, d.Summary, ansiReset)
	} else {
		fmt.Fprintf(w, "%s: %s\n", label, d.Summary)
	}

	if d.Subject != nil {
		s := d.Subject
		w.WriteString("\n")
		ctx := ""
		if src, ok := sources[s.Filename]; ok {
			ctx = blockContext(files, s.Filename, src, s.Start.Byte)
		}
		if ctx != "" {
			fmt.Fprintf(w, "  on %s:%d:%d, in %s:\n", s.Filename, s.Start.Line, s.Start.Column, ctx)
		} else {
			fmt.Fprintf(w, "  on %s:%d:%d:\n", s.Filename, s.Start.Line, s.Start.Column)
		}
		if src, ok := sources[s.Filename]; ok {
			writeSnippet(w, src, s)
		}
	}

	if d.Detail != "" {
		w.WriteString("\n")
		w.WriteString(strings.TrimRight(d.Detail, "\n"))
		w.WriteString("\n")
	}
}

// maxContextSource is the largest file whose diagnostics name the
// enclosing block.
const maxContextSource = 256 << 10

// maxSnippet is how much of a long source line a diagnostic shows, around
// its subject.
const maxSnippet = 160

// blockContext names the top-level block containing offset, e.g.
// `retry_policy "payment"`. Files are parsed once per call and cached.
func blockContext(files map[string]*hcl.File, filename string, src []byte, offset int) string {
	f, ok := files[filename]
	if !ok {
		// Parsing again costs as much as loading did; a large file is
		// printed without the context rather than twice as slowly, and a
		// file too deep to parse safely gets none either.
		if len(src) <= maxContextSource && prescanConfig(src, filename) == nil {
			f, _ = hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
		}
		files[filename] = f
	}
	if f == nil {
		return ""
	}
	body, ok := f.Body.(*hclsyntax.Body)
	if !ok {
		return ""
	}
	for _, b := range body.Blocks {
		if b.Range().ContainsOffset(offset) {
			var sb strings.Builder
			sb.WriteString(b.Type)
			for _, l := range b.Labels {
				fmt.Fprintf(&sb, " %q", l)
			}
			return sb.String()
		}
	}
	return ""
}

// writeSnippet prints the subject's first line and underlines the subject
// on it. Offsets come from the diagnostic, so they are clamped: a
// diagnostic about another version of the file must not crash the printer.
func writeSnippet(w *bufio.Writer, src []byte, s *hcl.Range) {
	start := s.Start.Byte
	if start < 0 || start > len(src) {
		return
	}
	lineStart := bytes.LastIndexByte(src[:start], '\n') + 1
	lineEnd := len(src)
	if i := bytes.IndexByte(src[start:], '\n'); i >= 0 {
		lineEnd = start + i
	}
	// A long line (a minified file, a 1 MB expression) is shown as a
	// window around the subject, cut at rune boundaries.
	prefix, suffix := "", ""
	if lineEnd-lineStart > maxSnippet {
		from := max(lineStart, start-maxSnippet/3)
		for from > lineStart && !utf8.RuneStart(src[from]) {
			from--
		}
		to := min(lineEnd, from+maxSnippet)
		for to < lineEnd && !utf8.RuneStart(src[to]) {
			to++
		}
		if from > lineStart {
			prefix = "…"
		}
		if to < lineEnd {
			suffix = "…"
		}
		lineStart, lineEnd = from, to
	}
	line := strings.TrimRight(string(src[lineStart:lineEnd]), "\r")
	num := fmt.Sprintf("%d", s.Start.Line)
	fmt.Fprintf(w, "  %s: %s%s%s\n", num, prefix, line, suffix)

	end := s.End.Byte
	if end > lineStart+len(line) {
		end = lineStart + len(line)
	}
	if end < start {
		end = start
	}
	var pad strings.Builder
	if prefix != "" {
		pad.WriteByte(' ')
	}
	for _, r := range string(src[lineStart:start]) {
		if r == '\t' {
			pad.WriteByte('\t')
		} else {
			pad.WriteByte(' ')
		}
	}
	width := utf8.RuneCount(src[start:end])
	if width == 0 {
		width = 1
	}
	fmt.Fprintf(w, "  %s  %s%s\n", strings.Repeat(" ", len(num)), pad.String(), strings.Repeat("^", width))
}
