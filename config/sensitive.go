package config

import (
	"encoding/json"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// sensitiveMark is the cty mark of values derived from a sensitive
// variable: cty carries it through every operator, function and template,
// so anything computed from a secret is known to be one.
type sensitiveMark struct{}

var markSensitive = sensitiveMark{}

// Redacted is what wf shows instead of a sensitive value.
const Redacted = "(sensitive)"

// MinRedacted is the shortest secret wf removes from what activities
// print: a shorter one would match all over ordinary output (a secret "1"
// would wipe every digit one).
const MinRedacted = 4

// isSensitive reports whether v, or anything inside it, carries the mark.
func isSensitive(v cty.Value) bool {
	if v == cty.NilVal {
		return false
	}
	return v.HasMark(markSensitive) || v.ContainsMarked()
}

// unmarkSensitive returns v without marks and the string forms of every
// part of it that was marked (the secrets it holds).
func unmarkSensitive(v cty.Value) (cty.Value, []string) {
	if !v.ContainsMarked() && !v.IsMarked() {
		return v, nil
	}
	plain, pvm := v.UnmarkDeepWithPaths()
	var out []string
	for _, pm := range pvm {
		if _, ok := pm.Marks[markSensitive]; !ok {
			continue
		}
		sub, err := pm.Path.Apply(plain)
		if err != nil {
			continue
		}
		out = appendLeaves(out, sub)
	}
	return plain, out
}

// appendLeaves appends the strings (and numbers, as written) inside v.
func appendLeaves(out []string, v cty.Value) []string {
	if !v.IsKnown() || v.IsNull() {
		return out
	}
	v, _ = v.Unmark()
	ty := v.Type()
	switch {
	case ty == cty.String:
		return append(out, v.AsString())
	case ty == cty.Number:
		return append(out, v.AsBigFloat().Text('f', -1))
	case ty.IsCollectionType() || ty.IsTupleType() || ty.IsObjectType():
		for it := v.ElementIterator(); it.Next(); {
			_, e := it.Element()
			out = appendLeaves(out, e)
		}
	}
	return out
}

// secretName reports whether a query parameter or header is named like a
// secret (SPEC §10): its value is redacted wherever wf shows it.
func secretName(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"token", "key", "secret", "password", "passwd", "authorization"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// httpSecrets returns the values of the request's query parameters and
// headers that are named like secrets, and the credentials of an
// Authorization-style value ("Bearer abc" gives "Bearer abc" and "abc").
// u is spec.URL already parsed (nil: not parsed yet, or it does not
// parse).
func httpSecrets(spec *HTTPSpec, u *url.URL) []string {
	var out []string
	add := func(v string) {
		out = append(out, v)
		if scheme, cred, ok := strings.Cut(v, " "); ok && scheme != "" && strings.TrimSpace(cred) != "" {
			out = append(out, strings.TrimSpace(cred))
		}
	}
	if u == nil {
		if p, err := url.Parse(spec.URL); err == nil {
			u = p
		}
	}
	if u != nil {
		// Query parses RawQuery; an empty one holds no names.
		query := url.Values(nil)
		if u.RawQuery != "" {
			query = u.Query()
		}
		for name, vals := range query {
			if secretName(name) {
				for _, v := range vals {
					add(v)
					// The URL as written may carry it escaped.
					out = append(out, url.QueryEscape(v))
				}
			}
		}
		if p, ok := u.User.Password(); ok {
			add(p)
		}
	}
	for name, v := range spec.Headers {
		if secretName(name) {
			add(v)
		}
	}
	return out
}

// Redactor removes secrets from text and from JSON outputs, replacing each
// with "(sensitive)". The zero value and nil redact nothing.
type Redactor struct {
	plain *strings.Replacer // raw forms
	json  *strings.Replacer // raw and JSON-escaped forms, inside JSON text
}

// NewRedactor returns a Redactor for the secrets of lists (duplicates and
// secrets shorter than MinRedacted are dropped); nil when there is none.
func NewRedactor(lists ...[]string) *Redactor {
	seen := map[string]bool{}
	var secrets []string
	for _, l := range lists {
		for _, s := range l {
			if len(s) >= MinRedacted && !seen[s] {
				seen[s] = true
				secrets = append(secrets, s)
			}
		}
	}
	if len(secrets) == 0 {
		return nil
	}
	// Longest first: where two overlap, the longer one is replaced whole.
	sort.Slice(secrets, func(i, j int) bool {
		if len(secrets[i]) != len(secrets[j]) {
			return len(secrets[i]) > len(secrets[j])
		}
		return secrets[i] < secrets[j]
	})
	var plain, js []string
	jsSeen := map[string]bool{}
	for _, s := range secrets {
		plain = append(plain, s, Redacted)
		for _, form := range []string{s, jsonEscape(s)} {
			if !jsSeen[form] {
				jsSeen[form] = true
				js = append(js, form, Redacted)
			}
		}
	}
	return &Redactor{plain: strings.NewReplacer(plain...), json: strings.NewReplacer(js...)}
}

// String returns s with every secret replaced.
func (r *Redactor) String(s string) string {
	if r == nil || s == "" {
		return s
	}
	return r.plain.Replace(s)
}

// JSON returns a JSON document with every secret inside its strings
// replaced; it stays valid JSON (a secret that is part of a number is left
// alone rather than breaking the document).
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if r == nil || len(raw) == 0 {
		return raw
	}
	out := r.json.Replace(string(raw))
	if out == string(raw) {
		return raw
	}
	if json.Valid([]byte(out)) {
		return json.RawMessage(out)
	}
	// The secret was (part of) a number or broke an escape: redact the
	// decoded strings instead.
	var v any
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return raw
	}
	b, err := json.Marshal(r.walk(v))
	if err != nil {
		return raw
	}
	return b
}

func (r *Redactor) walk(v any) any {
	switch x := v.(type) {
	case string:
		return r.String(x)
	case []any:
		for i := range x {
			x[i] = r.walk(x[i])
		}
		return x
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[r.String(k)] = r.walk(e)
		}
		return out
	}
	return v
}

// jsonEscape is s as encoding/json writes it inside a string.
func jsonEscape(s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		return s
	}
	q := string(b)
	if u, err := strconv.Unquote(q); err == nil && u == s && !strings.ContainsAny(q, "\\") {
		return s
	}
	return q[1 : len(q)-1]
}
