package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/function"
)

// kindResolver evaluates one activity's kind block. It keeps its own copy of
// the static scope so that a Config can be used after its loader is gone.
type kindResolver struct {
	kind Kind
	// attrs are the kind block's arguments in the order of the source
	// (sortedAttrs): a few, found by attr; a map of them held about 250
	// bytes more for each of 10,000 activities.
	attrs    []*hcl.Attribute
	defRange hcl.Range
	*resolveEnv
	// calls are the functions attrs call (see budgetFuncs).
	calls map[string]bool
	// each: the activity declares for_each, so each is in scope.
	each bool
	// resultRefs are the references to an upstream's result in attrs,
	// found once (truncatedResultRefs checks them on each Resolve).
	refsOnce   sync.Once
	resultRefs []hcl.Traversal
}

// resolveEnv is what the kind blocks of one workflow's activities are
// evaluated with: one for all of them (kept in each, it was 56 bytes an
// activity, and a copy of the secrets each when there were any).
type resolveEnv struct {
	vars  map[string]cty.Value
	funcs map[string]function.Function
	dir   string
	// workflow finds upstream activities, to say why a result is missing.
	workflow *Workflow
	// secrets are the configuration's sensitive values, kept out of
	// diagnostics.
	secrets []string
}

// resolveEnv returns the environment of w's kind blocks, made for its
// first.
func (l *loader) resolveEnv(w *Workflow) *resolveEnv {
	if l.env == nil || l.env.workflow != w {
		l.env = &resolveEnv{vars: l.staticVars(), funcs: l.runFuncs, dir: l.absDir, workflow: w, secrets: l.secrets()}
	}
	return l.env
}

// noUpstreamScope is the scope of an activity without upstreams or
// for_each, shared by all of them: hcl never writes to a context's
// variables. A map of its own cost each evaluation 400 bytes.
var noUpstreamScope = map[string]cty.Value{"activity": cty.EmptyObjectVal}

// attr is the kind block's argument name, or nil.
func (r *kindResolver) attr(name string) *hcl.Attribute {
	for _, a := range r.attrs {
		if a.Name == name {
			return a
		}
	}
	return nil
}

func (r *kindResolver) resolve(a *Activity, upstream map[string]cty.Value) (*Resolved, hcl.Diagnostics) {
	b := newBudget(runLimits)
	return r.eval(a, upstream, false, b, withBudgetLayer(r.funcs, b, r.calls))
}

// eval evaluates the kind block. With static set, upstream outputs are all
// unknown and values that depend on them are skipped instead of reported.
//
// b is what the evaluation may spend and funcs its function table, bound
// to b: the loader's at load time, a fresh one per call at run time.
func (r *kindResolver) eval(a *Activity, upstream map[string]cty.Value, static bool, b *budget, funcs ctxFunc) (*Resolved, hcl.Diagnostics) {
	activities := cty.EmptyObjectVal
	var missing []string
	if len(a.DependsOn) > 0 {
		acts := make(map[string]cty.Value, len(a.DependsOn))
		for _, dep := range a.DependsOn {
			v, ok := upstream[dep]
			if !ok || v.Type() == cty.NilType {
				v = cty.DynamicVal
				missing = append(missing, dep)
			}
			acts[dep] = v
		}
		activities = cty.ObjectVal(acts)
	}
	// The activity's own names in a scope over the static one, which is
	// shared rather than copied into every evaluation (hcl looks a name up
	// through the parents).
	scope := noUpstreamScope
	if len(a.DependsOn) > 0 || a.each != cty.NilVal || r.each {
		scope = make(map[string]cty.Value, 2)
		scope["activity"] = activities
		switch {
		case a.each != cty.NilVal:
			scope["each"] = a.each
		case r.each:
			scope["each"] = unknownEach
		}
	}
	ctx := funcs(r.vars).NewChild()
	ctx.Variables = scope
	// sensitive collects the values derived from sensitive variables.
	var sensitive []string

	var diags hcl.Diagnostics
	if !static && len(upstream) > 0 {
		// A cut body has no result: say so, instead of evaluating null.
		// Without upstream values nothing can be cut, and the references
		// are not looked for (once per activity, most of a literal url's
		// Resolve).
		r.refsOnce.Do(func() {
			for _, attr := range r.attrs {
				r.resultRefs = append(r.resultRefs, resultTraversals(attr.Expr)...)
			}
		})
		diags = append(diags, truncatedResultRefs(r.resultRefs, upstream, r.workflow)...)
		if diags.HasErrors() {
			return nil, diags
		}
	}
	// get evaluates one attribute; ok is false when it is absent, null,
	// failed or (in static mode) not known yet.
	get := func(name string) (*hcl.Attribute, cty.Value, bool) {
		attr := r.attr(name)
		if attr == nil {
			return nil, cty.NilVal, false
		}
		v, d := evaluate(attr.Expr, ctx, b)
		diags = append(diags, d...)
		if d.HasErrors() {
			return attr, cty.NilVal, false
		}
		if !v.IsWhollyKnown() {
			if !static {
				diags = append(diags, unknownDiag(attr, missing))
			}
			return attr, cty.NilVal, false
		}
		if v.IsNull() {
			return attr, cty.NilVal, false
		}
		if isSensitive(v) {
			var secrets []string
			v, secrets = unmarkSensitive(v)
			sensitive = append(sensitive, secrets...)
		}
		return attr, v, true
	}
	add := func(d *hcl.Diagnostic) bool {
		if d != nil {
			diags = append(diags, d)
			return false
		}
		return true
	}

	res := &Resolved{}
	// parsedURL is an http block's url as checkURL parsed it, for
	// httpSecrets.
	var parsedURL *url.URL
	switch r.kind {
	case KindExec:
		spec := &ExecSpec{Dir: r.dir, WrittenDir: "."}
		if attr, v, ok := get("command"); ok {
			cmd, d := parseStrings(v, attr.Expr, "command")
			if add(d) && len(cmd) == 0 {
				add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Empty command",
					Detail:  "command must hold at least the program to run.",
					Subject: attr.Expr.Range().Ptr()})
			}
			spec.Command = cmd
		}
		if attr, v, ok := get("script"); ok {
			s, d := parseString(v, attr.Expr, "script")
			if add(d) && strings.TrimSpace(s) == "" {
				add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Empty script",
					Detail: "script must not be empty.", Subject: attr.Expr.Range().Ptr()})
			}
			spec.Script = s
		}
		if attr, v, ok := get("env"); ok {
			env, d := parseStringMap(v, attr.Expr, "env")
			if add(d) {
				diags = append(diags, badKeys(env, attr, validEnvName, "Invalid environment variable name", "%q cannot be an environment variable name.")...)
			}
			spec.Env = env
		}
		if attr, v, ok := get("dir"); ok {
			dir, d := parseString(v, attr.Expr, "dir")
			if add(d) {
				spec.WrittenDir = filepath.Clean(dir)
				if !filepath.IsAbs(dir) {
					dir = filepath.Join(r.dir, dir)
				}
				spec.Dir = filepath.Clean(dir)
			}
		}
		res.Exec = spec
	case KindHTTP:
		spec := &HTTPSpec{Method: "GET"}
		if attr, v, ok := get("url"); ok {
			u, d := parseString(v, attr.Expr, "url")
			if add(d) {
				var msg string
				if msg, parsedURL = checkURL(u); msg != "" {
					add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid URL",
						Detail: fmt.Sprintf("%q is not a usable URL: %s.", u, msg), Subject: attr.Expr.Range().Ptr()})
				}
			}
			spec.URL = u
		}
		if attr, v, ok := get("method"); ok {
			m, d := parseString(v, attr.Expr, "method")
			if add(d) {
				m = strings.ToUpper(strings.TrimSpace(m))
				if !isToken(m) {
					add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid HTTP method",
						Detail: fmt.Sprintf("%q is not an HTTP method.", m), Subject: attr.Expr.Range().Ptr()})
				}
				spec.Method = m
			}
		}
		if attr, v, ok := get("headers"); ok {
			h, d := parseStringMap(v, attr.Expr, "headers")
			if add(d) {
				diags = append(diags, badKeys(h, attr, isToken, "Invalid header name", "%q is not a valid HTTP header name.")...)
			}
			spec.Headers = h
		}
		if attr, v, ok := get("body"); ok {
			b, d := parseString(v, attr.Expr, "body")
			add(d)
			spec.Body = b
		}
		if attr, v, ok := get("expect_status"); ok {
			l, d := conv(v, cty.List(cty.Number), attr.Expr, "expect_status")
			if add(d) {
				for it := l.ElementIterator(); it.Next(); {
					_, e := it.Element()
					n, d := parseInt(e, attr.Expr, "expect_status")
					if add(d) {
						if n < 100 || n > 599 {
							add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid HTTP status",
								Detail: fmt.Sprintf("%d is not an HTTP status (100-599).", n), Subject: attr.Expr.Range().Ptr()})
						}
						spec.ExpectStatus = append(spec.ExpectStatus, n)
					}
				}
			}
		}
		if attr, v, ok := get("insecure_skip_verify"); ok {
			b, d := parseBool(v, attr.Expr, "insecure_skip_verify")
			add(d)
			spec.InsecureSkipVerify = b
		}
		if attr, v, ok := get("max_response_bytes"); ok {
			n, d := parseInt64(v, attr.Expr, "max_response_bytes")
			if add(d) {
				if n < 1 || n > MaxMaxResponseBytes {
					add(&hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid max_response_bytes",
						Detail:  fmt.Sprintf("max_response_bytes must be between 1 and %d (64 MiB), got %d.", MaxMaxResponseBytes, n),
						Subject: attr.Expr.Range().Ptr()})
				}
				spec.MaxResponseBytes = n
			}
		}
		res.HTTP = spec
	case KindSleep:
		spec := &SleepSpec{}
		if attr, v, ok := get("duration"); ok {
			dur, d := parseDuration(v, attr.Expr, "duration")
			add(d)
			spec.Duration = dur
		}
		res.Sleep = spec
	default:
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unknown activity kind",
			Detail: fmt.Sprintf("Activity %q has no kind to resolve.", a.Name), Subject: r.defRange.Ptr()})
	}
	res.Sensitive = sensitive
	if res.HTTP != nil {
		res.Sensitive = append(res.Sensitive, httpSecrets(res.HTTP, parsedURL)...)
	}
	if red := NewRedactor(r.secrets, res.Sensitive); red != nil {
		// A message quoting a bad value must not quote a secret.
		for _, d := range diags {
			d.Summary, d.Detail = red.String(d.Summary), red.String(d.Detail)
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	return res, diags
}

func unknownDiag(attr *hcl.Attribute, missing []string) *hcl.Diagnostic {
	detail := "This value depends on outputs of upstream activities that are not known yet."
	if len(missing) > 0 {
		detail = fmt.Sprintf("This value depends on the outputs of %s, which are not known yet: the activity must succeed before this one can be resolved.",
			"activity."+strings.Join(missing, ", activity."))
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Upstream outputs not known",
		Detail:   detail,
		Subject:  attr.Expr.Range().Ptr(),
	}
}

// checkURL says what makes s unusable as an http activity's url ("" when
// nothing does), and returns it parsed (nil when it does not parse).
func checkURL(s string) (string, *url.URL) {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return err.Error(), nil
	case u.Scheme != "http" && u.Scheme != "https":
		return "the scheme must be http or https", u
	case u.Host == "":
		return "it has no host", u
	}
	return "", u
}

// badKeys is an error for each key of m that valid refuses, on attr:
// summary, and detail formatted with the key.
func badKeys(m map[string]string, attr *hcl.Attribute, valid func(string) bool, summary, detail string) hcl.Diagnostics {
	var diags hcl.Diagnostics
	for k := range m {
		if !valid(k) {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary,
				Detail: fmt.Sprintf(detail, k), Subject: attr.Expr.Range().Ptr()})
		}
	}
	return diags
}

// validEnvName reports whether k can name an environment variable.
func validEnvName(k string) bool { return k != "" && !strings.ContainsAny(k, "=\x00") }

// isToken reports whether s is an RFC 9110 token (methods, header names).
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r > 0x7e || r <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", r) {
			return false
		}
	}
	return true
}

// constantAttrs reports whether every expression of attrs is made of
// literals only: no variable, no function call (no guard either), so
// that its value is the same in any context, at load and at run time.
func constantAttrs(attrs []*hcl.Attribute) bool {
	for _, attr := range attrs {
		sx, ok := attr.Expr.(hclsyntax.Expression)
		if !ok || len(hclsyntax.Variables(sx)) > 0 {
			return false
		}
		calls := false
		_ = hclsyntax.VisitAll(sx, func(n hclsyntax.Node) hcl.Diagnostics {
			if _, isCall := n.(*hclsyntax.FunctionCallExpr); isCall {
				calls = true
			}
			return nil
		})
		if calls {
			return false
		}
	}
	return true
}
