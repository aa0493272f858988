package planner

import (
	"bufio"
	"fmt"
	"io"
	"strconv"

	"github.com/wf-engine/wf/config"
)

// WriteDOT writes the activity graph of every workflow in Graphviz DOT for
// `wf graph`: one cluster per workflow, one node per activity labelled with
// its kind, and an edge from each upstream activity to the activity that
// depends on it (the order they run in). Graphs with errors are drawn as
// far as they go, which is exactly when a picture helps.
func WriteDOT(w io.Writer, cfg *config.Config) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintln(bw, "digraph wf {")
	fmt.Fprintln(bw, "  rankdir = LR;")
	fmt.Fprintln(bw, `  node [shape = box, fontname = "Helvetica"];`)
	for i, wf := range cfg.Workflows {
		g, _ := BuildGraph(wf)
		fmt.Fprintf(bw, "\n  subgraph %s {\n", strconv.Quote("cluster_"+strconv.Itoa(i)))
		fmt.Fprintf(bw, "    label = %s;\n", strconv.Quote("workflow."+wf.Name+" ("+wf.Address()+")"))
		for _, name := range g.names {
			a := wf.Activity(name)
			fmt.Fprintf(bw, "    %s [label = %s];\n", dotID(wf.Name, name), dotLabel("activity."+name, "("+string(a.Kind)+")"))
		}
		for _, name := range g.names {
			for _, up := range g.Upstream(name) {
				fmt.Fprintf(bw, "    %s -> %s;\n", dotID(wf.Name, up), dotID(wf.Name, name))
			}
		}
		fmt.Fprintln(bw, "  }")
	}
	fmt.Fprintln(bw, "}")
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write graph: %w", err)
	}
	return nil
}

// dotID keeps node IDs unique across workflows that share activity names.
func dotID(wf, activity string) string { return dotQuote(wf + "." + activity) }

// dotLabel joins lines with DOT's own "\n" escape.
func dotLabel(lines ...string) string {
	s := ""
	for i, l := range lines {
		if i > 0 {
			s += `\n`
		}
		s += dotEscape(l)
	}
	return `"` + s + `"`
}

func dotQuote(s string) string { return `"` + dotEscape(s) + `"` }

// dotEscape escapes the two characters that are special inside a DOT
// quoted string.
func dotEscape(s string) string {
	out := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '"' || s[i] == '\\' {
			out = append(out, '\\')
		}
		out = append(out, s[i])
	}
	return string(out)
}
