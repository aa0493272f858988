package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/wf-engine/wf/retry"
)

// TestSharedKeysCoverEveryField: appendResolvedKey and appendRulesKey
// encode every field of what they share; a field added to these types
// must be added to them too, or activities that differ in it only would
// share one value.
func TestSharedKeysCoverEveryField(t *testing.T) {
	for typ, n := range map[reflect.Type]int{
		reflect.TypeFor[Resolved]():     4,
		reflect.TypeFor[ExecSpec]():     5,
		reflect.TypeFor[HTTPSpec]():     7,
		reflect.TypeFor[SleepSpec]():    1,
		reflect.TypeFor[retry.Rule]():   3,
		reflect.TypeFor[retry.Policy](): 14,
		reflect.TypeFor[retry.Jitter](): 2,
	} {
		if typ.NumField() != n {
			t.Errorf("%v has %d fields, the keys of shared.go know %d", typ, typ.NumField(), n)
		}
	}
}

// TestSharedValuesAreEqual: two values share a key exactly when they are
// equal, nil told from empty.
func TestSharedValuesAreEqual(t *testing.T) {
	resolved := []*Resolved{
		{Exec: &ExecSpec{Command: []string{"true"}, Dir: "/d", WrittenDir: "."}},
		{Exec: &ExecSpec{Command: []string{"true"}, Dir: "/e", WrittenDir: "."}},
		{Exec: &ExecSpec{Command: []string{"tru", "e"}, Dir: "/d", WrittenDir: "."}},
		{Exec: &ExecSpec{Command: []string{}, Dir: "/d", WrittenDir: "."}},
		{Exec: &ExecSpec{Dir: "/d", WrittenDir: "."}},
		{Exec: &ExecSpec{Script: "true", Dir: "/d", WrittenDir: "."}},
		{Exec: &ExecSpec{Script: "true", Env: map[string]string{}, Dir: "/d", WrittenDir: "."}},
		{Exec: &ExecSpec{Script: "true", Env: map[string]string{"A": "B"}, Dir: "/d", WrittenDir: "."}},
		{Exec: &ExecSpec{Script: "true", Env: map[string]string{"AB": ""}, Dir: "/d", WrittenDir: "."}},
		{Exec: &ExecSpec{Script: "true", Dir: "/d", WrittenDir: "x"}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET"}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET"}, Sensitive: []string{}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET"}, Sensitive: []string{"s"}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "POST"}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET", Headers: map[string]string{"A": "b"}}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET", Body: "b"}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET", ExpectStatus: []int{}}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET", ExpectStatus: []int{200}}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET", InsecureSkipVerify: true}},
		{HTTP: &HTTPSpec{URL: "http://h/", Method: "GET", MaxResponseBytes: 10}},
		{Sleep: &SleepSpec{Duration: time.Second}},
		{Sleep: &SleepSpec{Duration: time.Minute}},
		{},
	}
	var in interned
	for i, r := range resolved {
		if got := in.shareResolved(r); got != r {
			t.Errorf("resolved %d (%+v) shared with %+v", i, r, got)
		}
	}
	for i, r := range resolved {
		c := *r
		if got := in.shareResolved(&c); got != r {
			t.Errorf("a copy of resolved %d not shared with it", i)
		}
	}

	p := retry.Policy{Backoff: retry.Exponential, InitialInterval: time.Second, Coefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 5}
	with := func(f func(*retry.Rule)) []retry.Rule {
		r := retry.Rule{Policy: p}
		f(&r)
		return []retry.Rule{r}
	}
	rules := [][]retry.Rule{
		with(func(*retry.Rule) {}),
		with(func(r *retry.Rule) { r.On = []string{"http:429"} }),
		with(func(r *retry.Rule) { r.On = []string{"http:4", "29"} }),
		with(func(r *retry.Rule) { r.Policy.Backoff = retry.Fixed }),
		with(func(r *retry.Rule) { r.Policy.InitialInterval = 2 * time.Second }),
		with(func(r *retry.Rule) { r.Policy.Coefficient = 3 }),
		with(func(r *retry.Rule) { r.Policy.MaximumInterval = time.Hour }),
		with(func(r *retry.Rule) { r.Policy.MaximumAttempts = 6 }),
		with(func(r *retry.Rule) { r.Policy.Expiration = time.Hour }),
		with(func(r *retry.Rule) { r.Policy.Jitter = retry.Jitter{Mode: retry.JitterFull} }),
		with(func(r *retry.Rule) { r.Policy.Jitter = retry.Jitter{Mode: retry.JitterFraction, Fraction: 0.5} }),
		with(func(r *retry.Rule) { r.Policy.NonRetryable = []string{"x"} }),
		with(func(r *retry.Rule) { r.Policy.NonRetryable = []string{} }),
		with(func(r *retry.Rule) { r.Policy.Retryable = []string{"x"} }),
		with(func(r *retry.Rule) { r.Policy.HonorRetryAfter = true }),
		with(func(r *retry.Rule) { r.Policy.MaximumRetryAfter = time.Minute }),
		with(func(r *retry.Rule) { r.Policy.Budget = "b" }),
		with(func(r *retry.Rule) { r.Policy.CircuitBreaker = "c" }),
		with(func(r *retry.Rule) { r.Policy.OnOpen = "fail" }),
		append(with(func(*retry.Rule) {}), with(func(*retry.Rule) {})...),
	}
	for i, r := range rules {
		if got := in.shareRules(r); &got[0] != &r[0] {
			t.Errorf("rules %d (%+v) shared with %+v", i, r, got)
		}
	}
	for i, r := range rules {
		if got := in.shareRules(append([]retry.Rule(nil), r...)); &got[0] != &r[0] || cap(got) != len(got) {
			t.Errorf("a copy of rules %d not shared with it (or not capped: %d of %d)", i, len(got), cap(got))
		}
	}
	pred := with(func(r *retry.Rule) {
		r.RetryIf = func(retry.Failure, int, time.Duration) (bool, error) { return true, nil }
	})
	if got := in.shareRules(pred); &got[0] != &pred[0] {
		t.Error("rules with a retry_if shared")
	}
	if got := in.shareRules(append([]retry.Rule(nil), pred...)); &got[0] == &pred[0] {
		t.Error("rules with a retry_if shared with another's")
	}
}
