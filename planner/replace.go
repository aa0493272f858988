package planner

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/wf-engine/wf/config"
)

// replaceSet holds what -replace names: "workflow\x00NAME" for an
// activity (with for_each: all its elements) or "workflow\x00NAME[KEY]"
// for one element.
type replaceSet map[string]bool

func replaceKey(wf, name string) string { return wf + "\x00" + name }

// replaced reports whether -replace names a (an activity or element).
func (s replaceSet) replaced(wf string, a *config.Activity) bool {
	return s[replaceKey(wf, a.Name)] || (a.IsElement && s[replaceKey(wf, a.Block)])
}

// parseReplace reads -replace addresses: activity.NAME,
// activity.NAME["KEY"], or either after "WORKFLOW.". An address that names
// nothing is an error with the closest address suggested.
func parseReplace(addrs []string, wfs []*config.Workflow) (replaceSet, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	set := replaceSet{}
	for _, raw := range addrs {
		wfName, rest := "", raw
		if !strings.HasPrefix(raw, "activity.") {
			if w, r, ok := strings.Cut(raw, "."); ok && strings.HasPrefix(r, "activity.") {
				wfName, rest = w, r
			}
		}
		addr, err := config.ParseAddress(rest)
		if err != nil {
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Invalid replace address",
				Detail:   fmt.Sprintf("%q is not an activity address; use activity.NAME, activity.NAME[\"KEY\"] for an element, or WORKFLOW.activity.NAME.", raw),
			})
			continue
		}
		matched := false
		var candidates, hits []string
		for _, wf := range wfs {
			if wfName != "" && wf.Name != wfName {
				continue
			}
			a := wf.Activity(addr.Name)
			for _, c := range wf.Activities {
				candidates = append(candidates, "activity."+c.Name)
			}
			switch {
			case a == nil:
			case addr.HasKey && a.ForEach == nil:
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Replace address names an element of an activity without for_each",
					Detail:   fmt.Sprintf("-replace=%s: activity.%s has no for_each, so it has no elements; use -replace=activity.%s.", raw, a.Name, a.Name),
				})
				matched = true
			case addr.HasKey && a.ForEach.Known() && !hasKey(a.StaticKeys(), addr.Key):
				detail := fmt.Sprintf("-replace=%s: activity.%s has no element %q.", raw, a.Name, addr.Key)
				if k := config.Suggest(addr.Key, a.StaticKeys()); k != "" {
					detail += " Did you mean " + config.Address{Name: a.Name, Key: k, HasKey: true}.String() + "?"
				}
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Replace address matches no element", Detail: detail})
				matched = true
			default:
				hits = append(hits, wf.Name)
				matched = true
			}
		}
		if d := ambiguousReplace(raw, addr, hits); d != nil {
			diags = append(diags, d)
			continue
		}
		for _, w := range hits {
			set[replaceKey(w, addr.StateName())] = true
		}
		if !matched {
			detail := fmt.Sprintf("-replace=%s does not name an activity of the planned workflows.", raw)
			if wfName != "" {
				var names []string
				for _, wf := range wfs {
					names = append(names, wf.Name)
				}
				if s := config.Suggest(wfName, names); s != "" && s != wfName {
					detail += fmt.Sprintf(" Did you mean %s.%s?", s, addr)
				}
			} else {
				detail += didYouMean(addr.String(), candidates)
			}
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Replace address matches no activity",
				Detail:   detail,
			})
		}
	}
	return set, diags
}

// ambiguousReplace is the error of a short address (activity.NAME) that
// names an activity of several workflows, listing the full addresses to
// choose from, so that one -replace never re-runs two activities by
// surprise; nil for one workflow (or none: said by the caller).
func ambiguousReplace(raw string, addr config.Address, workflows []string) *hcl.Diagnostic {
	if len(workflows) < 2 {
		return nil
	}
	full := make([]string, len(workflows))
	for i, wf := range workflows {
		full[i] = "-replace=" + wf + "." + addr.String()
	}
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Ambiguous replace address",
		Detail: fmt.Sprintf("-replace=%s names an activity of %d workflows; say which with its full address: %s.",
			raw, len(workflows), strings.Join(full, " or ")),
	}
}

func hasKey(keys []string, k string) bool {
	for _, x := range keys {
		if x == k {
			return true
		}
	}
	return false
}

// didYouMean is " Did you mean X?" for the closest candidate, or "".
func didYouMean(name string, candidates []string) string {
	if s := config.Suggest(name, candidates); s != "" {
		return " Did you mean " + s + "?"
	}
	return ""
}
