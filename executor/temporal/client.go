package temporal

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	sdklog "go.temporal.io/sdk/log"

	"github.com/wf-engine/wf/executor/event"
)

// ClientOptions says which Temporal service to talk to.
type ClientOptions struct {
	// Address is HOST:PORT of the frontend; 127.0.0.1:7233 when empty.
	Address string
	// Namespace is "default" when empty.
	Namespace string
	// Security is plain gRPC when zero.
	Security Security
	// Logger receives the SDK's log lines; none when nil.
	Logger sdklog.Logger
}

// DefaultAddress and DefaultNamespace are SPEC §12's defaults.
const (
	DefaultAddress   = "127.0.0.1:7233"
	DefaultNamespace = "default"
)

// Client is what the wf commands do with Temporal: start and follow
// instances, read their records, list and remove them.
type Client struct {
	SDK       client.Client
	address   string
	namespace string
	// Poll is how often Follow asks for new events; 100ms when zero.
	Poll time.Duration
}

// Dial connects to Temporal. Its error names the address and says what
// went wrong in one line.
func Dial(ctx context.Context, opts ClientOptions) (*Client, error) {
	addr := orDefault(opts.Address, DefaultAddress)
	ns := orDefault(opts.Namespace, DefaultNamespace)
	logger := opts.Logger
	if logger == nil {
		logger = QuietLogger()
	}
	conn, creds, err := opts.Security.connection()
	if err != nil {
		return nil, err
	}
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := client.DialContext(dctx, client.Options{HostPort: addr, Namespace: ns, Logger: logger, ConnectionOptions: conn, Credentials: creds})
	if err != nil {
		return nil, fmt.Errorf("cannot reach Temporal at %s%s: %s", addr, opts.Security.over(), opts.Security.explain(shortError(err)))
	}
	cl := &Client{SDK: c, address: addr, namespace: ns}
	// The dial checks the service, not the namespace: a wrong namespace
	// would otherwise surface later as a confusing "not found".
	if _, err := c.WorkflowService().DescribeNamespace(dctx, describeNamespace(ns)); err != nil {
		c.Close()
		var nf *serviceerror.NamespaceNotFound
		if errors.As(err, &nf) {
			return nil, fmt.Errorf("Temporal at %s has no namespace %q (create it, or pass -namespace)", addr, ns)
		}
		return nil, fmt.Errorf("Temporal at %s: namespace %s: %s", addr, ns, shortError(err))
	}
	return cl, nil
}

// Close closes the connection.
func (c *Client) Close() { c.SDK.Close() }

// Address is the frontend the client talks to.
func (c *Client) Address() string { return c.address }

// Namespace is the client's namespace.
func (c *Client) Namespace() string { return c.namespace }

// WarnLogger writes the SDK's warnings and errors to w: what a worker's
// operator needs to see (a workflow task that panics, a lost connection).
// A failed attempt is not one of them: wf reports every attempt itself,
// so the SDK's "Activity error." lines are left out.
func WarnLogger(w io.Writer) sdklog.Logger {
	h := slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})
	return sdklog.NewStructuredLogger(slog.New(dropHandler{h, "Activity error."}))
}

// dropHandler drops the records with one message.
type dropHandler struct {
	slog.Handler
	msg string
}

func (d dropHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == d.msg {
		return nil
	}
	return d.Handler.Handle(ctx, r)
}

func (d dropHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return dropHandler{d.Handler.WithAttrs(as), d.msg}
}

func (d dropHandler) WithGroup(name string) slog.Handler {
	return dropHandler{d.Handler.WithGroup(name), d.msg}
}

// QuietLogger discards the SDK's log lines.
func QuietLogger() sdklog.Logger {
	return sdklog.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// shortError boils a gRPC error down to its cause.
func shortError(err error) string {
	msg := err.Error()
	// gRPC wraps a failed TLS handshake in two layers of its own words;
	// the TLS error itself is what says what to change.
	if _, tlsErr, ok := strings.Cut(msg, "authentication handshake failed: "); ok {
		return strings.TrimRight(tlsErr, `"`)
	}
	for _, known := range []string{"connection refused", "no such host", "i/o timeout", "connection reset by peer", "context deadline exceeded"} {
		if strings.Contains(msg, known) {
			if known == "context deadline exceeded" {
				return "no answer within 10s"
			}
			return known
		}
	}
	return msg
}

// Run is one Temporal run of an instance.
type Run struct {
	WorkflowID string
	RunID      string
	// Status is Temporal's: Running, Completed, Failed, Terminated, ...
	Status    enumspb.WorkflowExecutionStatus
	TaskQueue string
	Start     time.Time
	// Removed marks the tombstone run wf state rm leaves: the instance has
	// no records.
	Removed bool
}

// removedMemo is the memo key of a tombstone run.
const removedMemo = "wf_removed"

// removedQueue is the task queue of tombstone runs; no worker polls it.
const removedQueue = "wf-removed"

// Running reports whether the run is still going.
func (r *Run) Running() bool { return r.Status == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING }

// StatusName is the run's status in lower case ("running", "completed").
func (r *Run) StatusName() string {
	return strings.ToLower(strings.TrimPrefix(r.Status.String(), "WORKFLOW_EXECUTION_STATUS_"))
}

// Describe returns the latest run of an instance, nil when Temporal has
// none.
func (c *Client) Describe(ctx context.Context, workflow, key string) (*Run, error) {
	return c.describe(ctx, WorkflowID(workflow, key))
}

// describe returns the latest run of the workflow id, nil when Temporal
// has none.
func (c *Client) describe(ctx context.Context, id string) (*Run, error) {
	d, err := c.SDK.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("describe %s on Temporal at %s: %s", id, c.address, shortError(err))
	}
	info := d.GetWorkflowExecutionInfo()
	return &Run{
		WorkflowID: id,
		RunID:      info.GetExecution().GetRunId(),
		Status:     info.GetStatus(),
		TaskQueue:  info.GetTaskQueue(),
		Start:      info.GetStartTime().AsTime(),
		Removed:    info.GetMemo().GetFields()[removedMemo] != nil,
	}, nil
}

// State returns the records of an instance's latest run: queried from a
// running one (a worker answers), read from the result of a finished one
// (no worker needed). Nil when Temporal has no run of the instance.
func (c *Client) State(ctx context.Context, workflow, key string) (*State, *Run, error) {
	run, err := c.Describe(ctx, workflow, key)
	if err != nil || run == nil || run.Removed {
		return nil, nil, err
	}
	st, err := c.runState(ctx, run)
	return st, run, err
}

func (c *Client) runState(ctx context.Context, run *Run) (*State, error) {
	if run.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		var st State
		if err := c.SDK.GetWorkflow(ctx, run.WorkflowID, run.RunID).Get(ctx, &st); err != nil {
			return nil, fmt.Errorf("read the result of %s: %s", run.WorkflowID, shortError(err))
		}
		return &st, nil
	}
	// Running, or ended another way (terminated, failed): ask a worker,
	// which replays the history to answer.
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := c.SDK.QueryWorkflow(qctx, run.WorkflowID, run.RunID, QueryState)
	if err != nil {
		if run.Running() {
			return nil, c.queryError(run, err)
		}
		// An instance that failed before its interpreter could answer
		// (a configuration no worker can load) has the records it
		// started from.
		return c.startState(ctx, run)
	}
	var st State
	if err := v.Get(&st); err != nil {
		return nil, fmt.Errorf("decode the state of %s: %w", run.WorkflowID, err)
	}
	return &st, nil
}

// startState is the state a run started from: its input's records.
func (c *Client) startState(ctx context.Context, run *Run) (*State, error) {
	iter := c.SDK.GetWorkflowHistory(ctx, run.WorkflowID, run.RunID, false, 0)
	if !iter.HasNext() {
		return nil, fmt.Errorf("read the history of %s: it is empty", run.WorkflowID)
	}
	ev, err := iter.Next()
	if err != nil {
		return nil, fmt.Errorf("read the history of %s: %s", run.WorkflowID, shortError(err))
	}
	var in Input
	if err := converter.GetDefaultDataConverter().FromPayloads(ev.GetWorkflowExecutionStartedEventAttributes().GetInput(), &in); err != nil {
		return nil, fmt.Errorf("decode the input of %s: %w", run.WorkflowID, err)
	}
	c0 := in.Carry
	return &State{
		StateID: in.StateID, Instance: c0.Instance, Activities: c0.Activities, Budgets: c0.Budgets,
		Attempts: c0.Attempts, DroppedAttempts: c0.DroppedAttempts, Done: true, Status: run.StatusName(),
	}, nil
}

// RunError is how a run that did not complete ended: its failure or
// termination, in one line.
func (c *Client) RunError(ctx context.Context, run *Run) error {
	err := c.SDK.GetWorkflow(ctx, run.WorkflowID, run.RunID).Get(ctx, nil)
	if err == nil {
		return fmt.Errorf("%s ended on Temporal with status %s", run.WorkflowID, run.StatusName())
	}
	return fmt.Errorf("%s ended on Temporal with status %s: %s", run.WorkflowID, run.StatusName(), shortError(err))
}

func (c *Client) queryError(run *Run, err error) error {
	if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "deadline exceeded") {
		return fmt.Errorf("no wf worker answered for %s within 10s: is `wf worker` running on task queue %q of %s?", run.WorkflowID, run.TaskQueue, c.address)
	}
	return fmt.Errorf("query %s: %s", run.WorkflowID, shortError(err))
}

// ErrRunning is returned by Start when the instance already runs.
var ErrRunning = errors.New("the instance is already running on Temporal")

// Start starts an instance's interpreter on queue. It returns ErrRunning
// when a run of the instance is still going.
func (c *Client) Start(ctx context.Context, in Input, queue string) (*Run, error) {
	id := WorkflowID(in.Workflow, in.Key)
	queue = orDefault(queue, DefaultTaskQueue)
	in.Format = InputFormat
	if in.TaskQueue == "" {
		in.TaskQueue = queue
	}
	r, err := c.SDK.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                queue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		StaticSummary:            "wf apply " + in.Workflow + "/" + in.Key,
	}, WorkflowType, in)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return nil, ErrRunning
	}
	if err != nil {
		return nil, fmt.Errorf("start %s on Temporal at %s: %s", id, c.address, shortError(err))
	}
	return &Run{WorkflowID: id, RunID: r.GetRunID(), Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, TaskQueue: queue}, nil
}

// NewStateID returns a fresh state identity (128 random bits in hex).
func NewStateID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// FireNow asks the instance to fire an activity's pending retry now.
func (c *Client) FireNow(ctx context.Context, workflow, key, activity string) error {
	id := WorkflowID(workflow, key)
	if err := c.SDK.SignalWorkflow(ctx, id, "", SignalFireNow, FireNow{Activity: activity}); err != nil {
		return fmt.Errorf("signal %s: %s", id, shortError(err))
	}
	return nil
}

// Follow publishes the events of an instance's apply, from after (0: from
// its plan event), until the apply has ended across continue-as-new, and
// returns its final records. A worker that does not answer is reported
// once through waiting; Follow keeps trying until ctx is done.
func (c *Client) Follow(ctx context.Context, workflow, key string, after int64, publish func([]event.Event), waiting func(error)) (*State, error) {
	id := WorkflowID(workflow, key)
	poll := orDefault(c.Poll, 100*time.Millisecond)
	warned := false
	checked := time.Now()
	for {
		page, err := c.queryEvents(ctx, id, after)
		if err == nil {
			if len(page.Events) > 0 {
				publish(page.Events)
			}
			after = page.Next
			if page.Done {
				return c.finalState(ctx, workflow, key, &after, publish)
			}
			if page.More {
				continue
			}
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		// A query answers for a run that was terminated too (a worker
		// replays it), so look at the run itself now and then, and at
		// once when the query failed.
		if err != nil || time.Since(checked) >= time.Second {
			checked = time.Now()
			run, derr := c.Describe(ctx, workflow, key)
			switch {
			case derr != nil:
				return nil, derr
			case run == nil || run.Removed:
				return nil, fmt.Errorf("%s is not on Temporal at %s (removed?)", id, c.address)
			case run.Status == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
				return c.finalState(ctx, workflow, key, &after, publish)
			case !run.Running():
				return nil, c.RunError(ctx, run)
			case err != nil && !warned && waiting != nil:
				warned = true
				waiting(c.queryError(run, err))
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(poll):
		}
	}
}

func (c *Client) queryEvents(ctx context.Context, id string, after int64) (EventsPage, error) {
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := c.SDK.QueryWorkflow(qctx, id, "", QueryEvents, after, maxPage)
	if err != nil {
		return EventsPage{}, err
	}
	var p EventsPage
	if err := v.Get(&p); err != nil {
		return EventsPage{}, fmt.Errorf("decode events of %s: %w", id, err)
	}
	return p, nil
}

// finalState waits for the finished run's result and publishes the events
// the follower has not seen yet.
func (c *Client) finalState(ctx context.Context, workflow, key string, after *int64, publish func([]event.Event)) (*State, error) {
	id := WorkflowID(workflow, key)
	var st State
	if err := c.SDK.GetWorkflow(ctx, id, "").Get(ctx, &st); err != nil {
		return nil, fmt.Errorf("read the result of %s: %s", id, shortError(err))
	}
	first := st.NextSeq - int64(len(st.Events))
	var rest []event.Event
	if *after <= 0 && st.Plan != nil {
		// A follower that saw nothing yet lays out its rows from the plan.
		rest = append(rest, *st.Plan)
	}
	for i, ev := range st.Events {
		if first+int64(i) > *after {
			rest = append(rest, ev)
		}
	}
	if len(rest) > 0 {
		publish(rest)
	}
	*after = st.NextSeq - 1
	return &st, nil
}

// Listed is one instance in List.
type Listed struct {
	Workflow, Key string
	Run           Run
}

// List returns every instance on the namespace, each with its latest run,
// sorted by address.
func (c *Client) List(ctx context.Context) ([]Listed, error) {
	latest := map[string]Listed{}
	var token []byte
	for {
		resp, err := c.SDK.ListWorkflow(ctx, listRequest(c.namespace, fmt.Sprintf("WorkflowType = %q", WorkflowType), token))
		if err != nil {
			return nil, fmt.Errorf("list instances on Temporal at %s: %s", c.address, shortError(err))
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			wf, key, ok := ParseWorkflowID(id)
			if !ok {
				continue
			}
			start := e.GetStartTime().AsTime()
			if prev, seen := latest[id]; seen && !start.After(prev.Run.Start) {
				continue
			}
			latest[id] = Listed{Workflow: wf, Key: key, Run: Run{
				WorkflowID: id, RunID: e.GetExecution().GetRunId(), Status: e.GetStatus(),
				TaskQueue: e.GetTaskQueue(), Start: start,
				Removed: e.GetMemo().GetFields()[removedMemo] != nil,
			}}
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	out := make([]Listed, 0, len(latest))
	for _, l := range latest {
		if !l.Run.Removed {
			out = append(out, l)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Run.WorkflowID < out[j].Run.WorkflowID })
	return out, nil
}

// RunState returns the records of one listed run.
func (c *Client) RunState(ctx context.Context, run *Run) (*State, error) { return c.runState(ctx, run) }

// Remove removes an instance from Temporal, so that the next apply starts
// it afresh with a new state identity (new idempotency keys). A running
// instance is refused. Temporal deletes histories asynchronously (it can
// take it many seconds), so Remove first makes a tombstone the instance's
// latest run, at once: a run that is started on a queue no worker polls,
// marked by its memo, and terminated. Every command reads the latest run,
// so the instance is gone for them from then on; the runs before are
// then deleted in the background.
func (c *Client) Remove(ctx context.Context, workflow, key string) error {
	id := WorkflowID(workflow, key)
	run, err := c.Describe(ctx, workflow, key)
	if err != nil {
		return err
	}
	if run == nil || run.Removed {
		return fmt.Errorf("instance %s/%s is not on Temporal at %s (wf state list -engine temporal shows what is)", workflow, key, c.address)
	}
	if run.Running() {
		return fmt.Errorf("instance %s/%s is running on Temporal (workflow ID %s); wait for it to end, or stop it first: temporal workflow terminate --workflow-id %s", workflow, key, id, id)
	}
	tomb, err := c.SDK.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       id,
		TaskQueue:                removedQueue,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		Memo:                     map[string]any{removedMemo: true},
		StaticSummary:            "removed by wf state rm",
	}, WorkflowType, Input{Format: InputFormat, Workflow: workflow, Key: key})
	if err != nil {
		return fmt.Errorf("remove %s from Temporal at %s: %s", id, c.address, shortError(err))
	}
	if err := c.SDK.TerminateWorkflow(ctx, id, tomb.GetRunID(), "removed by wf state rm"); err != nil {
		return fmt.Errorf("remove %s from Temporal at %s: %s", id, c.address, shortError(err))
	}
	// Best effort: the records are already out of every command's sight.
	_, _ = c.SDK.WorkflowService().DeleteWorkflowExecution(ctx, deleteRequest(c.namespace, id, run.RunID))
	return nil
}
