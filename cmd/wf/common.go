package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wf-engine/wf/config"
)

// commonFlags are the flags of every command that loads a configuration.
type commonFlags struct {
	vars        stringList
	varFiles    stringList
	workflow    string
	stateDir    string
	noColor     bool
	lockTimeout time.Duration
	// input is -input: false means never ask (Terraform's flag, for
	// scripts and CI).
	input bool
}

func (f *commonFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.vars, "var", "set a variable, `NAME=VALUE` (repeatable)")
	fs.Var(&f.varFiles, "var-file", "load variables from `FILE`: HCL attributes, or a JSON object when it ends in .json (repeatable)")
	fs.StringVar(&f.workflow, "workflow", "", "only this workflow `NAME` (default: every workflow)")
	f.registerState(fs)
	switch fs.Name() {
	case "wf plan", "wf apply":
		// The configuration commands that hold the state's lock while
		// they work.
		f.registerLock(fs)
		fs.BoolVar(&f.input, "input", true, "ask for input when needed; -input=false never asks (wf apply then needs -auto-approve or a saved plan)")
	}
}

// registerLock registers -lock-timeout (Terraform's flag) for a command
// that takes the state's lock: exclusive for apply and state rm, shared
// for plan.
func (f *commonFlags) registerLock(fs *flag.FlagSet) {
	fs.DurationVar(&f.lockTimeout, "lock-timeout", 0, "wait up to `DURATION` (e.g. 30s) for another wf to release the state (default: fail at once)")
}

// loadOptions are the options for loading the configuration that the flags
// select, seen from the environment env.
func (f *commonFlags) loadOptions(env []string) config.LoadOptions {
	return config.LoadOptions{Vars: f.vars, VarFiles: f.varFiles, Env: env}
}

// registerState registers the flags of commands that read state but not the
// configuration.
func (f *commonFlags) registerState(fs *flag.FlagSet) {
	fs.StringVar(&f.stateDir, "state-dir", "", "state `DIR` (default $WF_STATE_DIR or <config dir>/.wf)")
	fs.BoolVar(&f.noColor, "no-color", false, "disable colour (NO_COLOR in the environment does too)")
}

// resolveStateDir picks the state directory: -state-dir, then WF_STATE_DIR,
// then <config dir>/.wf.
func (c *CLI) resolveStateDir(f *commonFlags, configDir string) (string, error) {
	dir := f.stateDir
	if dir == "" {
		dir = c.getenv("WF_STATE_DIR")
	}
	if dir == "" {
		return filepath.Join(configDir, ".wf"), nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("resolve state directory %s: %w", dir, err)
	}
	return abs, nil
}

// absPaths makes paths absolute so that a saved plan can be applied from
// another working directory.
func absPaths(paths []string) ([]string, error) {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		abs, err := filepath.Abs(p)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", p, err)
		}
		out = append(out, abs)
	}
	return out, nil
}

// loadConfig loads dir, prints every diagnostic (warnings too) to stderr and
// fails when there is an error among them.
func (c *CLI) loadConfig(dir string, opts config.LoadOptions, noColor bool) (*config.Config, error) {
	if err := checkHasConfig(dir); err != nil {
		return nil, err
	}
	cfg, diags := loadWithChecks(dir, opts)
	if err := c.writeDiags(diags, cfg, noColor); err != nil {
		return nil, err
	}
	if diags.HasErrors() || cfg == nil {
		return nil, exitCode(exitError)
	}
	return cfg, nil
}

// errNoConfig is returned for a directory without any *.wf.hcl file.
var errNoConfig = errors.New("No configuration files")

// checkHasConfig fails, as Terraform does, for a directory that holds no
// *.wf.hcl file: planning or applying nothing is almost always a command
// run in the wrong directory, and wf apply must not create a state there.
func checkHasConfig(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // config.Load says what is wrong with the directory
	}
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), config.ConfigSuffix) {
			return nil
		}
	}
	return fmt.Errorf("%w in %s: wf reads every *%s file of the directory; run it where your workflows are, name their directory (wf plan DIR), or use -chdir=DIR", errNoConfig, dir, config.ConfigSuffix)
}

// loadWithChecks loads dir and adds the command line's own warnings: a
// workflow without activities has nothing to run.
func loadWithChecks(dir string, opts config.LoadOptions) (*config.Config, hcl.Diagnostics) {
	cfg, diags := config.Load(dir, opts)
	if cfg == nil || diags.HasErrors() {
		return cfg, diags
	}
	for _, wf := range cfg.Workflows {
		if len(wf.Activities) > 0 {
			continue
		}
		r := wf.DeclRange
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagWarning,
			Summary:  "Workflow has no activities",
			Detail:   fmt.Sprintf("Workflow %q declares no activity block, so wf apply has nothing to run for it. Add an activity, or remove the workflow.", wf.Name),
			Subject:  &r,
		})
	}
	return cfg, diags
}

// writeDiags prints diagnostics with their source lines. The sources come
// from cfg when there is one, else are read from the files the diagnostics
// name.
func (c *CLI) writeDiags(diags hcl.Diagnostics, cfg *config.Config, noColor bool) error {
	if len(diags) == 0 {
		return nil
	}
	var sources map[string][]byte
	if cfg != nil && cfg.Sources != nil {
		sources = cfg.Sources
	} else {
		sources = readDiagSources(diags)
	}
	if err := config.WriteDiagnostics(c.Stderr, diags, sources, c.color(c.Stderr, noColor)); err != nil {
		return fmt.Errorf("write diagnostics: %w", err)
	}
	return nil
}

func readDiagSources(diags hcl.Diagnostics) map[string][]byte {
	sources := map[string][]byte{}
	for _, d := range diags {
		if d.Subject == nil || d.Subject.Filename == "" {
			continue
		}
		name := d.Subject.Filename
		if _, ok := sources[name]; ok {
			continue
		}
		// A file that cannot be read is shown without its source line.
		if b, err := os.ReadFile(name); err == nil {
			sources[name] = b
		}
	}
	return sources
}

// selectWorkflow narrows cfg to the workflow named by -workflow ("" keeps
// every workflow). The returned config shares everything else with cfg.
func selectWorkflow(cfg *config.Config, name string) (*config.Config, error) {
	if name == "" {
		return cfg, nil
	}
	for _, wf := range cfg.Workflows {
		if wf.Name == name {
			narrowed := *cfg
			narrowed.Workflows = []*config.Workflow{wf}
			return &narrowed, nil
		}
	}
	names := make([]string, 0, len(cfg.Workflows))
	for _, wf := range cfg.Workflows {
		names = append(names, wf.Name)
	}
	sort.Strings(names)
	return nil, fmt.Errorf("no workflow %q in %s (have: %s)", name, cfg.Dir, strings.Join(names, ", "))
}

// wfVarEnv returns the WF_VAR_* part of the environment, which is all of the
// environment that a configuration can see.
func wfVarEnv(environ []string) map[string]string {
	out := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, "WF_VAR_") {
			out[k] = v
		}
	}
	return out
}

// envList turns a map back into KEY=VALUE form, sorted for determinism.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}

// splitInstance parses an instance address "workflow/key".
func splitInstance(addr string) (workflow, key string, err error) {
	workflow, key, ok := strings.Cut(addr, "/")
	if !ok || workflow == "" || key == "" {
		return "", "", fmt.Errorf("invalid instance address %q: want WORKFLOW/KEY, e.g. order/order-1001", addr)
	}
	return workflow, key, nil
}
