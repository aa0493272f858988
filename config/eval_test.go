package config

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"

	"github.com/wf-engine/wf/retry"
)

func TestFunctions(t *testing.T) {
	tests := []struct {
		expr string
		want string // the value's JSON encoding
	}{
		{`upper("abc")`, `"ABC"`},
		{`lower("ABC")`, `"abc"`},
		{`format("%s-%03d", "a", 7)`, `"a-007"`},
		{`formatlist("x%s", ["a", "b"])`, `["xa","xb"]`},
		{`join(",", ["a", "b"])`, `"a,b"`},
		{`split(",", "a,b")`, `["a","b"]`},
		{`replace("a-b-c", "-", "+")`, `"a+b+c"`},
		{`trimspace("  x ")`, `"x"`},
		{`jsonencode({a = 1})`, `"{\"a\":1}"`},
		{`jsondecode("{\"a\":[1,2]}").a[1]`, `2`},
		{`concat([1], [2, 3])`, `[1,2,3]`},
		{`merge({a = 1}, {b = 2})`, `{"a":1,"b":2}`},
		{`lookup({a = "x"}, "b", "d")`, `"d"`},
		{`length([1, 2, 3])`, `3`},
		{`length("héllo")`, `5`},
		{`length({a = 1, b = 2})`, `2`},
		{`keys({b = 1, a = 2})`, `["a","b"]`},
		{`values({b = 1, a = 2})`, `[2,1]`},
		{`contains(["a"], "a")`, `true`},
		{`coalesce("", "b")`, `"b"`},
		{`min(3, 1, 2)`, `1`},
		{`max(3, 1, 2)`, `3`},
		{`abs(-4)`, `4`},
		{`ceil(1.2)`, `2`},
		{`floor(1.8)`, `1`},
		{`tostring(12)`, `"12"`},
		{`tonumber("12")`, `12`},
		{`tobool("true")`, `true`},
		{`element(["a", "b"], 3)`, `"b"`},
		{`flatten([[1], [2, [3]]])`, `[1,2,3]`},
		{`distinct([1, 1, 2])`, `[1,2]`},
		{`reverse([1, 2])`, `[2,1]`},
		{`sort(["b", "a"])`, `["a","b"]`},
		{`range(3)`, `[0,1,2]`},
		{`regex("[0-9]+", "ab12c")`, `"12"`},
		{`substr("hello", 1, 3)`, `"ell"`},
		{`chomp("x\n")`, `"x"`},
		{`title("hello world")`, `"Hello World"`},
		{`base64encode("hi")`, `"aGk="`},
		{`base64decode("aGk=")`, `"hi"`},
		{`sha256("")`, `"e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"`},
		{`try(jsondecode("nope"), "fallback")`, `"fallback"`},
		{`can(tonumber("x"))`, `false`},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			cfg := mustLoad(t, "locals {\n  v = "+tt.expr+"\n}\n", LoadOptions{})
			v := cfg.Locals["v"]
			got, err := json.Marshal(ctyJSON(t, v))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Errorf("%s = %s, want %s", tt.expr, got, tt.want)
			}
		})
	}
}

// ctyJSON converts a value to plain Go data via its JSON encoding.
func ctyJSON(t *testing.T, v cty.Value) any {
	t.Helper()
	b, err := ctyMarshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestLocalsChain(t *testing.T) {
	cfg := mustLoad(t, `
variable "env" {
  default = "prod"
}
locals {
  url  = "${local.base}/v1"
}
locals {
  base = "https://${local.host}"
  host = "${var.env}.example.com"
}
`, LoadOptions{})
	if got := cfg.Locals["url"].AsString(); got != "https://prod.example.com/v1" {
		t.Errorf("url = %q", got)
	}
}

const refsSrc = `
variable "order" {
  default = "42"
}
locals {
  api = "http://127.0.0.1:8080"
}
workflow "w" {
  key = "order-${var.order}"

  activity "charge" {
    exec {
      command = ["./charge", var.order]
      env     = { API = local.api }
      dir     = "bin"
    }
    timeout = "30s"
  }
  activity "notify" {
    http {
      url     = "${local.api}/notify/${activity.charge.result.id}"
      method  = "post"
      headers = { "X-Charge" = activity.charge.stdout }
      body    = jsonencode({ id = activity.charge.result.id, lookup = activity.lookup.result })
    }
    depends_on = [activity.wait, activity.charge]
  }
  activity "lookup" {
    http { url = local.api }
  }
  activity "wait" {
    sleep { duration = "1m" }
  }
}
`

func TestReferencesAndDependsOn(t *testing.T) {
	cfg := mustLoad(t, refsSrc, LoadOptions{})
	w := cfg.Workflows[0]
	if w.Address() != "w/order-42" {
		t.Errorf("address = %q", w.Address())
	}
	n := w.Activity("notify")
	if want := []string{"charge", "lookup", "wait"}; !reflect.DeepEqual(n.DependsOn, want) {
		t.Errorf("DependsOn = %v, want %v", n.DependsOn, want)
	}
	// The first reference wins: the url, before headers and depends_on.
	line, col := posOf(t, refsSrc, "activity.charge.result.id}")
	if r, _ := n.DependsOnRange("charge"); r.Start.Line != line || r.Start.Column != col {
		t.Errorf("charge range = %v, want %d:%d", r, line, col)
	}
	line, col = posOf(t, refsSrc, "activity.wait")
	if r, _ := n.DependsOnRange("wait"); r.Start.Line != line || r.Start.Column != col {
		t.Errorf("wait range = %v, want %d:%d", r, line, col)
	}
	if c := w.Activity("charge"); len(c.DependsOn) != 0 || c.Timeout != 30*time.Second || c.Kind != KindExec {
		t.Errorf("charge = %+v", c)
	}
}

func TestResolve(t *testing.T) {
	cfg := mustLoad(t, refsSrc, LoadOptions{})
	w := cfg.Workflows[0]

	res, diags := w.Activity("charge").Resolve(nil)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	wantExec := &ExecSpec{Command: []string{"./charge", "42"}, Env: map[string]string{"API": "http://127.0.0.1:8080"},
		Dir: filepath.Join(cfg.Dir, "bin"), WrittenDir: "bin"}
	if !reflect.DeepEqual(res.Exec, wantExec) || res.HTTP != nil || res.Sleep != nil {
		t.Errorf("exec = %+v, want %+v", res.Exec, wantExec)
	}
	if !filepath.IsAbs(res.Exec.Dir) {
		t.Errorf("dir %q is not absolute", res.Exec.Dir)
	}

	charge, err := OutputsValue(json.RawMessage(`{"result": {"id": "ch_1"}, "stdout": "ok\n", "exit_code": 0}`))
	if err != nil {
		t.Fatal(err)
	}
	lookup, err := OutputsValue(json.RawMessage(`{"result": [1, "two", null], "status": 200}`))
	if err != nil {
		t.Fatal(err)
	}
	upstream := map[string]cty.Value{"charge": charge, "lookup": lookup, "wait": cty.EmptyObjectVal}
	res, diags = w.Activity("notify").Resolve(upstream)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	want := &HTTPSpec{
		URL:     "http://127.0.0.1:8080/notify/ch_1",
		Method:  "POST",
		Headers: map[string]string{"X-Charge": "ok\n"},
		Body:    `{"id":"ch_1","lookup":[1,"two",null]}`,
	}
	if !reflect.DeepEqual(res.HTTP, want) {
		t.Errorf("http = %+v, want %+v", res.HTTP, want)
	}
	h1 := res.Hash()

	// A different upstream result changes the definition hash.
	charge2, _ := OutputsValue(json.RawMessage(`{"result": {"id": "ch_2"}, "stdout": "ok\n"}`))
	upstream["charge"] = charge2
	res2, diags := w.Activity("notify").Resolve(upstream)
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	if res2.Hash() == h1 {
		t.Error("hash ignores upstream outputs")
	}

	// Missing upstream: an error naming what is not known.
	_, diags = w.Activity("notify").Resolve(map[string]cty.Value{"lookup": lookup})
	if !diags.HasErrors() || diags[0].Summary != "Upstream outputs not known" ||
		!strings.Contains(diags[0].Detail, "activity.charge, activity.wait") {
		t.Errorf("diags = %v", diags)
	}

	// Outputs without the referenced attribute.
	_, diags = w.Activity("notify").Resolve(map[string]cty.Value{"charge": cty.EmptyObjectVal, "lookup": lookup, "wait": cty.EmptyObjectVal})
	if !diags.HasErrors() || diags[0].Summary != "Unsupported attribute" {
		t.Errorf("diags = %v", diags)
	}

	res, diags = w.Activity("wait").Resolve(nil)
	if diags.HasErrors() || res.Sleep.Duration != time.Minute {
		t.Errorf("sleep = %+v %v", res.Sleep, diags)
	}
}

func TestResolveTypeErrorFromUpstream(t *testing.T) {
	cfg := mustLoad(t, wrap(`
activity "a" {
  exec { command = ["x"] }
}
activity "b" {
  sleep { duration = activity.a.result.wait }
}`), LoadOptions{})
	out, _ := OutputsValue(json.RawMessage(`{"result": {"wait": "soon"}}`))
	_, diags := cfg.Workflows[0].Activity("b").Resolve(map[string]cty.Value{"a": out})
	if !diags.HasErrors() || diags[0].Summary != "Invalid duration" {
		t.Errorf("diags = %v", diags)
	}
}

func TestOutputsValue(t *testing.T) {
	tests := []struct {
		raw     string
		want    cty.Value
		wantErr bool
	}{
		{raw: "", want: cty.EmptyObjectVal},
		{raw: "null", want: cty.EmptyObjectVal},
		{raw: `{"exit_code": 0, "result": "x"}`, want: cty.ObjectVal(map[string]cty.Value{
			"exit_code": cty.NumberIntVal(0), "result": cty.StringVal("x")})},
		{raw: `{"result": null}`, want: cty.ObjectVal(map[string]cty.Value{"result": cty.NullVal(cty.DynamicPseudoType)})},
		{raw: `[1]`, wantErr: true},
		{raw: `{"a":`, wantErr: true},
	}
	for _, tt := range tests {
		got, err := OutputsValue(json.RawMessage(tt.raw))
		if (err != nil) != tt.wantErr {
			t.Errorf("OutputsValue(%q) error = %v", tt.raw, err)
			continue
		}
		if !tt.wantErr && !got.RawEquals(tt.want) {
			t.Errorf("OutputsValue(%q) = %#v, want %#v", tt.raw, got, tt.want)
		}
	}
}

func TestRetryIf(t *testing.T) {
	cfg := mustLoad(t, `
variable "limit" {
  type    = number
  default = 4
}
retry_policy "p" {
  maximum_attempts = 10
  retry_if = error.type != "Fraud" && attempt < var.limit && elapsed < 60 && !startswith(error.message, "fatal")
}
retry_policy "bad" {
  maximum_attempts = 10
  retry_if = tonumber(error.message) > 1
}
`, LoadOptions{}, "z.wf.hcl", `locals { }`)
	_ = cfg
	pred := cfg.Policies["p"].Rule.RetryIf
	if pred == nil {
		t.Fatal("no predicate")
	}
	tests := []struct {
		f       retry.Failure
		attempt int
		elapsed time.Duration
		want    bool
	}{
		{retry.Failure{Type: "http:503"}, 1, time.Second, true},
		{retry.Failure{Type: "Fraud"}, 1, time.Second, false},
		{retry.Failure{Type: "http:503"}, 4, time.Second, false},
		{retry.Failure{Type: "http:503"}, 3, 61 * time.Second, false},
		{retry.Failure{Type: "x", Message: "fatal: disk"}, 1, 0, false},
	}
	for _, tt := range tests {
		got, err := pred(tt.f, tt.attempt, tt.elapsed)
		if err != nil || got != tt.want {
			t.Errorf("retry_if(%+v, %d, %v) = %v, %v; want %v", tt.f, tt.attempt, tt.elapsed, got, err, tt.want)
		}
	}
	bad := cfg.Policies["bad"].Rule.RetryIf
	if _, err := bad(retry.Failure{Message: "not a number"}, 1, 0); err == nil {
		t.Error("want an evaluation error")
	}
	if ok, err := bad(retry.Failure{Message: "5"}, 1, 0); err != nil || !ok {
		t.Errorf("got %v, %v", ok, err)
	}
}

func TestRetryIfNullResultIsError(t *testing.T) {
	cfg := mustLoad(t, `
retry_policy "p" {
  maximum_attempts = 3
  retry_if = error.message == "" ? null : true
}
`, LoadOptions{})
	if _, err := cfg.Policies["p"].Rule.RetryIf(retry.Failure{}, 1, 0); err == nil {
		t.Error("want an error for a null result")
	}
}

func TestRulesFromBlocks(t *testing.T) {
	cfg := mustLoad(t, `
retry_budget "api" {
  max_retries = 5
  window      = "1m"
}
retry_policy "base" {
  backoff          = "linear"
  initial_interval = "2s"
  maximum_attempts = 4
  jitter           = 0.25
  budget           = retry_budget.api
  retry_if         = attempt < 3
  maximum_retry_after = "10m"
}
workflow "w" {
  activity "a" {
    exec { script = "exit 1" }
    retry {
      on               = ["http:429", "http:503"]
      initial_interval = "5s"
      maximum_attempts = 20
      honor_retry_after = false
    }
    retry {
      policy           = retry_policy.base
      maximum_attempts = 2
    }
  }
  activity "b" {
    exec { script = "exit 1" }
    retry = retry_policy.base
  }
}
`, LoadOptions{})
	a := cfg.Workflows[0].Activity("a")
	if len(a.Rules) != 2 || len(a.RuleRanges) != 2 {
		t.Fatalf("rules = %+v", a.Rules)
	}
	r0 := a.Rules[0]
	if !reflect.DeepEqual(r0.On, []string{"http:429", "http:503"}) || r0.Policy.InitialInterval != 5*time.Second ||
		r0.Policy.MaximumInterval != 500*time.Second || r0.Policy.MaximumAttempts != 20 || r0.Policy.HonorRetryAfter ||
		r0.Policy.Backoff != retry.Exponential || r0.Policy.Coefficient != 2 || r0.RetryIf != nil ||
		r0.Policy.MaximumRetryAfter != time.Hour {
		t.Errorf("rule 0 = %+v", r0)
	}
	r1 := a.Rules[1]
	wantP := retry.Policy{Backoff: retry.Linear, InitialInterval: 2 * time.Second, Coefficient: 2, MaximumInterval: 200 * time.Second,
		MaximumAttempts: 2, Jitter: retry.Jitter{Mode: retry.JitterFraction, Fraction: 0.25}, HonorRetryAfter: true, MaximumRetryAfter: 10 * time.Minute, Budget: "api"}
	if r1.On != nil || !reflect.DeepEqual(r1.Policy, wantP) || r1.RetryIf == nil {
		t.Errorf("rule 1 = %+v, want policy %+v", r1, wantP)
	}
	if ok, err := r1.RetryIf(retry.Failure{}, 3, 0); err != nil || ok {
		t.Errorf("inherited retry_if = %v, %v", ok, err)
	}
	b := cfg.Workflows[0].Activity("b")
	if len(b.Rules) != 1 || b.Rules[0].Policy.MaximumAttempts != 4 {
		t.Errorf("b rules = %+v", b.Rules)
	}
	if bud := cfg.Budgets["api"]; bud.MaxRetries != 5 || bud.Window != time.Minute || bud.OnExhausted != "wait" || bud.Name != "api" {
		t.Errorf("budget = %+v", bud)
	}
	if len(cfg.Workflows[0].Activity("b").DependsOn) != 0 {
		t.Error("unexpected deps")
	}
}

func TestResolveDepsAreWhatTheKindBlockReads(t *testing.T) {
	cfg := mustLoad(t, wrap(`  activity "a" {
    exec { command = ["true"] }
  }
  activity "b" {
    exec { command = ["true"] }
  }
  activity "c" {
    exec { command = ["echo", activity.a.stdout, activity.a.stderr] }
    when       = activity.b.status == "succeeded"
    depends_on = [activity.b]
  }
`), LoadOptions{})
	c := cfg.Workflows[0].Activity("c")
	if !slices.Equal(c.DependsOn, []string{"a", "b"}) || !slices.Equal(c.ResolveDeps, []string{"a"}) {
		t.Fatalf("DependsOn %v, ResolveDeps %v; want [a b], [a]", c.DependsOn, c.ResolveDeps)
	}
}
