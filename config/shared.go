package config

import (
	"bytes"
	"encoding/binary"
	"hash/maphash"
	"math"

	"github.com/hashicorp/hcl/v2"
	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/config/jsontext"
	"github.com/wf-engine/wf/retry"
)

// What a loaded configuration keeps for each activity is most of what a
// large one holds live: a state of 100,000 activities kept ~1.7 KB each
// (190 MB), and recovering it paid for marking them on every collection.
// Activities written alike (the usual case for thousands of them) share
// here what is equal among them: the result of a kind block of literals,
// and the retry rules. Both are read-only once loaded (Resolve's result
// is documented so; a.Rules was already shared with a named policy).

// constantResolver is the resolver of a kind block of literals
// (constantAttrs) whose evaluation at load gave no diagnostic: every
// evaluation gives that result (a run of 10,000 literal urls spent a
// quarter of its core's time evaluating them again), so neither its
// expressions nor the scope to evaluate them in are kept (about 800 bytes
// an activity).
type constantResolver Resolved

func (c *constantResolver) resolve(*Activity, map[string]cty.Value) (*Resolved, hcl.Diagnostics) {
	return (*Resolved)(c), nil
}

// foldConstantBlocks is false only in tests that compare a constant
// block's result with what evaluating it at run time gives.
var foldConstantBlocks = true

// interned keeps one of each distinct value the activities of a load
// share, found by a hash of an encoding of its content (appendResolvedKey
// and appendRulesKey: every field, nil told from empty) and kept only when
// the encodings are equal: a map by the encoding itself allocated a key
// for every block of its own (half the blocks of BenchmarkPlanBlocks10k).
type interned struct {
	seed     maphash.Seed
	resolved map[uint64]*Resolved
	rules    map[uint64][]retry.Rule
	buf, old []byte
}

func (in *interned) init() {
	if in.resolved == nil {
		in.seed = maphash.MakeSeed()
		in.resolved, in.rules = map[uint64]*Resolved{}, map[uint64][]retry.Rule{}
	}
}

// shareResolved returns the Resolved equal to res that an earlier
// activity of this load keeps, or res itself, now kept for later ones
// (unless another value has its hash: then res is its own).
func (in *interned) shareResolved(res *Resolved) *Resolved {
	in.init()
	in.buf = appendResolvedKey(in.buf[:0], res)
	h := maphash.Bytes(in.seed, in.buf)
	seen, ok := in.resolved[h]
	if !ok {
		in.resolved[h] = res
		return res
	}
	if in.old = appendResolvedKey(in.old[:0], seen); bytes.Equal(in.old, in.buf) {
		return seen
	}
	return res
}

// shareRules does the same for an activity's retry rules; rules with a
// retry_if (a compiled predicate, which has no content to compare) are
// its own. What it returns is capped: an append to one activity's rules
// makes its own.
func (in *interned) shareRules(rules []retry.Rule) []retry.Rule {
	for _, r := range rules {
		if r.RetryIf != nil {
			return rules
		}
	}
	in.init()
	rules = rules[:len(rules):len(rules)]
	in.buf = appendRulesKey(in.buf[:0], rules)
	h := maphash.Bytes(in.seed, in.buf)
	seen, ok := in.rules[h]
	if !ok {
		in.rules[h] = rules
		return rules
	}
	if in.old = appendRulesKey(in.old[:0], seen); bytes.Equal(in.old, in.buf) {
		return seen
	}
	return rules
}

func appendUint(b []byte, n uint64) []byte { return binary.AppendUvarint(b, n) }

func appendInt(b []byte, n int64) []byte { return binary.AppendVarint(b, n) }

func appendStr(b []byte, s string) []byte { return append(appendUint(b, uint64(len(s))), s...) }

func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, 1)
	}
	return append(b, 0)
}

// appendStrs encodes a slice: 0 for nil, else 1 + its length, then the
// strings.
func appendStrs(b []byte, ss []string) []byte {
	if ss == nil {
		return append(b, 0)
	}
	b = appendUint(b, uint64(len(ss))+1)
	for _, s := range ss {
		b = appendStr(b, s)
	}
	return b
}

// appendStrMap encodes a map as appendStrs does, in key order.
func appendStrMap(b []byte, m map[string]string) []byte {
	if m == nil {
		return append(b, 0)
	}
	b = appendUint(b, uint64(len(m))+1)
	for _, k := range jsontext.SortedKeys(m) {
		b = appendStr(appendStr(b, k), m[k])
	}
	return b
}

// appendResolvedKey encodes every field of res (TestSharedKeysCoverEveryField
// fails when a field is added that it does not know).
func appendResolvedKey(b []byte, res *Resolved) []byte {
	b = appendStrs(b, res.Sensitive)
	switch {
	case res.Exec != nil:
		s := res.Exec
		b = append(b, 'e')
		b = appendStrs(b, s.Command)
		b = appendStr(b, s.Script)
		b = appendStrMap(b, s.Env)
		b = appendStr(b, s.Dir)
		b = appendStr(b, s.WrittenDir)
	case res.HTTP != nil:
		s := res.HTTP
		b = append(b, 'h')
		b = appendStr(b, s.URL)
		b = appendStr(b, s.Method)
		b = appendStrMap(b, s.Headers)
		b = appendStr(b, s.Body)
		if s.ExpectStatus == nil {
			b = append(b, 0)
		} else {
			b = appendUint(b, uint64(len(s.ExpectStatus))+1)
			for _, n := range s.ExpectStatus {
				b = appendInt(b, int64(n))
			}
		}
		b = appendBool(b, s.InsecureSkipVerify)
		b = appendInt(b, s.MaxResponseBytes)
	case res.Sleep != nil:
		b = append(b, 's')
		b = appendInt(b, int64(res.Sleep.Duration))
	default:
		b = append(b, 0)
	}
	return b
}

// appendRulesKey encodes every field of rules but RetryIf, which is nil.
func appendRulesKey(b []byte, rules []retry.Rule) []byte {
	b = appendUint(b, uint64(len(rules)))
	for _, r := range rules {
		p := r.Policy
		b = appendStrs(b, r.On)
		b = appendStr(b, string(p.Backoff))
		b = appendInt(b, int64(p.InitialInterval))
		b = appendUint(b, math.Float64bits(p.Coefficient))
		b = appendInt(b, int64(p.MaximumInterval))
		b = appendInt(b, int64(p.MaximumAttempts))
		b = appendInt(b, int64(p.Expiration))
		b = appendStr(b, string(p.Jitter.Mode))
		b = appendUint(b, math.Float64bits(p.Jitter.Fraction))
		b = appendStrs(b, p.NonRetryable)
		b = appendStrs(b, p.Retryable)
		b = appendBool(b, p.HonorRetryAfter)
		b = appendInt(b, int64(p.MaximumRetryAfter))
		b = appendStr(b, p.Budget)
		b = appendStr(b, p.CircuitBreaker)
		b = appendStr(b, p.OnOpen)
	}
	return b
}
