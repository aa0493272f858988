package main

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDiffLinesRebuildsBothSides: on random files, the edit script's kept
// and deleted lines are the old file and its kept and inserted lines the
// new one, and it keeps as many lines as the longest common subsequence.
func TestDiffLinesRebuildsBothSides(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	words := []string{"a", "b", "c", "d", "}"}
	gen := func() []string {
		out := make([]string, r.IntN(30))
		for i := range out {
			out[i] = words[r.IntN(len(words))]
		}
		return out
	}
	for range 500 {
		x, y := gen(), gen()
		var gotX, gotY []string
		for _, op := range diffLines(x, y) {
			if op.kind != '+' {
				gotX = append(gotX, op.text)
			}
			if op.kind != '-' {
				gotY = append(gotY, op.text)
			}
		}
		if strings.Join(gotX, "\n") != strings.Join(x, "\n") || strings.Join(gotY, "\n") != strings.Join(y, "\n") {
			t.Fatalf("edit script of %q -> %q rebuilds %q -> %q", x, y, gotX, gotY)
		}
	}
}

func TestUnifiedDiff(t *testing.T) {
	old := "a\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\n"
	new := "a\nB\nc\nd\ne\nf\ng\nh\ni\nj\nk\nL\n"
	var buf bytes.Buffer
	writeUnifiedDiff(&buf, "x.wf.hcl", []byte(old), []byte(new))
	want := `--- old/x.wf.hcl
+++ new/x.wf.hcl
@@ -1,5 +1,5 @@
 a
-b
+B
 c
 d
 e
@@ -9,4 +9,4 @@
 i
 j
 k
-l
+L
`
	if buf.String() != want {
		t.Errorf("diff:\n%s\nwant:\n%s", buf.String(), want)
	}
}

// TestFmtDiffRecursive: -recursive formats subdirectories but hidden
// ones; -diff -check prints the changes and writes nothing.
func TestFmtDiffRecursive(t *testing.T) {
	messy := "workflow \"w\" {\nkey=\"k\"\n  activity \"a\" {\n    exec {\n      command = [\"true\"]\n    }\n  }\n}\n"
	dir := t.TempDir()
	for _, p := range []string{"main.wf.hcl", "sub/x.wf.hcl", ".wf/y.wf.hcl"} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(messy), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := wf(t, "fmt", "-check", "-diff", "-recursive", dir)
	if r.code != 1 || !strings.Contains(r.stdout, "-key=\"k\"\n+  key = \"k\"\n") || !strings.Contains(r.stdout, filepath.Join(dir, "sub", "x.wf.hcl")) {
		t.Fatalf("fmt -check -diff -recursive: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if strings.Contains(r.stdout, ".wf") && strings.Contains(r.stdout, "y.wf.hcl") {
		t.Errorf("fmt -recursive went into a hidden directory:\n%s", r.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "main.wf.hcl")); string(b) != messy {
		t.Error("fmt -check wrote a file")
	}
	if r := wf(t, "fmt", "-recursive", dir); r.code != 0 {
		t.Fatalf("fmt -recursive: exit %d: %s", r.code, r.stderr)
	}
	if r := wf(t, "fmt", "-check", "-recursive", dir); r.code != 0 {
		t.Errorf("fmt -check after fmt -recursive: exit %d\n%s", r.code, r.stdout)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, ".wf", "y.wf.hcl")); string(b) != messy {
		t.Error("fmt -recursive rewrote a file in a hidden directory")
	}
}
