package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/planner"
	"github.com/wf-engine/wf/statefile/record"
)

// OutputCommand prints the outputs of an instance.
type OutputCommand struct {
	cli    *CLI
	flags  commonFlags
	json   bool
	engine engineFlags
}

// outputFormatVersion is the version of wf output -json.
const outputFormatVersion = "1.0"

// Run implements `wf output INSTANCE [NAME] [-json] [DIR]`.
//
// With two positional arguments after INSTANCE they are NAME and DIR; with
// one, it is DIR when it is an existing directory, and NAME otherwise.
func (cmd *OutputCommand) Run(ctx context.Context, args []string) error {
	c := cmd.cli
	fs := c.newFlagSet("output", "wf output [options] INSTANCE [NAME] [DIR]",
		"Show the outputs of INSTANCE (e.g. order/order-1001), or the one called\nNAME: each output block of its workflow, evaluated against the state once\nthe activities it refers to have ended. A sensitive output shows as\n(sensitive); -json shows its value.")
	cmd.flags.register(fs)
	fs.BoolVar(&cmd.json, "json", false, "print the outputs as one JSON object, sensitive values included")
	cmd.engine.register(fs, false)
	wf, key, rest, err := parseInstance(fs, args, 2)
	if err != nil {
		return err
	}
	name, dir := "", "."
	switch len(rest) {
	case 1:
		if fi, err := os.Stat(rest[0]); err == nil && fi.IsDir() {
			dir = rest[0]
		} else {
			name = rest[0]
		}
	case 2:
		name, dir = rest[0], rest[1]
	}
	var cfg *config.Config
	var records map[string]*record.Activity
	if on, err := cmd.engine.temporal(c); err != nil || on {
		if err != nil {
			return err
		}
		if cfg, _, err = c.temporalConfig(dir, &cmd.flags); err != nil {
			return err
		}
		cl, err := c.dialTemporal(ctx, &cmd.engine)
		if err != nil {
			return err
		}
		defer cl.Close()
		st, _, err := cl.State(ctx, wf, key)
		if err != nil {
			return err
		}
		if st == nil {
			return fmt.Errorf("instance %s/%s is not on Temporal at %s (wf state list -engine temporal shows what is)", wf, key, cl.Address())
		}
		records = st.Activities
	} else {
		if cfg, err = c.loadConfig(dir, cmd.flags.loadOptions(c.Environ), cmd.flags.noColor); err != nil {
			return err
		}
		// During an apply, the running apply answers (SPEC §8).
		store, err := c.openStateReader(ctx, &cmd.flags, dir, "wf output")
		if err != nil {
			return err
		}
		defer store.Close()
		if _, err := findInstance(store, wf, key); err != nil {
			return err
		}
		if records, err = store.Activities(wf, key); err != nil {
			return err
		}
	}
	w := workflowOf(cfg, wf)
	if w == nil {
		var names []string
		for _, x := range cfg.Workflows {
			names = append(names, x.Name)
		}
		return fmt.Errorf("the configuration in %s has no workflow %q.%s", cfg.Dir, wf, didYouMean(wf, names))
	}
	results := planner.Outputs(w, records)
	if name != "" {
		var names []string
		var found *planner.OutputResult
		for i := range results {
			names = append(names, results[i].Name)
			if results[i].Name == name {
				found = &results[i]
			}
		}
		if found == nil {
			return fmt.Errorf("workflow %q has no output %q.%s", wf, name, didYouMean(name, names))
		}
		results = []planner.OutputResult{*found}
	}
	if cmd.json {
		return writeOutputsJSON(c.Stdout, wf+"/"+key, results)
	}
	if len(results) == 0 {
		fmt.Fprintf(c.Stdout, "Workflow %q has no outputs. Add an output block to it to see values here.\n", wf)
		return nil
	}
	writeOutputs(c.Stdout, results, name != "")
	return nil
}

// workflowOf returns the named workflow of cfg.
func workflowOf(cfg *config.Config, name string) *config.Workflow {
	for _, w := range cfg.Workflows {
		if w.Name == name {
			return w
		}
	}
	return nil
}

// writeOutputs prints "name = value" lines, values as JSON (indented when
// they span lines); one value alone when only is set.
func writeOutputs(w io.Writer, results []planner.OutputResult, only bool) {
	for _, r := range results {
		text := outputText(r)
		if only {
			fmt.Fprintln(w, text)
			continue
		}
		fmt.Fprintf(w, "%s = %s\n", r.Name, text)
	}
}

func outputText(r planner.OutputResult) string {
	switch {
	case r.Sensitive:
		return config.Redacted
	case !r.Known:
		return "(not known yet: " + strings.Join(r.Waiting, ", ") + " has not ended)"
	case r.Error != "":
		return "(error: " + oneLine(r.Error, 300) + ")"
	}
	var b bytes.Buffer
	if err := json.Indent(&b, r.Value, "", "  "); err != nil {
		return string(r.Value)
	}
	return b.String()
}

// outputJSON is one output in wf output -json, as Terraform's.
type outputJSON struct {
	Sensitive bool            `json:"sensitive"`
	Known     bool            `json:"known"`
	Type      json.RawMessage `json:"type,omitempty"`
	Value     json.RawMessage `json:"value,omitempty"`
	Error     string          `json:"error,omitempty"`
	Waiting   []string        `json:"waiting_for,omitempty"`
}

func writeOutputsJSON(w io.Writer, instance string, results []planner.OutputResult) error {
	doc := struct {
		FormatVersion string                `json:"format_version"`
		Instance      string                `json:"instance"`
		Outputs       map[string]outputJSON `json:"outputs"`
	}{FormatVersion: outputFormatVersion, Instance: instance, Outputs: map[string]outputJSON{}}
	for _, r := range results {
		doc.Outputs[r.Name] = outputJSON{Sensitive: r.Sensitive, Known: r.Known, Type: r.Type, Value: r.Value, Error: r.Error, Waiting: r.Waiting}
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encode outputs: %w", err)
	}
	if _, err := fmt.Fprintf(w, "%s\n", b); err != nil {
		return fmt.Errorf("write outputs: %w", err)
	}
	return nil
}

// printOutputs is the Outputs: section at the end of wf apply (plain
// output), as Terraform prints it: the instances' outputs that are known.
func printOutputs(w io.Writer, cfg *config.Config, plan *planner.Plan, read func(wf, key string) (map[string]*record.Activity, error)) error {
	var lines []string
	for _, ip := range plan.Instances {
		wf := workflowOf(cfg, ip.Workflow)
		if wf == nil || len(wf.Outputs) == 0 {
			continue
		}
		recs, err := read(ip.Workflow, ip.Key)
		if err != nil {
			return err
		}
		for _, r := range planner.Outputs(wf, recs) {
			if !r.Known {
				continue
			}
			prefix := ""
			if len(plan.Instances) > 1 {
				prefix = ip.Address() + " "
			}
			lines = append(lines, prefix+r.Name+" = "+outputText(r))
		}
	}
	if len(lines) == 0 {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\nOutputs:\n\n%s\n", strings.Join(lines, "\n")); err != nil {
		return fmt.Errorf("write outputs: %w", err)
	}
	return nil
}
