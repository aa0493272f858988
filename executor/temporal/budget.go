package temporal

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdktemporal "go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/wf-engine/wf/retry"
)

// Cluster-wide retry budgets: one small workflow per budget holds its
// sliding window, and every instance asks it for each retry token, so that
// a budget's max_retries holds across every instance and worker.
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

// BudgetWorkflowID is the workflow ID of a budget.
func BudgetWorkflowID(name string) string { return "wf-budget/" + name }

// BudgetInput is the input of a budget workflow: its window so far.
type BudgetInput struct {
	Name   string      `json:"name"`
	Stamps []time.Time `json:"stamps,omitempty"`
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
}

// BudgetWorkflow holds one budget's sliding window and answers takes. It
// continues as new after budgetTakesPerRun takes (or when Temporal
// suggests it), once no take is being answered, carrying the stamps still
// in the window; with no stamp left in the window and no take for a whole
// window it ends, and the next take starts it again.
func BudgetWorkflow(ctx workflow.Context, in BudgetInput) error {
	stamps := in.Stamps
	var cfg retry.Budget
	takes := 0
	err := workflow.SetUpdateHandler(ctx, BudgetTakeUpdate, func(ctx workflow.Context, req TakeRequest) (TakeResult, error) {
		now := workflow.Now(ctx)
		cfg = req.Budget
		stamps = cfg.Prune(stamps, now)
		takes++
		ok, next := cfg.Allow(stamps, now)
		if ok || req.Force {
			stamps = append(stamps, now)
			return TakeResult{OK: true, Used: len(stamps)}, nil
		}
		return TakeResult{NextFree: next, Used: len(stamps)}, nil
	})
	if err != nil {
		return fmt.Errorf("register %s update: %w", BudgetTakeUpdate, err)
	}
	for {
		seen := takes
		idle := max(cfg.Window, time.Minute)
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
			return workflow.NewContinueAsNewError(ctx, BudgetWorkflowType, BudgetInput{
				Name: in.Name, Stamps: cfg.Prune(stamps, workflow.Now(ctx)), Takes: in.Takes + takes,
			})
		}
		if takes == seen && len(cfg.Prune(stamps, workflow.Now(ctx))) == 0 {
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
		op := c.NewWithStartWorkflowOperation(client.StartWorkflowOptions{
			ID:                       BudgetWorkflowID(req.Budget.Name),
			TaskQueue:                BudgetQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
			StaticSummary:            "wf retry budget " + req.Budget.Name,
		}, BudgetWorkflowType, BudgetInput{Name: req.Budget.Name})
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

func (g *budgetGate) Take(name string, now time.Time, force bool) (bool, time.Time, int) {
	ctx := g.ip.ctx
	info := workflow.GetInfo(ctx)
	g.seq++
	req := TakeRequest{
		ID:     fmt.Sprintf("%s/%s/%d", info.WorkflowExecution.ID, info.WorkflowExecution.RunID, g.seq),
		Budget: g.budgets[name],
		Force:  force,
		Now:    now,
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
		return false, now.Add(time.Second), 0
	}
	return res.OK, res.NextFree, res.Used
}
