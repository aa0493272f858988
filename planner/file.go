package planner

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// planFormatVersion is the version of the plan file layout; a file with
// another version is refused rather than misread.
const planFormatVersion = 1

// planFileTool marks a JSON file as a wf plan.
const planFileTool = "wf-plan"

// ErrStale is wrapped by CheckStale's errors.
var ErrStale = errors.New("saved plan is stale")

// LoadInputs is what `wf apply PLANFILE` needs to load the configuration
// again exactly as `wf plan -out` did.
type LoadInputs struct {
	Dir      string   `json:"dir"`
	Vars     []string `json:"vars,omitempty"`
	VarFiles []string `json:"var_files,omitempty"`
	// Env holds the WF_VAR_* variables captured at plan time.
	Env      map[string]string `json:"env,omitempty"`
	Workflow string            `json:"workflow,omitempty"`
	Replace  []string          `json:"replace,omitempty"`
	// Engine is "temporal" for a plan made with -engine temporal (empty:
	// the local engine), and Namespace the Temporal namespace it was made
	// against: a plan is applied by the engine it was made for.
	Engine    string `json:"engine,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

type planFile struct {
	Tool          string     `json:"tool"`
	FormatVersion int        `json:"format_version"`
	Plan          *Plan      `json:"plan"`
	Load          LoadInputs `json:"load"`
}

// WriteFile saves a plan and the inputs needed to reproduce it. The file
// is written to a temporary name and renamed, so a crash never leaves half
// a plan; it is private to the user because captured variables may be
// secrets.
func WriteFile(path string, p *Plan, load LoadInputs) error {
	b, err := json.MarshalIndent(planFile{Tool: planFileTool, FormatVersion: planFormatVersion, Plan: p, Load: load}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode plan: %w", err)
	}
	b = append(b, '\n')
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return fmt.Errorf("write plan file: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op once renamed
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("write plan file %s: %w", path, err)
	}
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write plan file %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write plan file %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write plan file %s: %w", path, err)
	}
	return nil
}

// ReadFile reads a plan saved by WriteFile.
func ReadFile(path string) (*Plan, LoadInputs, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, LoadInputs{}, fmt.Errorf("read plan file: %w", err)
	}
	var f planFile
	if err := json.Unmarshal(b, &f); err != nil || f.Tool != planFileTool {
		return nil, LoadInputs{}, fmt.Errorf("read plan file %s: not a wf plan file (create one with wf plan -out)", path)
	}
	if f.FormatVersion != planFormatVersion {
		return nil, LoadInputs{}, fmt.Errorf("read plan file %s: format version %d, this wf reads version %d; run wf plan -out again",
			path, f.FormatVersion, planFormatVersion)
	}
	if f.Plan == nil {
		return nil, LoadInputs{}, fmt.Errorf("read plan file %s: the file holds no plan", path)
	}
	return f.Plan, f.Load, nil
}

// CheckStale compares a saved plan with one built now from the same inputs
// and reports, wrapping ErrStale, when the configuration or the state of an
// instance changed in between: applying the saved plan would then do
// something other than what was reviewed.
func CheckStale(saved, fresh *Plan) error {
	if saved.ConfigHash != fresh.ConfigHash {
		return fmt.Errorf("%w: configuration changed since it was created", ErrStale)
	}
	savedHash := make(map[string]string, len(saved.Instances))
	for _, ip := range saved.Instances {
		savedHash[ip.Address()] = ip.StateHash
	}
	seen := make(map[string]bool, len(fresh.Instances))
	for _, ip := range fresh.Instances {
		seen[ip.Address()] = true
		if h, ok := savedHash[ip.Address()]; !ok || h != ip.StateHash {
			return fmt.Errorf("%w: state of %s changed since it was created", ErrStale, ip.Address())
		}
	}
	for _, ip := range saved.Instances {
		if !seen[ip.Address()] {
			return fmt.Errorf("%w: instance %s is no longer planned", ErrStale, ip.Address())
		}
	}
	return nil
}
