package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"

	"github.com/wf-engine/wf/config"
)

func TestGraphOrder(t *testing.T) {
	tests := []struct {
		name  string
		wf    *config.Workflow
		order []string
	}{
		{"declaration order without edges", workflow("w", "k",
			act("c", config.KindExec, 1), act("a", config.KindExec, 2), act("b", config.KindExec, 3)),
			[]string{"c", "a", "b"}},
		{"upstream first", workflow("w", "k",
			act("ship", config.KindHTTP, 1, "charge"), act("charge", config.KindExec, 2)),
			[]string{"charge", "ship"}},
		{"ties broken by declaration order", workflow("w", "k",
			act("d", config.KindExec, 1, "a"), act("c", config.KindExec, 2), act("a", config.KindExec, 3), act("b", config.KindExec, 4, "a")),
			[]string{"c", "a", "d", "b"}},
		{"diamond", workflow("w", "k",
			act("join", config.KindExec, 1, "l", "r"), act("r", config.KindExec, 2, "root"), act("l", config.KindExec, 3, "root"), act("root", config.KindExec, 4)),
			[]string{"root", "r", "l", "join"}},
		{"cycle members last", workflow("w", "k",
			act("a", config.KindExec, 1, "b"), act("b", config.KindExec, 2, "a"), act("c", config.KindExec, 3)),
			[]string{"c", "a", "b"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g, _ := BuildGraph(tt.wf)
			if got := g.Order(); !slices.Equal(got, tt.order) {
				t.Errorf("Order = %v, want %v", got, tt.order)
			}
		})
	}
}

func TestGraphNeighbours(t *testing.T) {
	wf := workflow("w", "k",
		act("join", config.KindExec, 1, "l", "r"), act("r", config.KindExec, 2, "root"),
		act("l", config.KindExec, 3, "root"), act("root", config.KindExec, 4))
	g, diags := BuildGraph(wf)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	tests := []struct {
		name     string
		up, down []string
	}{
		{"join", []string{"r", "l"}, []string{}},
		{"root", []string{}, []string{"r", "l"}},
		{"l", []string{"root"}, []string{"join"}},
		{"missing", nil, nil},
	}
	for _, tt := range tests {
		if got := g.Upstream(tt.name); !slices.Equal(got, tt.up) {
			t.Errorf("Upstream(%s) = %v, want %v", tt.name, got, tt.up)
		}
		if got := g.Downstream(tt.name); !slices.Equal(got, tt.down) {
			t.Errorf("Downstream(%s) = %v, want %v", tt.name, got, tt.down)
		}
	}
}

func TestGraphUnknownUpstream(t *testing.T) {
	wf := workflow("order", "k", act("ship", config.KindHTTP, 3, "nope@7"))
	_, diags := BuildGraph(wf)
	if len(diags) != 1 || diags[0].Severity != hcl.DiagError {
		t.Fatalf("diags = %v, want one error", diags)
	}
	d := diags[0]
	if !strings.Contains(d.Detail, "activity.nope") || d.Subject == nil || d.Subject.Start.Line != 7 {
		t.Errorf("diag = %s: %s at %v", d.Summary, d.Detail, d.Subject)
	}
}

func TestGraphCycles(t *testing.T) {
	tests := []struct {
		name string
		wf   *config.Workflow
		// want has one entry per expected diagnostic: the cycle path, the
		// subject line and lines that must appear in the detail.
		want []cycleWant
	}{
		{"two", workflow("order", "k",
			act("a", config.KindExec, 1, "b@4"), act("b", config.KindExec, 10, "a@12")),
			[]cycleWant{{"activity.a -> activity.b -> activity.a", 4, []string{
				"activity.a depends on activity.b (main.wf.hcl:4)", "activity.b depends on activity.a (main.wf.hcl:12)"}}}},
		{"three, reported from the first declared", workflow("order", "k",
			act("x", config.KindExec, 1),
			act("c", config.KindExec, 20, "a@22", "x@23"), act("a", config.KindExec, 30, "b@31"), act("b", config.KindExec, 40, "c@41")),
			[]cycleWant{{"activity.c -> activity.a -> activity.b -> activity.c", 22, []string{
				"activity.c depends on activity.a (main.wf.hcl:22)",
				"activity.a depends on activity.b (main.wf.hcl:31)",
				"activity.b depends on activity.c (main.wf.hcl:41)"}}}},
		{"self", workflow("order", "k", act("a", config.KindExec, 1, "a@2")),
			[]cycleWant{{"activity.a -> activity.a", 2, []string{"activity.a depends on activity.a (main.wf.hcl:2)"}}}},
		{"two separate cycles", workflow("order", "k",
			act("a", config.KindExec, 1, "b@2"), act("b", config.KindExec, 3, "a@4"),
			act("c", config.KindExec, 5, "d@6"), act("d", config.KindExec, 7, "c@8")),
			[]cycleWant{
				{"activity.a -> activity.b -> activity.a", 2, nil},
				{"activity.c -> activity.d -> activity.c", 6, nil}}},
		{"figure eight visits every member", workflow("order", "k",
			act("a", config.KindExec, 1, "b@2"), act("b", config.KindExec, 3, "a@4", "c@5"), act("c", config.KindExec, 6, "b@7")),
			[]cycleWant{{"activity.a -> activity.b -> activity.c -> activity.b -> activity.a", 2, nil}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := BuildGraph(tt.wf)
			if len(diags) != len(tt.want) {
				t.Fatalf("got %d diagnostics, want %d: %v", len(diags), len(tt.want), diags)
			}
			for i, w := range tt.want {
				d := diags[i]
				if d.Severity != hcl.DiagError {
					t.Errorf("diag %d is not an error", i)
				}
				if d.Summary != "Dependency cycle: "+w.path {
					t.Errorf("summary = %q, want path %q", d.Summary, w.path)
				}
				if d.Subject == nil || d.Subject.Start.Line != w.line || d.Subject.Filename != "main.wf.hcl" {
					t.Errorf("subject = %v, want line %d", d.Subject, w.line)
				}
				for _, s := range w.detail {
					if !strings.Contains(d.Detail, s) {
						t.Errorf("detail %q lacks %q", d.Detail, s)
					}
				}
			}
		})
	}
}

type cycleWant struct {
	path   string
	line   int
	detail []string
}
