package main

import (
	"fmt"
	"io"
	"strings"
)

// maxDiffCells bounds the work of the line diff (lines of the old file
// times lines of the new one); past it the diff is one hunk that
// replaces the whole file, still correct, only less precise.
const maxDiffCells = 4 << 20

// writeUnifiedDiff prints the changes from a to b as a unified diff with
// three lines of context, as diff -u does, under the name name.
func writeUnifiedDiff(w io.Writer, name string, a, b []byte) {
	x, y := splitLines(string(a)), splitLines(string(b))
	ops := diffLines(x, y)
	fmt.Fprintf(w, "--- old/%s\n+++ new/%s\n", name, name)
	const context = 3
	// Walk the edit script and cut it into hunks around the changes.
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		start := max(i-context, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != ' ' {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == ' ' {
				run++
			}
			if run == len(ops) || run-end > 2*context {
				end = min(end+context, len(ops))
				break
			}
			end = run
		}
		oldStart, newStart, oldN, newN := ops[start].ai+1, ops[start].bi+1, 0, 0
		for _, op := range ops[start:end] {
			if op.kind != '+' {
				oldN++
			}
			if op.kind != '-' {
				newN++
			}
		}
		if oldN == 0 {
			oldStart--
		}
		if newN == 0 {
			newStart--
		}
		fmt.Fprintf(w, "@@ -%d,%d +%d,%d @@\n", oldStart, oldN, newStart, newN)
		for _, op := range ops[start:end] {
			fmt.Fprintf(w, "%c%s\n", op.kind, op.text)
		}
		i = end
	}
}

type diffOp struct {
	kind   byte // ' ', '-' or '+'
	text   string
	ai, bi int // the line's index in the old and the new file (where it would be)
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// diffLines is the shortest edit script from x to y by longest common
// subsequence.
func diffLines(x, y []string) []diffOp {
	n, m := len(x), len(y)
	if n*m > maxDiffCells {
		var ops []diffOp
		for i, l := range x {
			ops = append(ops, diffOp{kind: '-', text: l, ai: i, bi: 0})
		}
		for j, l := range y {
			ops = append(ops, diffOp{kind: '+', text: l, ai: n, bi: j})
		}
		return ops
	}
	// lcs[i][j] is the LCS length of x[i:] and y[j:].
	lcs := make([][]int32, n+1)
	for i := range lcs {
		lcs[i] = make([]int32, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var ops []diffOp
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			ops = append(ops, diffOp{kind: ' ', text: x[i], ai: i, bi: j})
			i++
			j++
		case i < n && (j == m || lcs[i+1][j] >= lcs[i][j+1]):
			// Deletions before insertions, as diff -u prints them.
			ops = append(ops, diffOp{kind: '-', text: x[i], ai: i, bi: j})
			i++
		default:
			ops = append(ops, diffOp{kind: '+', text: y[j], ai: i, bi: j})
			j++
		}
	}
	return ops
}
