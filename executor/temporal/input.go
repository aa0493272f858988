// Package temporal runs wf's deterministic core on a Temporal cluster: an
// interpreter workflow feeds executor/core with activity results, timer
// firings and workflow.Now and carries out what the core asks, each exec or
// http attempt as one Temporal activity with MaximumAttempts = 1, every wait
// as one Temporal timer for the core's next wake-up. Retries stay wf's own:
// Temporal provides the durable, replicated history and the workers.
//
// The core never imports the SDK; this package is the shell beside the
// local one (package executor), and layering_test.go keeps it that way.
package temporal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// Names registered with Temporal. They are part of the contract between
// wf apply and wf worker: change them only with a new InputFormat.
const (
	// WorkflowType is the interpreter workflow.
	WorkflowType = "wf-interpreter"
	// AttemptActivity runs one exec or http attempt.
	AttemptActivity = "wf-attempt"
	// QueryEvents returns the run's events after a sequence number.
	QueryEvents = "wf.events"
	// QueryState returns the run's records.
	QueryState = "wf.state"
	// SignalFireNow fires a pending retry now (the TUI's r key).
	SignalFireNow = "wf.fire_now"
)

// InputFormat is the version of Input; a worker refuses a newer one.
const InputFormat = 1

// ConfigRoot is the directory the interpreter loads a configuration from.
// The configuration travels in the workflow input, not as paths: every
// worker resolves exec working directories under ConfigRoot against its
// own checkout (the DIR argument of wf worker), so definition hashes never
// depend on where a machine keeps the files.
const ConfigRoot = "/wf-config"

// Defaults of the knobs in Input.
const (
	DefaultTaskQueue = "wf"
	// DefaultHeartbeatTimeout is how soon a dead worker is noticed: an
	// attempt whose worker sent no heartbeat for this long is recorded as
	// interrupted and started again (same idempotency key) on another
	// worker. Workers heartbeat every third of it.
	DefaultHeartbeatTimeout = 5 * time.Second
	// DefaultEventLog is how many events a run keeps for wf apply and wf
	// watch to follow.
	DefaultEventLog = 10000
	// DefaultKeptAttempts bounds the attempt log kept in the workflow: it
	// travels in queries, results and continue-as-new inputs, which
	// Temporal caps (2 MB per payload by default).
	DefaultKeptAttempts = 2000
	// attemptGrace is added to an activity's own timeout to form the
	// start-to-close timeout: the worker enforces the activity's timeout
	// itself (error type "timeout"), so a start-to-close timeout means the
	// worker was lost.
	attemptGrace = 10 * time.Second
	// noTimeout is the start-to-close timeout of an attempt without its
	// own timeout; heartbeats catch lost workers long before.
	noTimeout = 10 * 365 * 24 * time.Hour
)

// Input is the interpreter's input: everything it needs, self-contained and
// serialisable. The configuration is its source files, loaded inside the
// workflow (parsing HCL is pure), so a replay on any worker sees the same
// configuration.
type Input struct {
	Format int `json:"format"`
	// Files maps *.wf.hcl and *.auto.wfvars base names, and the keys listed
	// in VarFiles, to their contents.
	Files map[string][]byte `json:"files"`
	// Vars are -var NAME=VALUE, in command-line order.
	Vars []string `json:"vars,omitempty"`
	// VarFiles are the -var-file contents' keys in Files, in order.
	VarFiles []string `json:"var_files,omitempty"`
	// Env holds the WF_VAR_* environment, "K=V", sorted.
	Env []string `json:"env,omitempty"`
	// Workflow and Key name the instance; Key is checked against the
	// loaded configuration.
	Workflow string `json:"workflow"`
	Key      string `json:"key"`
	// Modes are the planned modes by activity name.
	Modes map[string]core.Mode `json:"modes,omitempty"`
	// Parallelism caps the exec and http attempts of this instance running
	// at once; 10 when zero.
	Parallelism int `json:"parallelism,omitempty"`
	// TaskQueue is where attempts go unless an activity says task_queue.
	TaskQueue string `json:"task_queue,omitempty"`
	// HeartbeatTimeout of each attempt; DefaultHeartbeatTimeout when zero.
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout,omitempty"`
	// StateID is the identity of this instance's state on Temporal: made
	// when an instance starts without records (first apply, or after wf
	// state rm) and carried from run to run. Jitter is seeded from it.
	StateID string `json:"state_id"`
	// Carry is what the previous run left: records to resume from.
	Carry Carry `json:"carry"`
	// HistoryLimit continues the run as new once its history has this many
	// events, besides Temporal's own suggestion; 0 leaves it to Temporal.
	HistoryLimit int `json:"history_limit,omitempty"`
	// EventLog bounds the events kept for followers; DefaultEventLog when 0.
	EventLog int `json:"event_log,omitempty"`
	// SharedBudgets takes every retry token from the budget's workflow
	// (BudgetWorkflow), shared by every instance on the namespace, instead
	// of a window of the instance's own. wf apply sets it.
	SharedBudgets bool `json:"shared_budgets,omitempty"`
	// SharedBreakers asks every circuit breaker's workflow for each pass
	// (BreakerWorkflow), so that a breaker is shared by every instance on
	// the cluster; without it a breaker is the instance's own.
	SharedBreakers bool `json:"shared_breakers,omitempty"`
}

// Carry is the state one run hands the next: the previous apply's records
// (so that the plan's modes can skip or resume) or, after continue-as-new,
// the records of the run that continued.
type Carry struct {
	Instance   *record.Instance            `json:"instance,omitempty"`
	Activities map[string]*record.Activity `json:"activities,omitempty"`
	Budgets    map[string]*record.Budget   `json:"budgets,omitempty"`
	// Breakers are the instance's circuit breakers (see records).
	Breakers map[string]*record.Breaker `json:"breakers,omitempty"`
	// Attempts is the attempt log so far, oldest first (bounded).
	Attempts []*record.Attempt `json:"attempts,omitempty"`
	// DroppedAttempts counts attempts dropped from the log to bound it.
	DroppedAttempts int `json:"dropped_attempts,omitempty"`
	// Continued is set when the run continues an apply as new: the apply
	// goes on, rather than starting.
	Continued bool `json:"continued,omitempty"`
	// For a continued run: the event sequence so far, the last events and
	// the plan event, so followers notice nothing; the totals of the
	// summary so far.
	NextSeq   int64         `json:"next_seq,omitempty"`
	Plan      *event.Event  `json:"plan,omitempty"`
	Events    []event.Event `json:"events,omitempty"`
	Begin     time.Time     `json:"begin,omitzero"`
	Attempts0 int           `json:"attempts_before,omitempty"`
	Retries0  int           `json:"retries_before,omitempty"`
	// Runs counts the runs of this apply before this one.
	Runs int `json:"runs,omitempty"`
}

// WorkflowID is the Temporal workflow ID of an instance (SPEC §12).
func WorkflowID(workflow, key string) string { return "wf/" + workflow + "/" + key }

// ParseWorkflowID splits a workflow ID made by WorkflowID.
func ParseWorkflowID(id string) (workflow, key string, ok bool) {
	rest, ok := strings.CutPrefix(id, "wf/")
	if !ok {
		return "", "", false
	}
	workflow, key, ok = strings.Cut(rest, "/")
	return workflow, key, ok && workflow != "" && key != ""
}

// Sources are the configuration's inputs as an Input carries them.
type Sources struct {
	Files    map[string][]byte
	Vars     []string
	VarFiles []string
	Env      []string
}

// ReadSources reads what config.Load would read for dir and opts: every
// *.wf.hcl and *.auto.wfvars file directly inside dir, the -var-file files,
// the -var values and the WF_VAR_* part of the environment.
func ReadSources(dir string, opts config.LoadOptions) (Sources, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Sources{}, fmt.Errorf("read configuration directory: %w", err)
	}
	s := Sources{Files: map[string][]byte{}, Vars: opts.Vars}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !(strings.HasSuffix(name, config.ConfigSuffix) || strings.HasSuffix(name, config.AutoVarsSuffix)) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return Sources{}, fmt.Errorf("read configuration file: %w", err)
		}
		s.Files[name] = b
	}
	for i, path := range opts.VarFiles {
		b, err := os.ReadFile(path)
		if err != nil {
			return Sources{}, fmt.Errorf("read -var-file: %w", err)
		}
		// A key that can never be a configuration file's base name.
		key := fmt.Sprintf("var-file/%d/%s", i, filepath.Base(path))
		s.Files[key] = b
		s.VarFiles = append(s.VarFiles, key)
	}
	for _, kv := range opts.Env {
		if strings.HasPrefix(kv, "WF_VAR_") {
			s.Env = append(s.Env, kv)
		}
	}
	slices.Sort(s.Env)
	return s, nil
}

// Load loads the configuration the sources describe, rooted at ConfigRoot.
// It is a pure function of the sources: the interpreter calls it in the
// workflow, and wf plan -engine temporal calls it so that its definition
// hashes are the interpreter's.
func (s Sources) Load() (*config.Config, hcl.Diagnostics) {
	return config.LoadFiles(ConfigRoot, s.Files, config.LoadOptions{Vars: s.Vars, VarFiles: s.VarFiles, Env: s.Env, Deterministic: true})
}

// Sources returns the configuration inputs of in.
func (in *Input) Sources() Sources {
	return Sources{Files: in.Files, Vars: in.Vars, VarFiles: in.VarFiles, Env: in.Env}
}

// SetSources copies s into in.
func (in *Input) SetSources(s Sources) {
	in.Files, in.Vars, in.VarFiles, in.Env = s.Files, s.Vars, s.VarFiles, s.Env
}

// load loads the input's configuration and finds its workflow.
func (in *Input) load() (*config.Config, *config.Workflow, error) {
	if in.Format > InputFormat {
		return nil, nil, fmt.Errorf("input format %d is newer than this worker understands (%d): upgrade wf on the workers", in.Format, InputFormat)
	}
	cfg, diags := in.Sources().Load()
	if diags.HasErrors() {
		return nil, nil, fmt.Errorf("configuration: %s", diagSummary(diags))
	}
	for _, wf := range cfg.Workflows {
		if wf.Name != in.Workflow {
			continue
		}
		if wf.Key != in.Key {
			return nil, nil, fmt.Errorf("workflow %s has key %q in this configuration, not %q", wf.Name, wf.Key, in.Key)
		}
		return cfg, wf, nil
	}
	return nil, nil, fmt.Errorf("no workflow %q in the configuration", in.Workflow)
}

func diagSummary(diags hcl.Diagnostics) string {
	var parts []string
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			s := d.Summary
			if d.Detail != "" {
				s += ": " + d.Detail
			}
			if d.Subject != nil {
				s = d.Subject.String() + ": " + s
			}
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		return "invalid"
	}
	return strings.Join(parts, "; ")
}

// WorkerDir maps a working directory of the interpreter's configuration
// (under ConfigRoot) onto a worker's checkout in dir. Absolute directories
// written in the configuration stay as they are.
func WorkerDir(specDir, dir string) string {
	if specDir == ConfigRoot {
		return dir
	}
	if rel, ok := strings.CutPrefix(specDir, ConfigRoot+"/"); ok {
		return filepath.Join(dir, filepath.FromSlash(rel))
	}
	return specDir
}

// errBadInput marks an input the interpreter cannot run.
var errBadInput = errors.New("wf: bad workflow input")
