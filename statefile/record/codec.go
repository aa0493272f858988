package record

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Encode validates a record and returns its stored form: JSON, except for
// an Activity (binary.go). v is an
// Instance, Activity, Attempt or Budget, by value or by pointer. Invalid
// records are refused here so that nothing the decoders would reject can
// ever reach the store.
func Encode(v any) ([]byte, error) {
	var err error
	switch r := v.(type) {
	case *Instance:
		if r == nil {
			return nil, errors.New("encode instance: nil record")
		}
		err = validateInstance(r)
	case Instance:
		err = validateInstance(&r)
	case *Activity:
		if r == nil {
			return nil, errors.New("encode activity: nil record")
		}
		err = validateActivity(r)
	case Activity:
		err = validateActivity(&r)
	case *Attempt:
		if r == nil {
			return nil, errors.New("encode attempt: nil record")
		}
		err = validateAttempt(r)
	case Attempt:
		err = validateAttempt(&r)
	case *Budget:
		if r == nil {
			return nil, errors.New("encode budget: nil record")
		}
		err = validateBudget(r)
	case Budget:
		err = validateBudget(&r)
	case *Spawn:
		if r == nil {
			return nil, errors.New("encode spawn: nil record")
		}
		err = validateSpawn(r)
	case Spawn:
		err = validateSpawn(&r)
	case *Breaker:
		if r == nil {
			return nil, errors.New("encode breaker: nil record")
		}
		err = validateBreaker(r)
	case Breaker:
		err = validateBreaker(&r)
	default:
		return nil, fmt.Errorf("encode: unsupported record type %T", v)
	}
	if err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	var b []byte
	switch r := v.(type) {
	case *Activity:
		b, err = appendActivityBinary(make([]byte, 0, activityBinarySize(r)), r)
	case Activity:
		b, err = appendActivityBinary(make([]byte, 0, activityBinarySize(&r)), &r)
	case *Attempt:
		b, err = appendAttempt(make([]byte, 0, attemptJSONSize(r)), r)
	case Attempt:
		b, err = appendAttempt(make([]byte, 0, attemptJSONSize(&r)), &r)
	case *Instance:
		b, err = appendInstance(make([]byte, 0, 160), r)
	case Instance:
		b, err = appendInstance(make([]byte, 0, 160), &r)
	case *Spawn:
		b, err = appendSpawn(make([]byte, 0, 256), r)
	case Spawn:
		b, err = appendSpawn(make([]byte, 0, 256), &r)
	default:
		b, err = json.Marshal(v)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", v, err)
	}
	return b, nil
}

// DecodeInstance decodes and validates a stored Instance.
func DecodeInstance(b []byte) (*Instance, error) {
	var r Instance
	if err := decodeInstance(b, &r); err != nil {
		return nil, fmt.Errorf("decode instance: %w", err)
	}
	if err := validateInstance(&r); err != nil {
		return nil, fmt.Errorf("decode instance: %w", err)
	}
	return &r, nil
}

// DecodeActivity decodes and validates a stored Activity.
func DecodeActivity(b []byte) (*Activity, error) {
	var r Activity
	if err := decodeActivityInto(b, "", &r, nil); err != nil {
		return nil, err
	}
	return &r, nil
}

func decodeActivityInto(b []byte, shared string, r *Activity, ab *ActivityBatch) error {
	var err error
	if len(b) > 0 && b[0] == activityBinaryV1 {
		err = decodeActivityBinary(b, shared, r, ab)
	} else {
		err = decodeActivity(b, r)
	}
	if err != nil {
		return fmt.Errorf("decode activity: %w", err)
	}
	if err := validateActivity(r); err != nil {
		return fmt.Errorf("decode activity: %w", err)
	}
	return nil
}

// ActivityBatch decodes many activities as DecodeActivity does, but cuts
// the records, their timers, last errors, rule counts and outputs from
// arrays allocated a block at a time: reopening a state of 100,000
// activities is then a few hundred allocations for them instead of
// 500,000, which the collector would scan again and again while the
// executor starts. A record keeps its whole blocks alive, which costs
// nothing when (as at start-up) every record is kept. The zero value is
// ready to use; it is not safe for concurrent use.
type ActivityBatch struct {
	recs   []Activity
	timers []Timer
	errs   []Error
	counts []int
	bytes  []byte
}

// batchBlock is how many records (and timers) one block holds.
const batchBlock = 256

// Decode decodes and validates one stored activity.
func (ab *ActivityBatch) Decode(b []byte) (*Activity, error) { return ab.DecodeShared(b, "") }

// DecodeShared is Decode for a caller that holds b as a string too
// (shared, cut from one string of many records, made once): the record's
// strings are then substrings of shared, and keep all of the string they
// were cut from alive. shared "" is Decode.
func (ab *ActivityBatch) DecodeShared(b []byte, shared string) (*Activity, error) {
	if len(ab.recs) == 0 {
		ab.recs = make([]Activity, batchBlock)
	}
	r := &ab.recs[0]
	if err := decodeActivityInto(b, shared, r, ab); err != nil {
		*r = Activity{} // the slot is reused
		return nil, err
	}
	ab.recs = ab.recs[1:]
	return r, nil
}

func (ab *ActivityBatch) timer() *Timer {
	if ab == nil {
		return &Timer{}
	}
	return cut(&ab.timers)
}

func (ab *ActivityBatch) lastError() *Error {
	if ab == nil {
		return &Error{}
	}
	return cut(&ab.errs)
}

// cut returns the next element of the block *blk, a new block of
// batchBlock when it is used up.
func cut[T any](blk *[]T) *T {
	if len(*blk) == 0 {
		*blk = make([]T, batchBlock)
	}
	v := &(*blk)[0]
	*blk = (*blk)[1:]
	return v
}

// Outputs up to batchBytesMax are copied into blocks of batchBytesBlock:
// a record's outputs keep their block alive, which is little beside the
// block of records it is in.
const (
	batchBytesBlock = 8 << 10
	batchBytesMax   = 1 << 10
)

// copyBytes returns a copy of b, of capacity len(b) (an append
// reallocates rather than write into the next record's bytes).
func (ab *ActivityBatch) copyBytes(b []byte) []byte {
	if ab == nil || len(b) > batchBytesMax {
		return append([]byte(nil), b...)
	}
	if len(ab.bytes) < len(b) {
		ab.bytes = make([]byte, batchBytesBlock)
	}
	v := ab.bytes[:len(b):len(b)]
	copy(v, b)
	ab.bytes = ab.bytes[len(b):]
	return v
}

// ints returns n zeroed ints. Their capacity is n, so that an append by
// whoever keeps the record reallocates rather than write into the next
// record's counts.
func (ab *ActivityBatch) ints(n int) []int {
	if ab == nil || n > batchBlock/4 {
		return make([]int, n)
	}
	if len(ab.counts) < n {
		ab.counts = make([]int, batchBlock)
	}
	v := ab.counts[:n:n]
	ab.counts = ab.counts[n:]
	return v
}

// DecodeAttempt decodes and validates a stored Attempt.
func DecodeAttempt(b []byte) (*Attempt, error) {
	var r Attempt
	if err := decodeAttempt(b, &r); err != nil {
		return nil, fmt.Errorf("decode attempt: %w", err)
	}
	if err := validateAttempt(&r); err != nil {
		return nil, fmt.Errorf("decode attempt: %w", err)
	}
	return &r, nil
}

// DecodeBudget decodes and validates a stored Budget.
func DecodeBudget(b []byte) (*Budget, error) {
	var r Budget
	if err := decodeBudget(b, &r); err != nil {
		return nil, fmt.Errorf("decode budget: %w", err)
	}
	if err := validateBudget(&r); err != nil {
		return nil, fmt.Errorf("decode budget: %w", err)
	}
	return &r, nil
}

func validateInstance(r *Instance) error {
	if r.Workflow == "" {
		return errors.New("instance: empty workflow name")
	}
	if r.Key == "" {
		return fmt.Errorf("instance %q: empty key", r.Workflow)
	}
	return nil
}

func validateActivity(r *Activity) error {
	if r.Workflow == "" || r.Instance == "" || r.Name == "" {
		return fmt.Errorf("activity %q in %q/%q: empty workflow, instance or activity name", r.Name, r.Workflow, r.Instance)
	}
	// where is built only on failure: validation runs on every decode.
	where := activityWhere{r}
	if r.Generation < 0 {
		return fmt.Errorf("%s: negative generation %d", where, r.Generation)
	}
	if r.Attempts < 0 {
		return fmt.Errorf("%s: negative attempt count %d", where, r.Attempts)
	}
	if r.Interrupted < 0 {
		return fmt.Errorf("%s: negative interrupted attempt count %d", where, r.Interrupted)
	}
	if !validStatus(r.Status) {
		return fmt.Errorf("%s: unknown status %q", where, r.Status)
	}
	for i, n := range r.RuleCounts {
		if n < 0 {
			return fmt.Errorf("%s: negative count %d for retry rule %d", where, n, i)
		}
	}
	if t := r.Timer; t != nil {
		if !validTimerKind(t.Kind) {
			return fmt.Errorf("%s: unknown timer kind %q", where, t.Kind)
		}
		if t.Attempt < 0 {
			return fmt.Errorf("%s: negative timer attempt %d", where, t.Attempt)
		}
	}
	return nil
}

func validateAttempt(r *Attempt) error {
	if r.Workflow == "" || r.Instance == "" || r.Activity == "" {
		return fmt.Errorf("attempt of %q in %q/%q: empty workflow, instance or activity name", r.Activity, r.Workflow, r.Instance)
	}
	where := attemptWhere{r}
	if r.Generation < 0 {
		return fmt.Errorf("%s: negative generation %d", where, r.Generation)
	}
	if r.Number < 0 {
		return fmt.Errorf("%s: negative attempt number", where)
	}
	if !validOutcome(r.Outcome) {
		return fmt.Errorf("%s: unknown outcome %q", where, r.Outcome)
	}
	if o := r.Output; o != nil && (o.StdoutBytes < 0 || o.StderrBytes < 0 || o.BodyBytes < 0) {
		return fmt.Errorf("%s: negative output size", where)
	}
	return nil
}

type activityWhere struct{ r *Activity }

func (w activityWhere) String() string {
	return fmt.Sprintf("activity %s/%s/%s", w.r.Workflow, w.r.Instance, w.r.Name)
}

type attemptWhere struct{ r *Attempt }

func (w attemptWhere) String() string {
	return fmt.Sprintf("attempt %d of %s/%s/%s", w.r.Number, w.r.Workflow, w.r.Instance, w.r.Activity)
}

func validateBudget(r *Budget) error {
	if r.Name == "" {
		return errors.New("budget: empty name")
	}
	return nil
}

func validStatus(s Status) bool {
	switch s {
	case StatusPending, StatusRunning, StatusWaiting, StatusSucceeded, StatusFailed, StatusSkipped:
		return true
	}
	return false
}

func validOutcome(o Outcome) bool {
	switch o {
	case OutcomeRunning, OutcomeSucceeded, OutcomeFailed, OutcomeInterrupted:
		return true
	}
	return false
}

func validTimerKind(k TimerKind) bool {
	switch k {
	case TimerRetry, TimerBudget, TimerSleep, TimerCircuit:
		return true
	}
	return false
}

// DecodeSpawn decodes and validates a stored Spawn. Spawns are read only
// when a run finds an attempt left running, so encoding/json is fast
// enough.
func DecodeSpawn(b []byte) (*Spawn, error) {
	var r Spawn
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("decode spawn: %w", err)
	}
	// More is false before a stray '}' or ']', so ask for the next token:
	// only the end of the input is acceptable.
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("decode spawn: trailing data")
	}
	if err := validateSpawn(&r); err != nil {
		return nil, fmt.Errorf("decode spawn: %w", err)
	}
	return &r, nil
}

func validateSpawn(r *Spawn) error {
	where := fmt.Sprintf("spawn of attempt %d of %s/%s/%s", r.Number, r.Workflow, r.Instance, r.Activity)
	switch {
	case r.Workflow == "" || r.Instance == "" || r.Activity == "":
		return fmt.Errorf("%s: empty workflow, instance or activity name", where)
	case r.Generation < 1 || r.Number < 1:
		return fmt.Errorf("%s: generation %d and number must be at least 1", where, r.Generation)
	case r.PID < 1:
		return fmt.Errorf("%s: invalid pid %d", where, r.PID)
	}
	return nil
}

// DecodeBreaker decodes and validates a stored Breaker.
func DecodeBreaker(b []byte) (*Breaker, error) {
	var r Breaker
	if err := decodeBreaker(b, &r); err != nil {
		return nil, fmt.Errorf("decode breaker: %w", err)
	}
	if err := validateBreaker(&r); err != nil {
		return nil, fmt.Errorf("decode breaker: %w", err)
	}
	return &r, nil
}

func validateBreaker(r *Breaker) error {
	switch {
	case r.Name == "":
		return errors.New("breaker: empty name")
	case r.State != "closed" && r.State != "open" && r.State != "half_open":
		return fmt.Errorf("breaker %s: unknown state %q", r.Name, r.State)
	case r.TrialSuccesses < 0 || r.Epoch < 0:
		return fmt.Errorf("breaker %s: negative count", r.Name)
	case r.State == "open" && r.HalfOpenAt.IsZero():
		return fmt.Errorf("breaker %s: open without a half-open time", r.Name)
	}
	for _, b := range r.Window {
		if b.Successes < 0 || b.Failures < 0 {
			return fmt.Errorf("breaker %s: negative count in its window", r.Name)
		}
	}
	return nil
}
