package config

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
)

// describeLoad writes out what a load gave: every diagnostic as it is
// printed (with its source lines) and with its ranges, and every
// workflow's activities, outputs and moved blocks with what the loader
// read of them and what Resolve makes of them before the run.
func describeLoad(t *testing.T, cfg *Config, diags hcl.Diagnostics) string {
	t.Helper()
	// HCL reports the unexpected arguments of a body in the order of a
	// map's iteration: a run of them is sorted, by position.
	diags = slices.Clone(diags)
	for i := 0; i < len(diags); {
		j := i
		for j < len(diags) && diags[j].Summary == "Unsupported argument" && diags[j].Subject != nil {
			j++
		}
		slices.SortFunc(diags[i:j], func(x, y *hcl.Diagnostic) int { return x.Subject.Start.Byte - y.Subject.Start.Byte })
		i = max(j, i+1)
	}
	var b strings.Builder
	if err := WriteDiagnostics(&b, diags, cfg.Sources, false); err != nil {
		t.Fatal(err)
	}
	for _, d := range diags {
		fmt.Fprintf(&b, "%d %q %q %v %v\n", d.Severity, d.Summary, d.Detail, d.Subject, d.Context)
	}
	for _, w := range cfg.Workflows {
		fmt.Fprintf(&b, "workflow %s %s %v\n", w.Name, w.Key, w.DeclRange)
		for _, a := range w.Activities {
			fmt.Fprintf(&b, "  %s %s %v %v %q %v %v %v %v %v %s when=%v each=%v %d\n",
				a.Name, a.Kind, a.Timeout, a.HeartbeatTimeout, a.TaskQueue, a.RuleRanges,
				a.DependsOn, a.ResolveDeps, a.DependsOnRanges, a.DeclRange, a.TriggerRule,
				a.When != nil, a.ForEach != nil, a.maxResponseBytes)
			for _, r := range a.Rules {
				fmt.Fprintf(&b, "    rule %v %+v %v\n", r.On, r.Policy, r.RetryIf != nil)
			}
			if w.Activity(a.Name) != a {
				fmt.Fprintf(&b, "    not indexed\n")
			}
			res, d := a.Resolve(nil)
			js, err := json.Marshal(res)
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "    %s %v\n", js, d)
		}
		for _, o := range w.Outputs {
			fmt.Fprintf(&b, "  output %s %v %v\n", o.Name, o.Deps, o.DeclRange)
		}
		for _, m := range w.Moved {
			fmt.Fprintf(&b, "  moved %v %v %v\n", m.From, m.To, m.DeclRange)
		}
	}
	fmt.Fprintf(&b, "hash %s\n", cfg.Hash)
	return b.String()
}

// checkDeferredLoad holds the load that defers activities, in pieces of
// chunk bytes, to the load of the whole parse: the same diagnostics, in
// the same order, and the same configuration. It reports whether the
// parse deferred any activity.
func checkDeferredLoad(t *testing.T, src []byte, chunk int) bool {
	t.Helper()
	files := map[string][]byte{"main.wf.hcl": src}
	opts := LoadOptions{Deterministic: true, Env: []string{"WF_VAR_n=1", "WF_VAR_s=[1]", "WF_VAR_l=[\"a\"]"}}
	cfg, diags := loadFiles("cfg", files, opts, chunk, true)
	wcfg, wdiags := loadFiles("cfg", files, opts, len(src)+1, false)
	got, want := describeLoad(t, cfg, diags), describeLoad(t, wcfg, wdiags)
	if got != want {
		t.Fatalf("deferring load (chunk %d) of %.300q:\n%.3000s\nthe whole parse's:\n%.3000s", chunk, src, got, want)
	}
	if !quickScanOK(src) || len(src) <= chunk {
		return false
	}
	_, def, ok := parseChunkedDeferring(src, "cfg/main.wf.hcl", chunk, true)
	return ok && len(def) > 0
}

// FuzzLoadDeferred: loading a workflow's activities as they are parsed,
// at any piece size, gives what the whole parse gives.
func FuzzLoadDeferred(f *testing.F) {
	for _, s := range deferredSeeds(f) {
		f.Add(s, uint16(1))
		f.Add(s, uint16(64))
	}
	f.Fuzz(func(t *testing.T, src []byte, chunk uint16) {
		if len(src) > 64<<10 {
			return // the whole load runs twice per input
		}
		checkDeferredLoad(t, src, int(chunk))
	})
}

func deferredSeeds(t testing.TB) [][]byte {
	seeds := quickScanSeeds(t)
	for _, s := range append(chunkEdges(), deferredEdges()...) {
		seeds = append(seeds, []byte(s))
	}
	return seeds
}

// deferredEdges are workflows whose activities the scan reads, or must
// not, or reads wrong.
func deferredEdges() []string {
	const head = "workflow \"w\" {\n  key = \"k\"\n"
	return []string{
		// Forward references, for_each, outputs and moved among the
		// activities, comments between them.
		head + "  # first\n  activity \"a\" {\n    exec { command = [\"true\", activity.b.stdout] }\n    retry {\n      on = [\"any\"]\n    }\n  }\n\n" +
			"  output \"o\" {\n    value = activity.b.exit_code\n  }\n  // second\n  activity \"b\" {\n    for_each = toset([\"x\", \"y\"])\n\n    sleep { duration = \"1s\" }\n    timeout = \"5s\"\n  }\n" +
			"  moved {\n    from = activity.c\n    to   = activity.a\n  }\n  activity \"d\" {\n    http {\n      url = \"http://x/${activity.b[\"x\"].exit_code}\"\n    }\n  }\n}\n",
		// Two kinds, none, a labelled kind block, a kind as an argument.
		head + "  activity \"a\" {\n    exec { command = [\"true\"] }\n    sleep { duration = \"1s\" }\n  }\n  activity \"b\" {\n    timeout = \"1s\"\n  }\n" +
			"  activity \"c\" {\n    exec \"x\" { command = [\"true\"] }\n  }\n  activity \"d\" {\n    exec = { command = [\"true\"] }\n  }\n  activity \"e\" {\n    exec { command = [\"true\", activity.a.stdout, activity.d.exit_code] }\n  }\n}\n",
		// A name twice, an invalid name, two labels, a bare label.
		head + "  activity \"a\" {\n    exec { command = [\"true\"] }\n  }\n  activity \"a\" {\n    exec { command = [\"true\"] }\n  }\n}\n",
		head + "  activity \"a b\" {\n    exec { command = [\"true\"] }\n  }\n  activity \"c\" {\n    exec { command = [\"true\"] }\n  }\n}\n",
		head + "  activity \"a\" \"b\" {\n    exec { command = [\"true\"] }\n  }\n  activity c {\n    exec { command = [\"true\"] }\n  }\n}\n",
		// An error in an activity, after another; an unknown argument.
		head + "  activity \"a\" {\n    exec { command = [\"true\"] }\n  }\n  activity \"b\" {\n    exec { command = [\"true\"\n  }\n}\n",
		head + "  activity \"a\" {\n    exec { command = [\"true\"] }\n    colour = 1\n  }\n  activity \"b\" {\n    exec { command = [activity.zz.stdout] }\n  }\n}\n",
		// A second workflow of the same name, its activities never
		// loaded, one of them broken; then a valid one.
		"workflow \"w\" {\n  activity \"a\" {\n    exec { command = [\"true\"] }\n  }\n}\nworkflow \"w\" {\n  activity \"a\" {\n    exec { command = [\"true\"] }\n  }\n  activity \"b\" {\n    exec { command = (\n  }\n}\n",
		"workflow \"w\" {\n  activity \"a\" {\n    exec { command = [\"true\"] }\n  }\n}\nworkflow \"w\" {\n  activity \"a\" {\n    exec { command = [\"true\"] }\n  }\n}\n",
		// An argument set twice in a workflow, around its activities.
		head + "  activity \"a\" {\n    exec { command = [\"true\"] }\n  }\n  key = \"j\"\n}\n",
		// A line that goes on past its item, a block comment.
		head + "  activity \"a\" {\n    exec { command = [\"true\"] }\n    /* c */ timeout = \"1s\"\n  }\n  activity \"b\" {\n    exec {\n      command = [\n        \"true\",\n      ]\n    }\n  }\n}\n",
	}
}

// TestLoadDeferredIsTheWholeLoad: on the corpora, the examples and the
// edges above, at every piece size, and on a large workflow with an error
// deep in it.
func TestLoadDeferredIsTheWholeLoad(t *testing.T) {
	deferred := 0
	for _, src := range deferredSeeds(t) {
		for _, chunk := range []int{0, 1, 8, 64, 512} {
			if checkDeferredLoad(t, src, chunk) {
				deferred++
			}
		}
	}
	if deferred < 40 {
		t.Errorf("only %d loads deferred activities", deferred)
	}
	var b strings.Builder
	b.WriteString("workflow \"big\" {\n")
	for i := range 3000 {
		fmt.Fprintf(&b, "  activity \"a%d\" {\n    exec {\n      command = [\"true\", tostring(activity.a%d.exit_code)]\n    }\n  }\n", i, (i+1)%3000)
	}
	b.WriteString("}\n")
	src := b.String()
	if !checkDeferredLoad(t, []byte(src), parseChunkBytes) {
		t.Fatal("3,000 activities not deferred")
	}
	for _, bad := range []string{
		strings.Replace(src, `"a2500" {`, `"a2500" {`+"\n    retry = [", 1),      // a syntax error
		strings.Replace(src, `"a2500" {`, `"a2500" {`+"\n    sleep {\n    }", 1), // a second kind, no duration
		strings.Replace(src, `"a2500" {`, `"a2500" {`+"\n    exec\n    {}", 1),   // not what the scan follows
		strings.Replace(src, `"a2500" {`, `"a2500" {`+"\n    x = 1", 1),          // an unknown argument
	} {
		checkDeferredLoad(t, []byte(bad), parseChunkBytes)
	}
}

// TestScanWorkflowItem: what the scan reads of an activity block, and
// what it leaves to the parse.
func TestScanWorkflowItem(t *testing.T) {
	for _, c := range []struct {
		src   string
		class itemClass
		want  scannedActivity
	}{
		{"  activity \"a\" {\n    exec { command = [] }\n  }\n", itemActivity, scannedActivity{name: "a", kind: KindExec}},
		{"  activity \"a-1\" {\n\n    for_each = x\n    http {\n      url = \"u\"\n    }\n    retry { on = [] }\n  }\n", itemActivity, scannedActivity{name: "a-1", kind: KindHTTP, forEach: true}},
		{"  activity \"a\" {\n    sleep {}\n    exec {}\n  }\n", itemActivity, scannedActivity{name: "a"}},
		{"  activity \"a\" {\n    exec \"l\" {}\n    for_each == 1\n  }\n", itemOther, scannedActivity{}},
		{"  activity \"a\" {\n    exec \"l\" {}\n  }\n", itemActivity, scannedActivity{name: "a"}},
		{"  activity \"a\" { exec {} }\n", itemOther, scannedActivity{}},
		{"  activity \"a\" \"b\" {\n  }\n", itemOther, scannedActivity{}},
		{"  activity \"\\u0061\" {\n  }\n", itemOther, scannedActivity{}},
		{"  activity a {\n  }\n", itemOther, scannedActivity{}},
		{"  output \"a\" {\n  }\n", itemOther, scannedActivity{}},
		{"  # activity \"a\" {\n", itemComment, scannedActivity{}},
		{"  /* c */ activity \"a\" {\n  }\n", itemOther, scannedActivity{}},
	} {
		class, got := scanWorkflowItem([]byte(c.src), 0, len(c.src))
		if class != c.class || got != c.want {
			t.Errorf("scanWorkflowItem(%q) = %v %+v, want %v %+v", c.src, class, got, c.class, c.want)
		}
	}
}
