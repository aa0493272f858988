package wf_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// TestDocsLinks checks every relative link of README.md and docs/: the file
// it names exists and, when it names a heading (#anchor), that heading is
// there, with the anchor GitHub makes of it. Figures move between pages as
// runs are replaced (docs/performance.md and its history page), and a link
// into a moved section would otherwise break without anyone noticing.
func TestDocsLinks(t *testing.T) {
	files := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	anchors := map[string]map[string]bool{} // by cleaned path
	read := func(path string) (string, map[string]bool, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", nil, err
		}
		text := string(b)
		if anchors[path] == nil {
			anchors[path] = headingAnchors(text)
		}
		return text, anchors[path], nil
	}
	checked := 0
	for _, file := range files {
		text, _, err := read(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(text) {
			target, frag, _ := strings.Cut(l.target, "#")
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path := file
			if target != "" {
				path = filepath.Clean(filepath.Join(filepath.Dir(file), target))
			}
			checked++
			info, err := os.Stat(path)
			if err != nil {
				t.Errorf("%s:%d: link %q: %s does not exist", file, l.line, l.target, path)
				continue
			}
			if frag == "" || info.IsDir() || !strings.HasSuffix(path, ".md") {
				continue
			}
			_, as, err := read(path)
			if err != nil {
				t.Fatal(err)
			}
			if !as[frag] {
				t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", file, l.line, l.target, path, frag)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d links: the link pattern no longer matches the docs", checked)
	}
}

type mdLink struct {
	target string
	line   int
}

var linkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// markdownLinks returns the inline links outside fenced code blocks and
// code spans.
func markdownLinks(text string) []mdLink {
	var links []mdLink
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatchIndex(withoutCodeSpans(line), -1) {
			links = append(links, mdLink{target: line[m[2]:m[3]], line: i + 1})
		}
	}
	return links
}

// withoutCodeSpans blanks `code spans` so that a link shown as code is not
// taken for a link; the length is kept so indexes still point into line.
func withoutCodeSpans(line string) string {
	b := []byte(line)
	in := false
	for i, c := range b {
		if c == '`' {
			in = !in
			continue
		}
		if in {
			b[i] = ' '
		}
	}
	return string(b)
}

// headingAnchors returns the anchors GitHub gives the headings of text:
// lower case, code marks and punctuation dropped except '-' and '_',
// spaces made '-', and "-1", "-2", ... added to repeats.
func headingAnchors(text string) map[string]bool {
	as := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteByte('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			as[a+"-"+strconv.Itoa(n)] = true
		} else {
			as[a] = true
		}
		seen[a]++
	}
	return as
}
