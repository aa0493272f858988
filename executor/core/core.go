// Package core is the deterministic heart of the executor: a pure state
// machine that the shell (package executor) feeds with one input at a time
// and the current time. Each call returns a Ready: what to persist, what to
// start, what to publish and when to wake up next.
//
// The core performs no I/O, reads no clock, starts no goroutines and draws
// randomness only from the retry.Rand it is given, so the same inputs always
// produce the same sequence of Ready values. That is what makes crash
// recovery ("load state, feed now") and fake-clock tests trustworthy.
package core

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config"
	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/retry"
	"github.com/wf-engine/wf/statefile/record"
)

// Ready is what one step of the core asks the shell to do, in order:
// commit Persist (one synced transaction), then publish Events and start
// the Start attempts, then arm a timer for Wake.
type Ready struct {
	// Persist must be committed before anything below is acted on.
	Persist []record.Mutation
	// Start lists the exec and http attempts to start now.
	Start []Attempt
	// Events are published after the commit.
	Events []event.Event
	// Wake is the earliest pending timer; zero if none.
	Wake time.Time
	// Done is set when nothing runs and nothing more will happen in this run.
	Done bool
	// Status is set with Done: "succeeded", "failed" or "interrupted".
	Status string
}

// Attempt is one exec or http attempt the shell must run.
type Attempt struct {
	Workflow string
	// Instance is the instance key (not the address).
	Instance string
	// Activity is the bare activity name.
	Activity       string
	Number         int
	IdempotencyKey string
	Spec           *config.Resolved
	Timeout        time.Duration
}

// Result is a finished attempt, as reported by the shell.
type Result struct {
	Workflow string
	// Instance is the instance key (not the address).
	Instance string
	Activity string
	Number   int
	Start    time.Time
	End      time.Time
	Outputs  json.RawMessage
	// Failure is nil when the attempt succeeded.
	Failure *retry.Failure
}

// Mode is what a run does with one activity; the planner decides it.
type Mode int

const (
	// ModeSkip ("=") does not run the activity: its outputs come from state.
	ModeSkip Mode = iota
	// ModeFresh (+ ~ !) starts a new generation from attempt 1.
	ModeFresh
	// ModeResume (>) continues the current generation where it stopped.
	ModeResume
)

// String returns the mode's name.
func (m Mode) String() string {
	switch m {
	case ModeSkip:
		return "skip"
	case ModeFresh:
		return "fresh"
	case ModeResume:
		return "resume"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// Instance is one workflow instance in a run and the mode of each of its
// activities. An activity missing from Modes gets the mode its state
// implies: ModeFresh without state or after a failure, ModeSkip when it
// succeeded, ModeResume otherwise.
type Instance struct {
	Workflow *config.Workflow
	Modes    map[string]Mode
}

// Options configures a Core.
type Options struct {
	Instances []Instance
	// Budgets are the retry budgets of the configuration, by name.
	Budgets map[string]retry.Budget
	// Parallelism caps the exec and http attempts running at once; sleeps
	// do not count. Zero or less means no cap.
	Parallelism int
	// Rand, when set, is the one random source of every retry decision.
	// When nil, each decision draws from JitterRand(Seed, ...) of the
	// attempt that failed, which does not depend on the order of failures.
	Rand retry.Rand
	// Seed seeds the per-decision jitter sources when Rand is nil: the
	// state's identity, so that both engines and every replay draw alike.
	Seed string
	// Activities is the loaded state: by instance address "wf/key", then by
	// activity name.
	Activities map[string]map[string]*record.Activity
	// BudgetState is the loaded sliding window of each budget, by name.
	BudgetState map[string]*record.Budget
	// Running holds, by instance address then activity name, the attempt
	// records of activities whose state says an attempt is running, so that
	// recovery can record the interrupted attempt with its real start.
	// Optional: without it the start is FirstStart for attempt 1, else now.
	Running map[string]map[string]*record.Attempt
	// InstanceState holds the stored instance records by address, so that
	// their creation time survives a resume. Optional.
	InstanceState map[string]*record.Instance
	// BudgetGate, when set, grants retry tokens instead of the budgets'
	// own windows (BudgetState is then unused): the Temporal engine's
	// budgets shared by every instance on the cluster.
	BudgetGate BudgetGate
	// Resolve evaluates an activity's kind block; nil means
	// (*config.Activity).Resolve. Tests replace it.
	Resolve func(a *config.Activity, upstream map[string]cty.Value) (*config.Resolved, hcl.Diagnostics)
}

// BudgetGate grants retry tokens of named budgets. Take asks for one token
// at now; force takes it even when the window is full (an operator firing
// a retry by hand). It returns whether the token was granted, when not the
// time the window next frees one (zero: never), and how many retries the
// window holds after the call. The core calls it during a step and waits
// for its answer.
type BudgetGate interface {
	Take(name string, now time.Time, force bool) (ok bool, nextFree time.Time, used int)
}

// IdempotencyKey is the key of one execution (generation) of an activity:
// stable across attempts, crashes and resumes, distinct per workflow,
// instance key, activity and generation.
func IdempotencyKey(workflow, key, activity string, generation int) string {
	sum := sha256.Sum256([]byte(workflow + "\x00" + key + "\x00" + activity + "\x00" + strconv.Itoa(generation)))
	return "wf1-" + hex.EncodeToString(sum[:])[:32]
}
