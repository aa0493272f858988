// Package livestate lets the commands that only read (wf plan, history,
// state list|show, output, stats) read the state of a running wf apply.
// The apply holds the state's lock and the only Badger handle on it, so
// those commands ask the apply over its private event socket instead of
// opening the state (SPEC §8).
//
// The answers are the state's own records in their stored form
// (record.Encode), decoded on the other side with the same decoders the
// store uses: a command prints from them exactly what it would print from
// the state itself at that moment.
package livestate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/statefile/record"
)

// Source is what a running apply reads the answers from: a
// *statefile.Store.
type Source interface {
	Instances() ([]*record.Instance, error)
	Instance(workflow, key string) (*record.Instance, error)
	Activities(workflow, key string) (map[string]*record.Activity, error)
	Attempts(workflow, key, activity string) ([]*record.Attempt, error)
	Budgets() (map[string]*record.Budget, error)
	Breakers() (map[string]*record.Breaker, error)
}

// The read operations, one per Source method.
const (
	opInstances  = "instances"
	opInstance   = "instance"
	opActivities = "activities"
	opAttempts   = "attempts"
	opBudgets    = "budgets"
	opBreakers   = "breakers"
)

// args are the arguments of every operation; each uses what it needs.
type args struct {
	Workflow string `json:"workflow,omitempty"`
	Key      string `json:"key,omitempty"`
	Activity string `json:"activity,omitempty"`
}

// Serve returns the event.ReadFunc that answers reads from src.
func Serve(src Source) event.ReadFunc {
	return func(_ context.Context, op string, raw json.RawMessage, emit func(any) error) error {
		var a args
		if len(raw) > 0 {
			if err := json.Unmarshal(raw, &a); err != nil {
				return fmt.Errorf("read %s: bad arguments: %w", op, err)
			}
		}
		switch op {
		case opInstances:
			recs, err := src.Instances()
			if err != nil {
				return err
			}
			return emitAll(emit, recs)
		case opInstance:
			r, err := src.Instance(a.Workflow, a.Key)
			if err != nil || r == nil {
				return err // none: an empty answer
			}
			return emitOne(emit, r)
		case opActivities:
			recs, err := src.Activities(a.Workflow, a.Key)
			if err != nil {
				return err
			}
			return emitMap(emit, recs)
		case opAttempts:
			recs, err := src.Attempts(a.Workflow, a.Key, a.Activity)
			if err != nil {
				return err
			}
			return emitAll(emit, recs)
		case opBudgets:
			recs, err := src.Budgets()
			if err != nil {
				return err
			}
			return emitMap(emit, recs)
		case opBreakers:
			recs, err := src.Breakers()
			if err != nil {
				return err
			}
			return emitMap(emit, recs)
		default:
			return fmt.Errorf("unknown read %q (this wf apply is older than the command asking)", op)
		}
	}
}

func emitOne(emit func(any) error, r any) error {
	b, err := record.Encode(r)
	if err != nil {
		return err
	}
	// The stored bytes, as the store holds them: JSON for most records, a
	// binary form for activities (record schema 3). A []byte travels as a
	// base64 string in the socket's JSON lines.
	return emit(b)
}

func emitAll[T any](emit func(any) error, recs []*T) error {
	for _, r := range recs {
		if err := emitOne(emit, r); err != nil {
			return err
		}
	}
	return nil
}

func emitMap[T any](emit func(any) error, recs map[string]*T) error {
	for _, r := range recs {
		if err := emitOne(emit, r); err != nil {
			return err
		}
	}
	return nil
}

// Client reads the state of a running apply over its event socket. It has
// the read methods of *statefile.Store, with the same results.
type Client struct {
	r *event.Reads
}

// ErrNoApply is returned by Dial when no apply answers on the socket.
var ErrNoApply = event.ErrNoApply

// Dial connects to the event socket at path.
func Dial(ctx context.Context, path string) (*Client, error) {
	r, err := event.DialReads(ctx, path)
	if err != nil {
		return nil, err
	}
	return &Client{r: r}, nil
}

// Close hangs up.
func (c *Client) Close() error { return c.r.Close() }

func read[T any](c *Client, op string, a args, decode func([]byte) (*T, error), each func(*T)) error {
	err := c.r.Read(op, a, func(item json.RawMessage) error {
		var stored []byte
		if err := json.Unmarshal(item, &stored); err != nil {
			return fmt.Errorf("a record from the running apply: %w", err)
		}
		r, err := decode(stored)
		if err != nil {
			return fmt.Errorf("a record from the running apply: %w", err)
		}
		each(r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", op, err)
	}
	return nil
}

// Instances returns every instance, sorted by address, as the store does.
func (c *Client) Instances() ([]*record.Instance, error) {
	var out []*record.Instance
	err := read(c, opInstances, args{}, record.DecodeInstance, func(r *record.Instance) { out = append(out, r) })
	return out, err
}

// Instance returns one instance, or nil and no error when it is absent.
func (c *Client) Instance(workflow, key string) (*record.Instance, error) {
	var out *record.Instance
	err := read(c, opInstance, args{Workflow: workflow, Key: key}, record.DecodeInstance, func(r *record.Instance) { out = r })
	return out, err
}

// Activities returns the activities of an instance by name (empty, not
// nil, when there are none).
func (c *Client) Activities(workflow, key string) (map[string]*record.Activity, error) {
	out := map[string]*record.Activity{}
	err := read(c, opActivities, args{Workflow: workflow, Key: key}, record.DecodeActivity, func(r *record.Activity) { out[r.Name] = r })
	return out, err
}

// Attempts returns the attempt log of one activity ("": of every
// activity of the instance), in the store's order.
func (c *Client) Attempts(workflow, key, activity string) ([]*record.Attempt, error) {
	var out []*record.Attempt
	err := read(c, opAttempts, args{Workflow: workflow, Key: key, Activity: activity}, record.DecodeAttempt, func(r *record.Attempt) { out = append(out, r) })
	return out, err
}

// Budgets returns every retry budget's window by name.
func (c *Client) Budgets() (map[string]*record.Budget, error) {
	out := map[string]*record.Budget{}
	err := read(c, opBudgets, args{}, record.DecodeBudget, func(r *record.Budget) { out[r.Name] = r })
	return out, err
}

// Breakers returns the state of every circuit breaker by name.
func (c *Client) Breakers() (map[string]*record.Breaker, error) {
	out := map[string]*record.Breaker{}
	err := read(c, opBreakers, args{}, record.DecodeBreaker, func(r *record.Breaker) { out[r.Name] = r })
	return out, err
}

// IsNoApply reports whether err says that no apply answers on the socket.
func IsNoApply(err error) bool { return errors.Is(err, event.ErrNoApply) }
