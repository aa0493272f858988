package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestMovedRenames(t *testing.T) {
	cfg := mustLoad(t, wrap(`
  activity "charge" {
    exec { command = ["true"] }
  }
  activity "fetch" {
    for_each = toset(["a", "b"])
    exec { command = ["true"] }
  }
  activity "single" {
    for_each = toset(["x"])
    exec { command = ["true"] }
  }
  moved {
    from = activity.charge_card
    to   = activity.charge
  }
  moved {
    from = activity.get
    to   = activity.fetch
  }
  moved {
    from = activity.one
    to   = activity.single["x"]
  }
  moved {
    from = activity.first
    to   = activity.second
  }
  moved {
    from = activity.second
    to   = activity.charge_card
  }
`), LoadOptions{})
	w := cfg.Workflows[0]
	renames, conflicts := w.Renames(map[string]bool{
		"charge_card": true, `get["a"]`: true, `get["c"]`: true, "one": true, "unrelated": true,
	})
	var got []string
	for _, r := range renames {
		got = append(got, r.From+">"+r.To)
	}
	if want := `charge_card>charge,get["a"]>fetch["a"],get["c"]>fetch["c"],one>single["x"]`; strings.Join(got, ",") != want {
		t.Errorf("renames %s\nwant     %s", strings.Join(got, ","), want)
	}
	if len(conflicts) != 0 {
		t.Errorf("conflicts %v", conflicts)
	}
	// A chain is followed: first -> second -> charge_card -> charge.
	renames, _ = w.Renames(map[string]bool{"first": true})
	if len(renames) != 1 || renames[0].To != "charge" {
		t.Errorf("chain: %+v", renames)
	}
	// A record already at the destination keeps it.
	renames, conflicts = w.Renames(map[string]bool{"charge_card": true, "charge": true})
	if len(renames) != 0 || len(conflicts) != 1 || conflicts[0].From != "charge_card" {
		t.Errorf("conflict: %v %v", renames, conflicts)
	}
}

func TestMovedErrors(t *testing.T) {
	acts := `
  activity "a" {
    exec { command = ["true"] }
  }
  activity "m" {
    for_each = toset(["k"])
    exec { command = ["true"] }
  }
`
	moved := func(from, to string) string {
		return wrap(acts + fmt.Sprintf("  moved {\n    from = %s\n    to   = %s\n  }\n", from, to))
	}
	tests := []struct {
		name, src, summary, detail, at string
	}{
		{"still declared", moved("activity.a", "activity.m[\"x\"]"), "Moved object still declared", "activity.a is still in the configuration", "activity.a\n"},
		{"element still declared", moved(`activity.m["k"]`, "activity.a"), "Moved object still declared", `activity.m["k"] is still in the configuration`, `activity.m["k"]`},
		{"element to for_each", moved(`activity.old["k"]`, "activity.m"), "Moved an element to an activity with for_each", `like activity.m["KEY"]`, "activity.m\n"},
		{"key without for_each", moved("activity.old", `activity.a["k"]`), "Moved to an element of an activity without for_each", "has no for_each", `activity.a["k"]`},
		{"not an address", moved("var.x", "activity.a"), "Invalid from address", "must be an activity address", "var.x"},
		{"ambiguous", wrap(acts + "  moved {\n    from = activity.x\n    to   = activity.a\n  }\n  moved {\n    from = activity.y\n    to   = activity.a\n  }\n"), "Ambiguous move", "already moves state to activity.a", "LAST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, diags := load(t, tt.src, LoadOptions{})
			errs := errorsOf(diags)
			if len(errs) != 1 {
				t.Fatalf("want one error, got %v", diags)
			}
			d := errs[0]
			if d.Summary != tt.summary || !strings.Contains(d.Detail, tt.detail) {
				t.Errorf("got %q: %q\nwant %q containing %q", d.Summary, d.Detail, tt.summary, tt.detail)
			}
			var line, col int
			if tt.at == "LAST" { // the second "to = activity.a"
				i := strings.LastIndex(tt.src, "activity.a\n")
				line, col = strings.Count(tt.src[:i], "\n")+1, i-strings.LastIndex(tt.src[:i], "\n")
			} else {
				line, col = posOf(t, tt.src, tt.at)
			}
			if d.Subject == nil || d.Subject.Start.Line != line || d.Subject.Start.Column != col {
				t.Errorf("subject = %v, want %d:%d", d.Subject, line, col)
			}
		})
	}
}

func TestMovedCycle(t *testing.T) {
	src := wrap("  activity \"c\" {\n    exec { command = [\"true\"] }\n  }\n  moved {\n    from = activity.a\n    to   = activity.b\n  }\n  moved {\n    from = activity.b\n    to   = activity.a\n  }\n")
	_, diags := load(t, src, LoadOptions{})
	// Neither destination is declared, except as a link of the other.
	found := false
	for _, d := range errorsOf(diags) {
		found = found || d.Summary == "Cyclic moved blocks"
	}
	if !found {
		t.Errorf("no cycle error: %v", diags)
	}
}
