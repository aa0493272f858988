package metrics

import "strings"

// FamilyNames lists the wf_* family names, space-separated, for tests.
func FamilyNames() string {
	var names []string
	for _, f := range allFamilies {
		names = append(names, f.name)
	}
	return strings.Join(names, " ")
}
