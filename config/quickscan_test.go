package config

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// checkQuickScan holds quickScan to the lexer and the token prescan:
// whenever it says a file is within the limits, the lexer makes no more
// tokens than it counted and prescanTokens finds nothing.
func checkQuickScan(t *testing.T, src []byte) (ok bool) {
	t.Helper()
	tokens, ok := quickScan(src)
	if !ok {
		return false
	}
	toks, _ := hclsyntax.LexConfig(src, "q.wf.hcl", hcl.InitialPos)
	if len(toks) > tokens {
		t.Fatalf("quickScan counted %d tokens, the lexer made %d, of %.300q", tokens, len(toks), src)
	}
	if d := prescanTokens(toks, true); d != nil {
		t.Fatalf("quickScan passed what prescan refuses (%s: %s) of %.300q", d[0].Summary, d[0].Detail, src)
	}
	return true
}

// quickScanSeeds are the FuzzLoad corpus, the examples and the valid test
// configurations.
func quickScanSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	corpus, _ := filepath.Glob("testdata/fuzz/FuzzLoad/*")
	for _, p := range corpus {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if lit, ok := strings.CutPrefix(line, "[]byte("); ok {
				s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
				if err != nil {
					t.Fatalf("%s: %v", p, err)
				}
				seeds = append(seeds, []byte(s))
			}
		}
	}
	for _, pattern := range []string{"../examples/*/*.wf.hcl", "testdata/valid/*/*.wf.hcl", "testdata/valid/*.wf.hcl"} {
		files, _ := filepath.Glob(pattern)
		for _, p := range files {
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			seeds = append(seeds, b)
		}
	}
	if len(seeds) < 20 {
		t.Fatalf("only %d seeds", len(seeds))
	}
	return seeds
}

// FuzzQuickScan: quickScan never passes a file the token prescan refuses,
// nor counts fewer tokens than the lexer makes.
func FuzzQuickScan(f *testing.F) {
	for _, s := range quickScanSeeds(f) {
		f.Add(s)
	}
	for _, s := range quickScanEdges() {
		f.Add([]byte(s.src))
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkQuickScan(t, src) })
}

type quickScanEdge struct {
	name string
	src  string
}

// quickScanEdges are files at and just past each limit, in the part of the
// language quickScan follows.
func quickScanEdges() []quickScanEdge {
	var edges []quickScanEdge
	add := func(name, src string) { edges = append(edges, quickScanEdge{name, src}) }
	for _, n := range []int{98, 99, 100, 101} {
		add("parens "+itoa(n), localX(strings.Repeat("(", n)+"1"+strings.Repeat(")", n)))
		add("brackets "+itoa(n), localX(strings.Repeat("[", n)+"1"+strings.Repeat("]", n)))
		add("objects "+itoa(n), localX(strings.Repeat("{a=", n)+"1"+strings.Repeat("}", n)))
		add("templates "+itoa(n), localX(strings.Repeat(`"${`, n/2)+"1"+strings.Repeat(`}"`, n/2)))
		add("blocks "+itoa(n), strings.Repeat("b {\n", n)+strings.Repeat("}\n", n))
	}
	for _, n := range []int{997, 998, 999, 1000} {
		add("chain "+itoa(n), localX("1"+strings.Repeat(" + 1", n)))
		add("unary "+itoa(n), localX(strings.Repeat("!", n)+"true"))
		add("mixed chain "+itoa(n), localX(mixedChain(n)))
		add("chain in parens "+itoa(n), localX("(("+"1"+strings.Repeat(" + 1", n-2)+"))"))
	}
	add("chains split by commas", localX("["+strings.Repeat(strings.Repeat("1 + ", 600)+"1, ", 20)+"1]"))
	add("chains split by newlines", "locals {\n"+strings.Repeat("  x = "+strings.Repeat("1 + ", 600)+"1\n", 20)+"}\n")
	add("chain across newlines in brackets", localX("["+strings.Repeat("1 +\n", 1001)+"1]"))
	add("chain across a comment", "locals {\n  x = 1"+strings.Repeat(" + 1 # c\n", 1001)+"}\n")
	add("stray closers", localX(strings.Repeat(")", 200)+strings.Repeat("(", 99)))
	add("stray template closers", localX("["+`"${ 1 ) ) ) }", `+strings.Repeat(`"${`, 45)+"1"+strings.Repeat(`}"`, 45)+"]"))
	for _, n := range []int{MaxTokens - 3, MaxTokens - 2, MaxTokens - 1, MaxTokens} {
		// locals { x = [ 1,1,...,1 ] } and a newline: 7 tokens, end of
		// file and 2 a pair of "1,".
		add("tokens "+itoa(n), "locals{x=["+strings.Repeat("1,", (n-8)/2)+strings.Repeat("1", (n-8)%2)+"]}\n")
	}
	add("numbers", localX("[1, 1.5, 1.2.3, 1., 1..2, 007, 1.x, 2abc, "+strings.Repeat("9", MaxNumberLiteral)+"]"))
	add("long number", localX(strings.Repeat("9", MaxNumberLiteral+1)))
	add("strings", localX(`["a\"b", "\\", "$x", "100%", "a$", "${"x"}${1}", "é", "\${x}", "tab	x"]`))
	add("comments", "# a\n// b\n/* c\n */ locals { x = 1 } /* d */\n#e")
	add("crlf", "locals {\r\n  x = 1\r\n}\r\n")
	return edges
}

// mixedChain is an expression of n operators, of every kind.
func mixedChain(n int) string {
	ops := []string{" * ", " == ", " && ", " || ", " != ", " <= ", " >= ", " < ", " > ", " - ", " / ", " % ", " + ", " ? 1 : "}
	var b strings.Builder
	b.WriteString("1")
	for i := range n {
		b.WriteString(ops[i%len(ops)] + "x")
	}
	b.WriteString(" ? 1 : 2")
	return b.String()
}

// TestQuickScanAgreesAtTheLimits: at each limit quickScan decides as the
// token prescan does, without giving up on the files it follows.
func TestQuickScanAgreesAtTheLimits(t *testing.T) {
	for _, e := range quickScanEdges() {
		t.Run(e.name, func(t *testing.T) {
			src := []byte(e.src)
			toks, _ := hclsyntax.LexConfig(src, "q.wf.hcl", hcl.InitialPos)
			want := prescanTokens(toks, true) == nil
			t.Logf("ok = %v", want)
			if got := checkQuickScan(t, src); got != want {
				t.Errorf("quickScan ok = %v, token prescan ok = %v", got, want)
			}
		})
	}
}

// TestQuickScanFollowsOrdinaryFiles: the files users write take the quick
// path (else every plan lexes twice again), and what it gives up on goes
// to the token prescan.
func TestQuickScanFollowsOrdinaryFiles(t *testing.T) {
	var b bytes.Buffer
	b.WriteString("retry_policy \"std\" {\n  initial_interval = \"1s\"\n  maximum_attempts = 3\n}\n\nworkflow \"big\" {\n")
	for i := range 9000 {
		b.WriteString("  activity \"a" + itoa(i) + "\" {\n    exec { command = [\"true\", tostring(activity.a" + itoa(i/2) + ".exit_code)] }\n    retry = retry_policy.std\n  }\n")
	}
	b.WriteString("}\n")
	if !checkQuickScan(t, b.Bytes()) {
		t.Error("quickScan gave up on 9,000 activity blocks")
	}
	n := 0
	for _, pattern := range []string{"../examples/*/*.wf.hcl"} {
		files, _ := filepath.Glob(pattern)
		for _, p := range files {
			src, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if checkQuickScan(t, src) {
				n++
			} else {
				t.Logf("quickScan leaves %s to the lexer", p)
			}
		}
		if n == 0 || n < len(files)/2 {
			t.Errorf("quickScan followed %d of %d examples", n, len(files))
		}
	}
	for _, src := range []string{
		"locals {\n  x = <<EOT\nhi\nEOT\n}\n", // heredoc
		localX(`"%{ if true }x%{ endif }"`),   // directive
		localX(`"${~ 1 ~}"`),                  // strip markers
		localX("1e5"),                         // exponent
		localX(`"$${x}"`),                     // escape
		"\xef\xbb\xbflocals {\n  x = 1\n}\n",  // byte order mark
		localX("é"),                           // non-ASCII name
		localX("\"\xff\""),                    // invalid UTF-8
		localX("/* open"),                     // unterminated comment
		localX(`"open`),                       // unterminated string
	} {
		if _, ok := quickScan([]byte(src)); ok {
			t.Errorf("quickScan followed %q", src)
		}
		if d := prescanConfig([]byte(src), "q.wf.hcl"); d != nil {
			t.Errorf("prescanConfig(%q) = %v", src, d)
		}
	}
}
