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
	Activity string
	// Generation and Number identify the attempt.
	Generation     int
	Number         int
	IdempotencyKey string
	Spec           *config.Resolved
	Timeout        time.Duration
	// HeartbeatTimeout is the activity's heartbeat_timeout (0: none): the
	// attempt is killed, with error type heartbeat_timeout, when it goes
	// that long without writing to $WF_HEARTBEAT_FILE.
	HeartbeatTimeout time.Duration
	// HeartbeatDetails is what an earlier attempt last wrote there, for
	// $WF_HEARTBEAT_DETAILS.
	HeartbeatDetails string
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
	// Interrupted is set when the engine cut the attempt short (a second
	// Ctrl-C, the end of the grace period, a failed commit): the attempt
	// is recorded interrupted and never ends the activity (SPEC §4.1).
	// A failure of type "interrupted" that the activity reported itself
	// (in its error file) is an ordinary failure.
	Interrupted bool
	// HeartbeatDetails is the last non-empty content the attempt wrote
	// to $WF_HEARTBEAT_FILE ("" if none); the next attempt gets it.
	HeartbeatDetails string
	// Printed, when Known, is what decoding Outputs' stdout, stderr and
	// body gives, as the runner knew it: the core then does not decode
	// Outputs again to find what the attempt printed (a few µs an http
	// attempt).
	Printed Printed
}

// Printed is what an attempt printed, as its outputs hold it.
type Printed struct {
	Known                bool
	Stdout, Stderr, Body string
}

// Orphan is what the shell found, and did, about an attempt that a
// previous run left running, before the core records it interrupted.
type Orphan struct {
	// Number is the attempt the processes belonged to.
	Number int
	// ProcessGroup is the recorded process group that was still alive
	// and was killed; 0 when it was gone.
	ProcessGroup int
	// Killed lists the processes that were killed.
	Killed []int
	// Survivors lists the processes still alive after SIGKILL and the
	// wait; when set, the activity's next attempt is not started in this
	// run, so that two attempts of it never run at once.
	Survivors []int
	// Err is set when the processes could not be looked for at all; the
	// next attempt is not started either.
	Err string
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
	// OwnActivities hands the records of Activities to the core: it
	// keeps and changes them instead of copying each one, as the shell
	// does, which reads them no more once New has returned. Without it
	// (tests reuse one loaded state for several cores) they are copied.
	OwnActivities bool
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
	// StateID is the identity of the state directory (statefile's
	// Store.ID); idempotency keys are derived from it.
	StateID string
	// Orphans holds, by instance address then activity name, what the
	// shell did about the processes of attempts found running. Optional.
	Orphans map[string]map[string]Orphan
	// BudgetGate, when set, grants retry tokens instead of the budgets'
	// own windows (BudgetState is then unused): the Temporal engine's
	// budgets shared by every instance on the cluster.
	BudgetGate BudgetGate
	// Breakers are the circuit breakers of the configuration, by name;
	// BreakerState their loaded states (a breaker without one is
	// closed).
	Breakers     map[string]retry.Breaker
	BreakerState map[string]*record.Breaker
	// BreakerGate, when set, keeps the breakers' states outside the core
	// and decides every pass (the Temporal engine's breakers shared by
	// every instance on the cluster); BreakerState is then the state last
	// seen, for the views.
	BreakerGate BreakerGate
	// Resolve evaluates an activity's kind block; nil means
	// (*config.Activity).Resolve. Tests replace it.
	Resolve func(a *config.Activity, upstream map[string]cty.Value) (*config.Resolved, hcl.Diagnostics)
}

// BudgetGate grants retry tokens of named budgets kept outside the core.
// Take asks at now for one token from every budget of chain (a budget,
// then its parent, up to the root) at once: all or none. force takes them
// even from full windows (an operator firing a retry by hand). The core
// calls it during a step and waits for its answer.
type BudgetGate interface {
	Take(chain []string, now time.Time, force bool) BudgetGrant
}

// BudgetGrant is a BudgetGate's answer.
type BudgetGrant struct {
	OK bool
	// Refused is the index in the chain of the level that decides a
	// refusal (see retry.AllowChain); NextFree is when it frees a token
	// (zero: never).
	Refused  int
	NextFree time.Time
	// Used is how many retries each level's window holds after the call.
	Used []int
}

// BreakerGate keeps circuit breakers outside the core. Ask asks breaker
// name at now for one pass for an attempt of activity; Done reports how an
// attempt let through with ticket ended; Cancel gives back a pass that was
// not used. The core calls them during a step and waits for the answers.
type BreakerGate interface {
	Ask(name, activity string, now time.Time) BreakerAnswer
	Done(name, activity string, ticket int, o retry.Outcome, now time.Time) BreakerAnswer
	Cancel(name, activity string, ticket int, now time.Time) BreakerAnswer
}

// BreakerAnswer is a BreakerGate's answer: the pass (for Ask) and the
// breaker's state after the call.
type BreakerAnswer struct {
	// OK: the pass is granted, in the epoch Ticket.
	OK     bool
	Ticket int
	// Wait is when to ask again after a refusal; the gate always names
	// one, since a change elsewhere is not told to the core.
	Wait time.Time
	// Circuit is the breaker's state after the call; Trials its trial
	// calls in flight.
	Circuit retry.Circuit
	Trials  int
}

// KeyInput is what an idempotency key is derived from (SPEC §4.2).
type KeyInput struct {
	// StateID is the random identity of the state directory.
	StateID string
	// Workflow, Instance (the instance key) and Activity are names.
	Workflow, Instance, Activity string
	// InstanceCreated is when the instance record was created: it changes
	// when the instance is recreated after `wf state rm`.
	InstanceCreated time.Time
	// Generation is the activity's execution number in the instance.
	Generation int
}

// IdempotencyKey is the key of one execution (generation) of an activity:
// "wf2-" and 32 hex digits of a SHA-256 over the KeyInput fields, each
// length-prefixed so that no two inputs run together. It is computed once,
// when the generation starts, and kept in the activity record: stable
// across attempts, crashes, resumes, moves and copies of the state;
// distinct per state directory, workflow, instance key, activity and
// generation; new after `wf state rm` of the instance.
func IdempotencyKey(in KeyInput) string {
	// The parts are written into one buffer and hashed at once (the same
	// digest as writing them to a hash one by one): no hash state, part
	// strings or hex string to allocate, only the key itself. Every new
	// generation computes one (10,000 of them in a plan of 10,000
	// activities).
	var buf [192]byte
	var num [20]byte
	b := buf[:0]
	for _, part := range []string{in.StateID, in.Workflow, in.Instance, in.Activity} {
		b = appendKeyPart(b, part)
	}
	b = appendKeyPart(b, string(strconv.AppendInt(num[:0], in.InstanceCreated.UnixNano(), 10)))
	b = appendKeyPart(b, string(strconv.AppendInt(num[:0], int64(in.Generation), 10)))
	sum := sha256.Sum256(b)
	var key [4 + 32]byte
	copy(key[:], "wf2-")
	hex.Encode(key[4:], sum[:16])
	return string(key[:])
}

// appendKeyPart appends one length-prefixed part of an idempotency key's
// input: "LEN:PART;".
func appendKeyPart(b []byte, part string) []byte {
	b = strconv.AppendInt(b, int64(len(part)), 10)
	b = append(b, ':')
	b = append(b, part...)
	return append(b, ';')
}
