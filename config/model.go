// Package config loads a directory of *.wf.hcl files, evaluates everything
// that is known before a run (variables, locals, policies, budgets, workflow
// keys) and keeps each activity's kind block as expressions that are
// resolved later, once the outputs of its upstream activities are known.
package config

import (
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/retry"
)

// Kind is an activity kind: exactly one kind block per activity.
type Kind string

const (
	KindExec  Kind = "exec"
	KindHTTP  Kind = "http"
	KindSleep Kind = "sleep"
)

// Config is a loaded, validated configuration directory.
type Config struct {
	// Dir is the absolute path of the configuration directory.
	Dir string
	// Sources holds the bytes of every file read (config and variable
	// files), keyed by the filename used in diagnostics, so that
	// diagnostics can print the offending source line.
	Sources map[string][]byte
	// Variables are the final variable values after defaults, WF_VAR_*,
	// *.auto.wfvars, -var-file and -var.
	Variables map[string]cty.Value
	Locals    map[string]cty.Value
	Policies  map[string]*Policy
	Budgets   map[string]*Budget
	// Breakers are the circuit_breaker blocks by name (gates.go).
	Breakers map[string]*Breaker
	// Workflows in file then declaration order.
	Workflows []*Workflow
	// Sensitive lists the values of the sensitive variables (their string
	// leaves), longest first: wf removes them from everything activities
	// print before it is stored or shown (see Redactor).
	Sensitive []string
	// Hash identifies the configuration's content and variable values; a
	// saved plan records it to detect staleness.
	Hash string
}

// Policy is a top-level retry_policy block.
type Policy struct {
	Name      string
	Rule      retry.Rule // Rule.On is always empty for a named policy
	DeclRange hcl.Range
}

// Budget is a top-level retry_budget block.
type Budget struct {
	retry.Budget
	DeclRange hcl.Range
}

// Workflow is a workflow block with its evaluated instance key.
type Workflow struct {
	Name string
	// Key is the evaluated instance key ("default" when not set).
	Key string
	// Activities in declaration order: the blocks as declared; an activity
	// with for_each stands for all its elements (Activity.Elements).
	Activities []*Activity
	// Outputs are the workflow's output blocks, in declaration order.
	Outputs []*Output
	// Moved are the workflow's moved blocks, in declaration order.
	Moved     []Moved
	DeclRange hcl.Range
	// Sensitive is the configuration's Sensitive, for whoever has only
	// the workflow (the executor's core).
	Sensitive []string

	// index finds activities by name; built by the loader (a workflow
	// built by hand is searched in order).
	index map[string]*Activity
}

// Address is "workflow/key", the instance address used by state and CLI.
func (w *Workflow) Address() string { return w.Name + "/" + w.Key }

// Activity returns the declared activity a name stands for: "NAME", or an
// element's name `NAME["KEY"]` (the activity with for_each it belongs to),
// or nil.
func (w *Workflow) Activity(name string) *Activity {
	if i := strings.IndexByte(name, '['); i > 0 {
		name = name[:i]
	}
	if w.index != nil {
		return w.index[name]
	}
	for _, a := range w.Activities {
		if a.Name == name {
			return a
		}
	}
	return nil
}

// Activity is one activity block. Its kind block stays unevaluated until
// Resolve, because it may reference upstream outputs.
type Activity struct {
	Name     string
	Workflow string
	Kind     Kind
	// Timeout bounds one attempt (start-to-close); 0 means none.
	Timeout time.Duration
	// HeartbeatTimeout is the longest an exec attempt may go without
	// writing to $WF_HEARTBEAT_FILE before it is killed (SPEC §11); 0
	// means it need not heartbeat.
	HeartbeatTimeout time.Duration
	// TaskQueue routes the activity's attempts to the Temporal workers of
	// that queue (SPEC §12); "" is the run's queue. The local engine
	// ignores it.
	TaskQueue string
	// Rules are the ordered retry rules; empty means exactly one attempt.
	Rules []retry.Rule
	// RuleRanges are the source ranges of the retry blocks, parallel to Rules.
	RuleRanges []hcl.Range
	// DependsOn lists every upstream activity: explicit depends_on plus every
	// activity.NAME referenced by the activity's expressions; sorted, unique.
	DependsOn []string
	// ResolveDeps lists the upstream activities whose outputs the kind
	// block refers to: all that Resolve needs in its upstream map (a
	// depends_on alone orders, it passes no data). Sorted, unique, a
	// subset of DependsOn.
	ResolveDeps []string
	// DependsOnRanges gives, parallel to DependsOn, the range of the first
	// reference or depends_on entry of each upstream (for cycle
	// diagnostics); see DependsOnRange. A slice, not a map: a map of one
	// range costs about 1 KB, a tenth of what an activity may cost.
	DependsOnRanges []hcl.Range
	DeclRange       hcl.Range
	// ForEach is set on an activity with for_each: one element per key
	// (foreach.go). Its elements are Activities of their own, made by
	// Element, with Block, Key and the element's each in scope.
	ForEach *ForEach
	// Block is the name of the activity as declared: Name itself, or for
	// an element `NAME["KEY"]`, NAME.
	Block string
	// Key is an element's key; IsElement tells "" from no key.
	Key       string
	IsElement bool
	// maxResponseBytes is an http activity's max_response_bytes when it is
	// known at load time (0: the default, or known only at run time). An
	// int32 beside IsElement (it is at most MaxMaxResponseBytes, 64 MiB):
	// an Activity of 384 bytes, not 392 (allocated as 416).
	maxResponseBytes int32
	// TriggerRule says which endings of the upstream activities let this
	// one run (trigger.go).
	TriggerRule TriggerRule
	// When, when set, runs the activity only if it is true (trigger.go).
	When *Condition

	// each is an element's each object (key, value); cty.NilVal otherwise.
	each cty.Value

	// resolver evaluates the kind block; set by the loader.
	resolver resolver
}

type resolver interface {
	resolve(a *Activity, upstream map[string]cty.Value) (*Resolved, hcl.Diagnostics)
}

// DependsOnRange returns the range of a's first reference to upstream dep.
func (a *Activity) DependsOnRange(dep string) (hcl.Range, bool) {
	i, found := slices.BinarySearch(a.DependsOn, dep)
	if !found || i >= len(a.DependsOnRanges) {
		return hcl.Range{}, false
	}
	return a.DependsOnRanges[i], true
}

// Resolve evaluates the activity's kind block. upstream maps each upstream
// activity name to its outputs object (see OutputsValue); a missing entry is
// treated as unknown, which makes the result incomplete and is reported as
// an error diagnostic. The result of a block of literals is the same value
// on every call: read it, never modify it.
func (a *Activity) Resolve(upstream map[string]cty.Value) (*Resolved, hcl.Diagnostics) {
	return a.resolver.resolve(a, upstream)
}

// Resolved is an activity's kind block with every expression evaluated.
// Exactly one of Exec, HTTP, Sleep is set.
type Resolved struct {
	Exec  *ExecSpec  `json:"exec,omitempty"`
	HTTP  *HTTPSpec  `json:"http,omitempty"`
	Sleep *SleepSpec `json:"sleep,omitempty"`
	// Sensitive lists the values in the block that must never be shown:
	// those derived from sensitive variables, and the values of query
	// parameters and headers named like secrets. Not part of the
	// definition (nor of its hash): Redactor removes them from what the
	// activity prints.
	Sensitive []string `json:"-"`
}

// ExecSpec runs a process: Command as argv, or Script through /bin/sh -c.
type ExecSpec struct {
	Command []string          `json:"command,omitempty"`
	Script  string            `json:"script,omitempty"`
	Env     map[string]string `json:"env,omitempty"`
	// Dir is absolute: the config directory unless `dir` says otherwise.
	// It is where the process runs, and is left out of the definition hash:
	// the configuration must keep its identity when its directory is moved,
	// cloned or reached through a symlink (SPEC §4.2).
	Dir string `json:"dir"`
	// WrittenDir is `dir` as written in the configuration, cleaned: relative
	// to the configuration directory (default ".") unless written absolute.
	// The definition hash covers this one instead of Dir.
	WrittenDir string `json:"-"`
}

// HTTPSpec is one HTTP request.
type HTTPSpec struct {
	URL     string            `json:"url"`
	Method  string            `json:"method"` // default GET
	Headers map[string]string `json:"headers,omitempty"`
	Body    string            `json:"body,omitempty"`
	// ExpectStatus lists the accepted statuses; empty means any 2xx.
	ExpectStatus       []int `json:"expect_status,omitempty"`
	InsecureSkipVerify bool  `json:"insecure_skip_verify,omitempty"`
	// MaxResponseBytes caps the response body kept as the body output; 0
	// (not set) means DefaultMaxResponseBytes. Left out of the encoding
	// when not set, so that definitions written before it existed keep
	// their hash.
	MaxResponseBytes int64 `json:"max_response_bytes,omitempty"`
}

// Limits of max_response_bytes.
const (
	DefaultMaxResponseBytes int64 = 1 << 20
	// MaxMaxResponseBytes bounds what a configuration may ask for: the body
	// is held in memory and stored in the state with every attempt.
	MaxMaxResponseBytes int64 = 64 << 20
)

// Activity.maxResponseBytes holds it in an int32: this does not compile
// if it no longer fits.
const _ = int32(MaxMaxResponseBytes)

// SleepSpec is a durable sleep.
type SleepSpec struct {
	Duration time.Duration `json:"duration"`
}
