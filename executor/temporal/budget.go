package temporal

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wf-engine/wf/executor/core"
	"github.com/wf-engine/wf/retry"
)

// Cluster-wide retry budgets: one small workflow per budget tree (a root
// budget and every budget nested under it) holds their sliding windows,
// and every instance asks it for each retry token, so that a budget's
// max_retries holds across every instance and worker, and a retry takes
// its tokens at every level of a chain in one update.
const (
	// BudgetWorkflowType is the workflow of one budget.
	BudgetWorkflowType = "wf-budget"
	// BudgetTakeUpdate asks a budget workflow for one token.
	BudgetTakeUpdate = "take"
	// BudgetTakeActivity calls BudgetTakeUpdate (update-with-start) from a
	// worker on behalf of an interpreter.
	BudgetTakeActivity = "wf-budget-take"
	// budgetTakesPerRun is how many takes a budget workflow answers before
	// it continues as new: each costs a few history events.
	budgetTakesPerRun = 500
)

// BudgetWorkflowID is the workflow ID of a budget tree, named by its
// root budget.
func BudgetWorkflowID(root string) string { return "wf-budget/" + root }

// BudgetInput is the input of a budget workflow: its windows so far.
type BudgetInput struct {
	// Name is the root budget; Stamps its window.
	Name   string      `json:"name"`
	Stamps []time.Time `json:"stamps,omitempty"`
	// Levels are the windows of the budgets nested under the root.
	Levels map[string][]time.Time `json:"levels,omitempty"`
	// Takes counts the takes answered by earlier runs.
	Takes int `json:"takes,omitempty"`
}

// TakeRequest asks for one retry token.
type TakeRequest struct {
	// ID identifies the request: a retried request gets the same answer.
	ID string `json:"id"`
	// Budget is the budget as the asking instance's configuration has it;
	// the budget workflow applies the latest one it was sent.
	Budget retry.Budget `json:"budget"`
	// Parents are its ancestors, parent first, up to the root: the token
	// is taken from every level or from none.
	Parents []retry.Budget `json:"parents,omitempty"`
	// Force takes the token even from a full window.
	Force bool `json:"force,omitempty"`
	// Now is the asking instance's time. The budget workflow keeps its
	// window on its own clock and ignores it; an in-memory gate (tests)
	// uses it.
	Now time.Time `json:"now"`
}

// TakeResult is the answer: granted, or when the window next frees a
// token (zero: never), and the retries in the window after the take.
type TakeResult struct {
	OK       bool      `json:"ok"`
	NextFree time.Time `json:"next_free,omitzero"`
	Used     int       `json:"used"`
	// Refused is the level that decided a refusal (0: the budget itself,
	// 1 its parent, ...); ParentsUsed the retries in the parents' windows.
	Refused     int   `json:"refused,omitempty"`
	ParentsUsed []int `json:"parents_used,omitempty"`
}

// chain is the request's budgets, the budget first.
func (r TakeRequest) chain() []retry.Budget {
	return append([]retry.Budget{r.Budget}, r.Parents...)
}

// root names the budget tree the request belongs to.
func (r TakeRequest) root() string {
	if n := len(r.Parents); n > 0 {
		return r.Parents[n-1].Name
	}
	return r.Budget.Name
}

// takeChain is the budget workflow's answer to one take, on windows
// (every level's grant stamps, pruned as it goes).
func takeChain(windows map[string][]time.Time, req TakeRequest, now time.Time) TakeResult {
	chain := req.chain()
	levels := make([]retry.Level, len(chain))
	for i, b := range chain {
		windows[b.Name] = b.Prune(windows[b.Name], now)
		levels[i] = retry.Level{Budget: b, Stamps: windows[b.Name]}
	}
	d := retry.AllowChain(levels, now)
	if d.OK || req.Force {
		for _, b := range chain {
			windows[b.Name] = append(windows[b.Name], now)
		}
	}
	res := TakeResult{OK: d.OK || req.Force}
	if !res.OK {
		res.NextFree, res.Refused = d.NextFree, d.Refused
	}
	for i, b := range chain {
		if i == 0 {
			res.Used = len(windows[b.Name])
		} else {
			res.ParentsUsed = append(res.ParentsUsed, len(windows[b.Name]))
		}
	}
	return res
}

// BudgetWorkflow holds the sliding windows of one budget tree and answers
// takes. It continues as new after budgetTakesPerRun takes (or when
// Temporal suggests it), once no take is being answered, carrying the
// stamps still in the windows; with no stamp left in any window and no
// take for a whole window it ends, and the next take starts it again.
func BudgetWorkflow(ctx workflow.Context, in BudgetInput) error {
	windows := map[string][]time.Time{in.Name: in.Stamps}
	for name, st := range in.Levels {
		windows[name] = st
	}
	cfgs := map[string]retry.Budget{}
	takes := 0
	err := workflow.SetUpdateHandler(ctx, BudgetTakeUpdate, func(ctx workflow.Context, req TakeRequest) (TakeResult, error) {
		for _, b := range req.chain() {
			cfgs[b.Name] = b
		}
		takes++
		return takeChain(windows, req, workflow.Now(ctx)), nil
	})
	if err != nil {
		return fmt.Errorf("register %s update: %w", BudgetTakeUpdate, err)
	}
	// live prunes every window at now and reports whether any holds a
	// stamp; next is the input of the run that continues this one.
	live := func(now time.Time) bool {
		held := false
		for name, st := range windows {
			if b, ok := cfgs[name]; ok {
				st = b.Prune(st, now)
				windows[name] = st
			}
			held = held || len(st) > 0
		}
		return held
	}
	next := func(now time.Time) BudgetInput {
		live(now)
		out := BudgetInput{Name: in.Name, Stamps: windows[in.Name], Takes: in.Takes + takes}
		for _, name := range slices.Sorted(maps.Keys(windows)) {
			if name != in.Name && len(windows[name]) > 0 {
				if out.Levels == nil {
					out.Levels = map[string][]time.Time{}
				}
				out.Levels[name] = windows[name]
			}
		}
		return out
	}
	for {
		seen := takes
		idle := time.Minute
		for _, b := range cfgs {
			idle = max(idle, b.Window)
		}
		due, err := workflow.AwaitWithTimeout(ctx, idle, func() bool {
			return takes >= budgetTakesPerRun || workflow.GetInfo(ctx).GetContinueAsNewSuggested()
		})
		if err != nil {
			return err
		}
		if due {
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			return workflow.NewContinueAsNewError(ctx, BudgetWorkflowType, next(workflow.Now(ctx)))
		}
		if takes == seen && !live(workflow.Now(ctx)) {
			if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
				return err
			}
			return nil
		}
	}
}

// takeBudget is BudgetTakeActivity: an update-with-start of the budget's
// workflow, so that the first take of a budget creates it.
func takeBudget(c client.Client) func(ctx context.Context, req TakeRequest) (TakeResult, error) {
	return func(ctx context.Context, req TakeRequest) (TakeResult, error) {
		root := req.root()
		op := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID:                       BudgetWorkflowID(root),
			TaskQueue:                BudgetQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:            "wf retry budget " + root,
		}, BudgetWorkflowType, BudgetInput{Name: root})
		h, err := c.UpdateWithStartWorkflow(ctx, client.UpdateWithStartWorkflowOptions{
			StartWorkflowOperation: op,
			UpdateOptions: client.UpdateWorkflowOptions{
				UpdateID:     req.ID,
				UpdateName:   BudgetTakeUpdate,
				Args:         []any{req},
				WaitForStage: client.WorkflowUpdateStageCompleted,
			},
		})
		if err != nil {
			return TakeResult{}, fmt.Errorf("take a token of retry budget %s: %w", req.Budget.Name, err)
		}
		var res TakeResult
		if err := h.Get(ctx, &res); err != nil {
			return TakeResult{}, fmt.Errorf("take a token of retry budget %s: %w", req.Budget.Name, err)
		}
		return res, nil
	}
}

// budgetGate is the core's BudgetGate in the interpreter: each take is one
// BudgetTakeActivity, which the core waits for (a workflow may block in
// the middle of a step; Temporal records the activity and replays its
// answer).
type budgetGate struct {
	ip      *interpreter
	budgets map[string]retry.Budget
	seq     int
}

func (g *budgetGate) Take(chain []string, now time.Time, force bool) core.BudgetGrant {
	ctx := g.ip.ctx
	info := workflow.GetInfo(ctx)
	g.seq++
	name := chain[0]
	req := TakeRequest{
		ID:     fmt.Sprintf("%s/%s/%d", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, g.seq),
		Budget: g.budgets[name],
		Force:  force,
		Now:    now,
	}
	for _, p := range chain[1:] {
		req.Parents = append(req.Parents, g.budgets[p])
	}
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           g.ip.in.TaskQueue,
		StartToCloseTimeout: 30 * time.Second,
		// Infrastructure, not an attempt: the request is idempotent, so
		// Temporal may retry it until the budget answers.
		RetryPolicy: &sdktemporal.RetryPolicy{InitialInterval: 200 * time.Millisecond, MaximumInterval: 5 * time.Second},
		Summary:     "wf: retry budget " + name,
	})
	var res TakeResult
	if err := workflow.ExecuteActivity(actx, BudgetTakeActivity, req).Get(ctx, &res); err != nil {
		// Only a cancelled run gets here: wait a moment and ask again.
		return core.BudgetGrant{NextFree: now.Add(time.Second)}
	}
	return core.BudgetGrant{OK: res.OK, Refused: res.Refused, NextFree: res.NextFree, Used: append([]int{res.Used}, res.ParentsUsed...)}
}
