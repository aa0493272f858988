package temporal

import (
	"reflect"
	"testing"
	"time"

	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/wf-engine/wf/retry"
)

type updateResult struct {
	res TakeResult
	err error
	set bool
}

type updateCallbacks struct{ r *updateResult }

func (u updateCallbacks) Accept()          {}
func (u updateCallbacks) Reject(err error) { u.r.err, u.r.set = err, true }
func (u updateCallbacks) Complete(v any, err error) {
	u.r.set, u.r.err = true, err
	if res, ok := v.(TakeResult); ok {
		u.r.res = res
	}
}

// TestBudgetWorkflow: the budget workflow grants max_retries tokens per
// sliding window on its own clock, names when the window frees, lets a
// forced take through, and ends once its window is empty and idle.
func TestBudgetWorkflow(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger())
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(t0)
	env.RegisterWorkflowWithOptions(BudgetWorkflow, workflow.RegisterOptions{Name: BudgetWorkflowType})
	b := retry.Budget{Name: "b", MaxRetries: 2, Window: 10 * time.Second, OnExhausted: "wait"}
	type step struct {
		at    time.Duration
		force bool
		want  TakeResult
	}
	steps := []step{
		{at: time.Second, want: TakeResult{OK: true, Used: 1}},
		{at: 2 * time.Second, want: TakeResult{OK: true, Used: 2}},
		{at: 3 * time.Second, want: TakeResult{NextFree: t0.Add(11 * time.Second), Used: 2}},
		{at: 4 * time.Second, force: true, want: TakeResult{OK: true, Used: 3}},
		{at: 13 * time.Second, want: TakeResult{OK: true, Used: 2}},
		{at: 13*time.Second + 500*time.Millisecond, want: TakeResult{NextFree: t0.Add(14 * time.Second), Used: 2}},
		{at: 14*time.Second + time.Millisecond, want: TakeResult{OK: true, Used: 2}},
	}
	got := make([]updateResult, len(steps))
	for i, st := range steps {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(BudgetTakeUpdate, "take-"+string(rune('a'+i)), updateCallbacks{&got[i]}, TakeRequest{Budget: b, Force: st.force})
		}, st.at)
	}
	env.ExecuteWorkflow(BudgetWorkflowType, BudgetInput{Name: "b"})
	if !env.IsWorkflowCompleted() {
		t.Fatal("the budget workflow did not end once idle")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("budget workflow: %v", err)
	}
	for i, st := range steps {
		if !got[i].set || got[i].err != nil || !reflect.DeepEqual(got[i].res, st.want) {
			t.Errorf("take %d at +%s = %+v (err %v), want %+v", i+1, st.at, got[i].res, got[i].err, st.want)
		}
	}
}

// TestBudgetWorkflowChain: one workflow holds a budget tree; a take grants
// a token at every level of its chain or at none, and a refusal names the
// level that refused.
func TestBudgetWorkflowChain(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	s.SetLogger(quietLogger())
	env := s.NewTestWorkflowEnvironment()
	env.SetStartTime(t0)
	env.RegisterWorkflowWithOptions(BudgetWorkflow, workflow.RegisterOptions{Name: BudgetWorkflowType})
	org := retry.Budget{Name: "org", MaxRetries: 2, Window: 10 * time.Second, OnExhausted: "wait"}
	a := retry.Budget{Name: "team_a", MaxRetries: 5, Window: 10 * time.Second, OnExhausted: "wait", Parent: "org"}
	b := retry.Budget{Name: "team_b", MaxRetries: 5, Window: 10 * time.Second, OnExhausted: "wait", Parent: "org"}
	steps := []struct {
		at   time.Duration
		req  TakeRequest
		want TakeResult
	}{
		{time.Second, TakeRequest{Budget: a, Parents: []retry.Budget{org}}, TakeResult{OK: true, Used: 1, ParentsUsed: []int{1}}},
		{2 * time.Second, TakeRequest{Budget: b, Parents: []retry.Budget{org}}, TakeResult{OK: true, Used: 1, ParentsUsed: []int{2}}},
		// org is full: team_a has room but gets nothing.
		{3 * time.Second, TakeRequest{Budget: a, Parents: []retry.Budget{org}}, TakeResult{NextFree: t0.Add(11 * time.Second), Refused: 1, Used: 1, ParentsUsed: []int{2}}},
		{3 * time.Second, TakeRequest{Budget: org}, TakeResult{NextFree: t0.Add(11 * time.Second), Used: 2}},
	}
	got := make([]updateResult, len(steps))
	for i, st := range steps {
		env.RegisterDelayedCallback(func() {
			env.UpdateWorkflow(BudgetTakeUpdate, "chain-"+string(rune('a'+i)), updateCallbacks{&got[i]}, st.req)
		}, st.at+time.Duration(i)*time.Millisecond)
	}
	env.ExecuteWorkflow(BudgetWorkflowType, BudgetInput{Name: "org"})
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("budget workflow: %v", err)
	}
	for i, st := range steps {
		if !got[i].set || got[i].err != nil || !reflect.DeepEqual(got[i].res, st.want) {
			t.Errorf("take %d = %+v (err %v), want %+v", i+1, got[i].res, got[i].err, st.want)
		}
	}
}
