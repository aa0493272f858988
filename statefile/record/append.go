package record

import (
	"errors"
	"fmt"
)

// AppendAttempt and AppendActivity are Encode for the two records every
// attempt writes, appended to b: the store builds a record's key and its
// value in one allocation (one fewer per record on the commit path). They
// validate as Encode does, with its errors, and write the same bytes.

// AttemptSize is about the length AppendAttempt appends for r (a buffer
// of it holds a typical record without growing).
func AttemptSize(r *Attempt) int { return attemptJSONSize(r) }

// ActivitySize is about the length AppendActivity appends for r.
func ActivitySize(r *Activity) int { return activityBinarySize(r) }

// AppendAttempt appends Encode(r) to b.
func AppendAttempt(b []byte, r *Attempt) ([]byte, error) {
	if r == nil {
		return nil, errors.New("encode attempt: nil record")
	}
	if err := validateAttempt(r); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	b, err := appendAttempt(b, r)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", r, err)
	}
	return b, nil
}

// AppendActivity appends Encode(r) to b.
func AppendActivity(b []byte, r *Activity) ([]byte, error) {
	if r == nil {
		return nil, errors.New("encode activity: nil record")
	}
	if err := validateActivity(r); err != nil {
		return nil, fmt.Errorf("encode: %w", err)
	}
	b, err := appendActivityBinary(b, r)
	if err != nil {
		return nil, fmt.Errorf("encode %T: %w", r, err)
	}
	return b, nil
}
