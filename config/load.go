package config

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// File name suffixes the loader picks up from a configuration directory.
const (
	ConfigSuffix       = ".wf.hcl"
	AutoVarsSuffix     = ".auto.wfvars"
	AutoVarsJSONSuffix = ".auto.wfvars.json"
)

// LoadOptions carries the variable inputs given outside the configuration.
type LoadOptions struct {
	// Vars are -var NAME=VALUE options, in command-line order.
	Vars []string
	// VarFiles are -var-file paths, in command-line order.
	VarFiles []string
	// Env is the process environment as "K=V" entries; WF_VAR_name entries
	// set variables. It is passed in rather than read so that loading stays
	// a pure function of its inputs.
	Env []string
	// Deterministic drops the CPU-time backstop (BudgetCPU), so that
	// whether a load succeeds depends on its inputs alone, never on how
	// busy or slow the machine is. The step and byte budgets still bound
	// evaluation. The Temporal interpreter sets it: a workflow that loads
	// its configuration must take the same path on every replay, and a
	// busy worker must not fail a workflow the client already checked.
	Deterministic bool
}

// Load reads every *.wf.hcl and *.auto.wfvars file directly inside dir (in
// lexical order), evaluates variables, locals, policies, budgets and
// workflow keys, and validates the whole configuration.
//
// The returned Config is never nil. When diags has errors, only Dir and
// Sources are filled in (so the caller can print the diagnostics with their
// source lines); everything else is left empty.
func Load(dir string, opts LoadOptions) (*Config, hcl.Diagnostics) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		abs, _ := filepath.Abs(dir)
		return &Config{Dir: abs, Sources: map[string][]byte{}}, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Cannot read configuration directory",
			Detail:   fmt.Sprintf("read configuration directory %s: %v", dir, err),
		}}
	}
	files := make(map[string][]byte)
	var diags hcl.Diagnostics
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, ConfigSuffix) || isAutoVars(name)) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Cannot read configuration file",
				Detail:   fmt.Sprintf("read %s: %v", filepath.Join(dir, name), err),
			})
			continue
		}
		files[name] = b
	}
	cfg, more := LoadFiles(dir, files, opts)
	return cfg, append(diags, more...)
}

// LoadFiles is Load without reading the directory: files maps base names
// (e.g. "main.wf.hcl", "prod.auto.wfvars") to their contents. -var-file
// paths are looked up in files first and read from disk otherwise.
func LoadFiles(dir string, files map[string][]byte, opts LoadOptions) (*Config, hcl.Diagnostics) {
	return loadFiles(dir, files, opts, parseChunkBytes, true)
}

// loadFiles is LoadFiles parsing large files in pieces of chunk bytes and,
// if deferring, loading a large workflow's activities as it parses them
// (deferred.go); tests compare it with the whole parse.
func loadFiles(dir string, files map[string][]byte, opts LoadOptions, chunk int, deferring bool) (*Config, hcl.Diagnostics) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		abs = filepath.Clean(dir)
	}
	lim := loadLimits
	if opts.Deterministic {
		lim.cpuLimit = 0
	} else {
		defer lockCPUClock()()
	}
	var l *loader
	var cfg *Config
	for {
		b := newBudget(lim)
		base := baseFunctions()
		l = &loader{
			dir:       dir,
			absDir:    abs,
			opts:      opts,
			files:     files,
			chunk:     chunk,
			deferring: deferring,
			sources:   make(map[string][]byte),
			funcs:     withBudget(base, lim, b),
			guards:    guardFuncs(b),
			runFuncs:  base,
			budget:    b,
		}
		cfg = l.load()
		if !l.restart {
			break
		}
		// A deferred activity did not parse as its scan said: load
		// again, everything parsed first, for the whole parse's
		// diagnostics in their order.
		deferring = false
	}
	if red := NewRedactor(l.secrets()); red != nil {
		// No diagnostic quotes a sensitive variable's value, wherever
		// it was evaluated (an enum, a duration, a URL).
		for _, d := range l.diags {
			d.Summary, d.Detail = red.String(d.Summary), red.String(d.Detail)
		}
	}
	if l.diags.HasErrors() {
		return &Config{Dir: abs, Sources: l.sources}, l.diags
	}
	return cfg, l.diags
}

// loader holds the state of one Load call; nothing outlives it except the
// returned Config and the closures it contains.
type loader struct {
	dir    string // as given, for diagnostic filenames
	absDir string
	opts   LoadOptions
	files  map[string][]byte
	// chunk is the size of the pieces a large file is parsed in.
	chunk int
	// deferring lets parseConfigFile leave a large workflow's plain
	// activity blocks out of the tree, for loadWorkflow to parse as it
	// loads them: deferred holds them by the workflow's body. restart is
	// set when one of them did not parse as scanned (deferred.go).
	deferring bool
	deferred  map[*hclsyntax.Body]*deferredBody
	restart   bool

	sources map[string][]byte
	diags   hcl.Diagnostics
	// budget is what all of load-time evaluation may spend together, and
	// funcs its functions (guards included, limitedfuncs.go); guards are
	// only the guards, for literals. runFuncs are the plain functions that
	// Resolve and retry_if layer a budget of their own over at run time.
	funcs, guards, runFuncs map[string]function.Function
	budget                  *budget
	// staticCache is staticVars once the locals are done.
	staticCache map[string]cty.Value

	configNames []string // *.wf.hcl base names, sorted

	vars      map[string]*variable
	varVals   map[string]cty.Value
	locals    map[string]*local
	localVals map[string]cty.Value
	policies  map[string]*namedPolicy
	budgets   map[string]*Budget
	// sensitive collects the values of sensitive variables.
	sensitive []string
	// breakers and parentAttrs: see gates.go.
	breakers    map[string]*Breaker
	parentAttrs map[string]*hcl.Attribute
	// callSets: see internCalls.
	callSets map[string]map[string]bool
	// shared: what activities written alike share (shared.go).
	shared interned
	// env: see resolveEnv.
	env *resolveEnv
}

var fileSchema = &hcl.BodySchema{
	Blocks: []hcl.BlockHeaderSchema{
		{Type: "variable", LabelNames: []string{"name"}},
		{Type: "locals"},
		{Type: "retry_budget", LabelNames: []string{"name"}},
		{Type: "retry_policy", LabelNames: []string{"name"}},
		{Type: "circuit_breaker", LabelNames: []string{"name"}},
		{Type: "workflow", LabelNames: []string{"name"}},
	},
}

func (l *loader) addDiags(d hcl.Diagnostics) { l.diags = append(l.diags, d...) }

func (l *loader) errorf(subject *hcl.Range, summary, format string, args ...any) {
	l.diags = append(l.diags, &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject,
	})
}

func (l *loader) warnf(subject *hcl.Range, summary, format string, args ...any) {
	l.diags = append(l.diags, &hcl.Diagnostic{
		Severity: hcl.DiagWarning,
		Summary:  summary,
		Detail:   fmt.Sprintf(format, args...),
		Subject:  subject,
	})
}

// diagName is the filename a file's diagnostics carry.
func (l *loader) diagName(base string) string { return filepath.Join(l.dir, base) }

func (l *loader) load() *Config {
	var blocks []*hcl.Block
	for name := range l.files {
		if strings.HasSuffix(name, ConfigSuffix) {
			l.configNames = append(l.configNames, name)
		}
	}
	sort.Strings(l.configNames)
	for _, name := range l.configNames {
		fn := l.diagName(name)
		src := l.files[name]
		l.sources[fn] = src
		f, d := l.parseConfigFile(src, fn)
		l.addDiags(d)
		if d.HasErrors() || f == nil {
			continue
		}
		content, d := f.Body.Content(fileSchema)
		l.addDiags(d)
		if content != nil {
			blocks = append(blocks, content.Blocks...)
		}
	}

	byType := map[string][]*hcl.Block{}
	for _, b := range blocks {
		if len(b.Labels) > 0 && !validIdentifier(b.Labels[0]) {
			l.errorf(b.LabelRanges[0].Ptr(), "Invalid name",
				"%q is not a valid %s name: a name must start with a letter or underscore and contain only letters, digits, underscores and dashes.",
				b.Labels[0], b.Type)
			continue
		}
		byType[b.Type] = append(byType[b.Type], b)
	}

	l.loadVariables(byType["variable"])
	l.loadLocals(byType["locals"])
	l.loadBudgets(byType["retry_budget"])
	l.resolveBudgetParents()
	l.loadBreakers(byType["circuit_breaker"])
	l.loadPolicies(byType["retry_policy"])
	workflows := l.loadWorkflows(byType["workflow"])
	if !l.restart {
		l.checkDeferred()
	}
	if l.restart {
		return nil
	}

	cfg := &Config{
		Dir:       l.absDir,
		Sources:   l.sources,
		Variables: l.varVals,
		Locals:    l.localVals,
		Policies:  make(map[string]*Policy, len(l.policies)),
		Budgets:   l.budgets,
		Breakers:  l.breakers,
		Workflows: workflows,
		Sensitive: l.secrets(),
	}
	for _, w := range workflows {
		w.Sensitive = cfg.Sensitive
	}
	for name, p := range l.policies {
		cfg.Policies[name] = &Policy{Name: name, Rule: p.rule, DeclRange: p.declRange}
	}
	if !l.diags.HasErrors() {
		h, err := l.hash()
		if err != nil {
			l.errorf(nil, "Cannot hash configuration", "%v", err)
		}
		cfg.Hash = h
	}
	return cfg
}

// hash covers the configuration files by base name (so the same directory
// reached through different relative paths hashes alike) and the final
// variable values, which is everything a plan depends on.
func (l *loader) hash() (string, error) {
	h := sha256.New()
	for _, name := range l.configNames {
		fmt.Fprintf(h, "file %q %d\n", name, len(l.files[name]))
		h.Write(l.files[name])
	}
	names := make([]string, 0, len(l.varVals))
	for n := range l.varVals {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		// Variables are marked sensitive at the top only (a deep unmark
		// would walk, and for a set sort, the whole value once more).
		v, _ := l.varVals[n].Unmark()
		ty, err := ctyjson.MarshalType(v.Type())
		if err != nil {
			return "", fmt.Errorf("hash variable %s: %w", n, err)
		}
		val, err := ctyjson.Marshal(v, v.Type())
		if err != nil && v.ContainsMarked() {
			v, _ = v.UnmarkDeep()
			val, err = ctyjson.Marshal(v, v.Type())
		}
		if err != nil {
			return "", fmt.Errorf("hash variable %s: %w", n, err)
		}
		fmt.Fprintf(h, "var %q %s %s\n", n, ty, val)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// secrets returns the values of the sensitive variables worth redacting,
// longest first, without duplicates.
func (l *loader) secrets() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range l.sensitive {
		if len(s) >= MinRedacted && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if len(out[i]) != len(out[j]) {
			return len(out[i]) > len(out[j])
		}
		return out[i] < out[j]
	})
	return out
}

// parseConfig parses a configuration or variable file that prescan found
// bounded, and puts the evaluation guards into it (guard.go). A large file
// in the language quickScan follows is parsed in pieces (parseChunked),
// any other whole.
func parseConfig(src []byte, filename string) (*hcl.File, hcl.Diagnostics) {
	f, _, d := parseConfigDeferring(src, filename, parseChunkBytes, false)
	return f, d
}

// parseConfigFile is parseConfig of a configuration file, in the loader's
// pieces, its deferred activities kept in l.deferred.
func (l *loader) parseConfigFile(src []byte, filename string) (*hcl.File, hcl.Diagnostics) {
	f, def, d := parseConfigDeferring(src, filename, l.chunk, l.deferring)
	for body, db := range def {
		if l.deferred == nil {
			l.deferred = map[*hclsyntax.Body]*deferredBody{}
		}
		l.deferred[body] = db
	}
	return f, d
}

// parseConfigDeferring is parseConfig in pieces of chunk bytes, with the
// activities it deferred if deferring (parseChunkedDeferring).
func parseConfigDeferring(src []byte, filename string, chunk int, deferring bool) (*hcl.File, map[*hclsyntax.Body]*deferredBody, hcl.Diagnostics) {
	d, quick := prescanConfigQuick(src, filename)
	if d.HasErrors() {
		return nil, nil, d
	}
	var f *hcl.File
	var def map[*hclsyntax.Body]*deferredBody
	if quick && len(src) > chunk {
		f, def, _ = parseChunkedDeferring(src, filename, chunk, deferring)
	}
	if f == nil {
		f, d = hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	}
	if f != nil {
		guardFile(f)
	}
	return f, def, d
}

// staticVars is the variable scope of what is evaluated after the locals
// (activities and retry_if keep it for run time), built once.
func (l *loader) staticVars() map[string]cty.Value {
	if l.staticCache == nil {
		l.staticCache = map[string]cty.Value{
			"var":   cty.ObjectVal(l.varVals),
			"local": cty.ObjectVal(l.localVals),
		}
	}
	return l.staticCache
}

// scopedVars is the variable scope of one load-time expression: only the
// variables and locals it refers to. Building the whole scope for each of
// 100,000 locals would take quadratic time.
func (l *loader) scopedVars(expr hcl.Expression) map[string]cty.Value {
	vars, locals := map[string]cty.Value{}, map[string]cty.Value{}
	for _, t := range expr.Variables() {
		name, named := traversalName(t)
		if !named {
			continue
		}
		switch t.RootName() {
		case "var":
			if v, ok := l.varVals[name]; ok {
				vars[name] = v
			}
		case "local":
			if v, ok := l.localVals[name]; ok {
				locals[name] = v
			}
		}
	}
	return map[string]cty.Value{"var": cty.ObjectVal(vars), "local": cty.ObjectVal(locals)}
}

// evalLoad evaluates a load-time expression under the load budget.
func (l *loader) evalLoad(expr hcl.Expression) (cty.Value, hcl.Diagnostics) {
	return evaluate(expr, &hcl.EvalContext{Variables: l.scopedVars(expr), Functions: l.funcs}, l.budget)
}

// duplicate reports a second declaration of name, pointing at the first.
func (l *loader) duplicate(kind, name string, at, first hcl.Range) {
	article := "A"
	if strings.ContainsRune("aeiou", rune(kind[0])) {
		article = "An"
	}
	l.errorf(at.Ptr(), "Duplicate "+kind,
		"%s %s named %q was already declared at %s. Names must be unique.", article, kind, name, first.String())
}
