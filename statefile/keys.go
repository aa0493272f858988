package statefile

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Key layout. The first byte names the table; names are escaped so that
// every component is self-delimiting (see appendName) and a prefix of
// components is a prefix scan:
//
//	m schema                          -> "3" (record.SchemaVersion)
//	i <wf> <key>                      -> Instance
//	a <wf> <key> <activity>           -> Activity
//	T <wf> <key> <activity>           -> "" (the activity has a pending timer)
//	t <wf> <key> <activity> gen num   -> Attempt (gen, num: big-endian uint64)
//	b <budget>                        -> Budget
//	p <wf> <key> <activity>           -> Spawn (the process group of the last exec attempt)
//	c <breaker>                       -> Breaker (a circuit breaker's state)
//	m id                              -> the state's random identity (hex)
//	m seq                             -> the last synced log sequence applied (big-endian uint64)
//
// The escaping keeps byte order equal to string order, so scans return
// activities by name and attempts by (activity, generation, number).
const (
	tableMeta     = 'm'
	tableInstance = 'i'
	tableActivity = 'a'
	tableTimer    = 'T'
	tableAttempt  = 't'
	tableBudget   = 'b'
	tableSpawn    = 'p'
	tableBreaker  = 'c'
)

var (
	keySchema = []byte{tableMeta, 's', 'c', 'h', 'e', 'm', 'a'}
	keyID     = []byte{tableMeta, 'i', 'd'}
	keySeq    = []byte{tableMeta, 's', 'e', 'q'}
)

// appendName appends s escaped: 0x00 becomes 0x00 0xFF and the name ends
// with 0x00 0x01. No escaped name is a prefix of another, so "a/b"+"c" and
// "a"+"b/c" (or any other split) can never share a key, and because 0x01 <
// 0xFF and 0x00 0x01 sorts below every other byte, escaped names compare
// exactly like the raw strings.
func appendName(b []byte, s string) []byte {
	// A run without a NUL at a time (names seldom have one): reopening
	// builds three names' worth of key per activity to check it.
	for {
		i := strings.IndexByte(s, 0)
		if i < 0 {
			b = append(b, s...)
			return append(b, 0, 1)
		}
		b = append(b, s[:i]...)
		b = append(b, 0, 0xFF)
		s = s[i+1:]
	}
}

// readName decodes one escaped name from the front of b and returns the
// rest.
func readName(b []byte) (string, []byte, error) {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); i++ {
		if b[i] != 0 {
			out = append(out, b[i])
			continue
		}
		if i+1 >= len(b) {
			return "", nil, errors.New("truncated name escape")
		}
		switch b[i+1] {
		case 1:
			return string(out), b[i+2:], nil
		case 0xFF:
			out = append(out, 0)
			i++
		default:
			return "", nil, fmt.Errorf("bad name escape 0x00 0x%02x", b[i+1])
		}
	}
	return "", nil, errors.New("unterminated name")
}

func appendUint(b []byte, n int) []byte {
	return binary.BigEndian.AppendUint64(b, uint64(n))
}

func instancePrefix(table byte, workflow, key string) []byte {
	b := make([]byte, 0, 1+len(workflow)+len(key)+4)
	b = append(b, table)
	b = appendName(b, workflow)
	return appendName(b, key)
}

func instanceKey(workflow, key string) []byte {
	return instancePrefix(tableInstance, workflow, key)
}

func activityKey(workflow, key, activity string) []byte {
	return activityTableKey(tableActivity, workflow, key, activity)
}

// activityTableKey is the key of one activity in table (activities,
// timers, spawns), in one allocation of its size: an activity is written
// with its timer key on every step of an attempt.
func activityTableKey(table byte, workflow, key, activity string) []byte {
	return appendActivityTableKey(make([]byte, 0, activityKeyCap(workflow, key, activity)), table, workflow, key, activity)
}

// activityKeyCap is the length of an activity's key in any table, unless
// a name holds a NUL (each then takes one byte more).
func activityKeyCap(workflow, key, activity string) int {
	return 1 + len(workflow) + len(key) + len(activity) + 6
}

// appendActivityKey appends activityKey(workflow, key, activity) to b.
func appendActivityKey(b []byte, workflow, key, activity string) []byte {
	return appendActivityTableKey(b, tableActivity, workflow, key, activity)
}

func appendActivityTableKey(b []byte, table byte, workflow, key, activity string) []byte {
	b = append(b, table)
	return appendName(appendName(appendName(b, workflow), key), activity)
}

func timerKey(workflow, key, activity string) []byte {
	return activityTableKey(tableTimer, workflow, key, activity)
}

func attemptPrefix(workflow, key, activity string) []byte {
	return appendAttemptPrefix(make([]byte, 0, 1+len(workflow)+len(key)+len(activity)+6), workflow, key, activity)
}

// appendAttemptPrefix appends the prefix of the attempt keys of activity
// (of every activity of the instance when activity is "").
func appendAttemptPrefix(b []byte, workflow, key, activity string) []byte {
	b = append(b, tableAttempt)
	b = appendName(appendName(b, workflow), key)
	if activity == "" {
		return b
	}
	return appendName(b, activity)
}

func attemptKey(workflow, key, activity string, generation, number int) []byte {
	// Sized for the whole key (written on every attempt): growing the
	// prefix's slice would copy it once more.
	return appendAttemptKey(make([]byte, 0, attemptKeyCap(workflow, key, activity)), workflow, key, activity, generation, number)
}

// attemptKeyCap is the length of an attempt's key, unless a name holds a
// NUL.
func attemptKeyCap(workflow, key, activity string) int {
	return activityKeyCap(workflow, key, activity) + 16
}

func appendAttemptKey(b []byte, workflow, key, activity string, generation, number int) []byte {
	b = appendAttemptPrefix(b, workflow, key, activity)
	b = appendUint(b, generation)
	return appendUint(b, number)
}

func spawnKey(workflow, key, activity string) []byte {
	return activityTableKey(tableSpawn, workflow, key, activity)
}

func budgetKey(name string) []byte {
	return appendName([]byte{tableBudget}, name)
}

func breakerKey(name string) []byte {
	return appendName([]byte{tableBreaker}, name)
}

// parseActivityKey returns the components of an activity or timer key.
func parseActivityKey(k []byte) (workflow, key, activity string, err error) {
	if len(k) == 0 {
		return "", "", "", errors.New("empty key")
	}
	rest := k[1:]
	if workflow, rest, err = readName(rest); err != nil {
		return "", "", "", err
	}
	if key, rest, err = readName(rest); err != nil {
		return "", "", "", err
	}
	if activity, rest, err = readName(rest); err != nil {
		return "", "", "", err
	}
	if len(rest) != 0 {
		return "", "", "", errors.New("trailing bytes")
	}
	return workflow, key, activity, nil
}

// describeKey renders a key for error messages, e.g.
// `activity "order"/"order-1"/"charge"`, falling back to the raw bytes.
func describeKey(k []byte) string {
	if len(k) == 0 {
		return `""`
	}
	var table string
	names := 0
	switch k[0] {
	case tableMeta:
		return fmt.Sprintf("meta %q", k[1:])
	case tableInstance:
		table, names = "instance", 2
	case tableActivity:
		table, names = "activity", 3
	case tableTimer:
		table, names = "timer", 3
	case tableAttempt:
		table, names = "attempt", 3
	case tableBudget:
		table, names = "budget", 1
	case tableBreaker:
		table, names = "breaker", 1
	case tableSpawn:
		table, names = "spawn", 3
	default:
		return fmt.Sprintf("%q", k)
	}
	var parts []string
	rest := k[1:]
	for range names {
		name, r, err := readName(rest)
		if err != nil {
			return fmt.Sprintf("%s %q", table, k)
		}
		parts = append(parts, fmt.Sprintf("%q", name))
		rest = r
	}
	s := table + " " + strings.Join(parts, "/")
	switch {
	case k[0] == tableAttempt && len(rest) == 16:
		return fmt.Sprintf("%s generation %d number %d", s, binary.BigEndian.Uint64(rest), binary.BigEndian.Uint64(rest[8:]))
	case len(rest) != 0:
		return fmt.Sprintf("%s %q", table, k)
	}
	return s
}
