package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// checkChunked holds parseChunked to hclsyntax.ParseConfig: whenever it
// parses a file, the file parses whole without diagnostics, into the same
// tree. It reports whether parseChunked parsed src.
func checkChunked(t *testing.T, src []byte, chunk int) bool {
	t.Helper()
	if !quickScanOK(src) {
		return false
	}
	got, ok := parseChunked(src, "c.wf.hcl", chunk)
	if !ok {
		return false
	}
	want, diags := hclsyntax.ParseConfig(src, "c.wf.hcl", hcl.InitialPos)
	if len(diags) > 0 {
		t.Fatalf("parseChunked (chunk %d) parsed what HCL reports %s about: %.300q", chunk, diags.Error(), src)
	}
	if !reflect.DeepEqual(got, want) {
		gb, wb := got.Body.(*hclsyntax.Body), want.Body.(*hclsyntax.Body)
		t.Fatalf("parseChunked (chunk %d) made another tree (%d blocks, %d attributes; whole: %d, %d; ranges %v, %v) of %.300q",
			chunk, len(gb.Blocks), len(gb.Attributes), len(wb.Blocks), len(wb.Attributes), gb.SrcRange, wb.SrcRange, src)
	}
	return true
}

// FuzzParseChunked: parseChunked, at any piece size, makes the tree the
// whole parse makes, or gives up.
func FuzzParseChunked(f *testing.F) {
	for _, s := range quickScanSeeds(f) {
		f.Add(s, uint16(1))
		f.Add(s, uint16(64))
	}
	for _, s := range chunkEdges() {
		f.Add([]byte(s), uint16(1))
	}
	f.Fuzz(func(t *testing.T, src []byte, chunk uint16) { checkChunked(t, src, int(chunk)) })
}

// chunkEdges are files that split in more and fewer places.
func chunkEdges() []string {
	return []string{
		"workflow \"w\" {\n  activity \"a\" {\n    exec { command = [\"true\"] }\n  }\n\n  activity \"b\" {\n    exec {\n      command = [\"true\", \"{\", \"}\"]\n    }\n    depends_on = [activity.a]\n  }\n}\n",
		"locals {\n  x = {\n    a = 1\n    b = [\n      1,\n      2,\n    ]\n  }\n  y = \"${local.x.a} }\"\n}\n",
		"# top\nb {\n  # inside\n  c {\n    d = 1 // end\n  }\n  /* a\n  block */\n  e = 2\n}\n\n\n",
		"b {\r\n  c {\r\n    d = 1\r\n  }\r\n}\r\n",
		"b {\n  x = 1\n  c {\n  }\n  x = 2\n}\n",                      // x set twice
		"b {\n  c {\n    d = 1\n  }\n",                                // unclosed
		"b {\n  c { d = 1 }\n  e = [\"${\n    1\n  }\"]\n}\n",         // an interpolation across lines
		"b \"l\" x {\n  c {\n    d = (1 +\n      2)\n  }\n}\nf = 3\n", // labels, a split expression
		"b {\n  c {\n    d = 1\n  }  \n  }\n",
		"b { # c\n  d = 1\n}\n",
		"b {\n  d = 1\n} # c\n",
		"b {\n  d = 1 }\n",
		"b {\n  d = 1\n}",
	}
}

// TestParseChunkedMatchesTheWholeParse: at every piece size, on the test
// corpora and files that split in odd places.
func TestParseChunkedMatchesTheWholeParse(t *testing.T) {
	seeds := quickScanSeeds(t)
	for _, s := range chunkEdges() {
		seeds = append(seeds, []byte(s))
	}
	parsed := 0
	for _, src := range seeds {
		for _, chunk := range []int{0, 1, 8, 64, 512} {
			if checkChunked(t, src, chunk) {
				parsed++
			}
		}
	}
	if parsed < len(seeds) {
		t.Errorf("parseChunked parsed only %d of %d", parsed, 5*len(seeds))
	}
	for _, src := range []string{chunkEdges()[4], chunkEdges()[5]} {
		if _, ok := parseChunked([]byte(src), "c.wf.hcl", 1); ok {
			t.Errorf("parseChunked parsed %q", src)
		}
	}
}

// TestParseChunkedSplitsLargeFiles: a large file is parsed in pieces, and
// a diagnostic in one of them comes out as the whole parse gives it.
func TestParseChunkedSplitsLargeFiles(t *testing.T) {
	var b strings.Builder
	b.WriteString("workflow \"big\" {\n")
	for i := range 3000 {
		b.WriteString("  activity \"a" + itoa(i) + "\" {\n    exec {\n      command = [\"true\", \"" + itoa(i) + "\"]\n    }\n  }\n")
	}
	b.WriteString("}\n")
	src := b.String()
	if !checkChunked(t, []byte(src), parseChunkBytes) {
		t.Fatal("parseChunked gave up on 3,000 activities")
	}
	bad := strings.Replace(src, `"a2500" {`, `"a2500" {`+"\n    retry = [", 1)
	_, diags := load(t, bad, LoadOptions{})
	_, whole := hclsyntax.ParseConfig([]byte(bad), "cfg/main.wf.hcl", hcl.InitialPos)
	if len(whole) == 0 || diags.Error() != whole.Error() {
		t.Fatalf("diagnostics %v, the whole parse's %v", diags, whole)
	}
	if whole[0].Subject.Start.Line < 2500*5 {
		t.Fatalf("diagnostic on line %d", whole[0].Subject.Start.Line)
	}
}
