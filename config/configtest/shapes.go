// Package configtest writes synthetic configurations for the scale tests
// and benchmarks of several packages, so that the planner's in-process
// benchmark and the whole-binary ones in cmd/wf measure the same file.
package configtest

import (
	"fmt"
	"strings"
)

// Blocks is a workflow "big" of n separate activity blocks in a binary
// tree of dependencies, half through a data reference
// (tostring(activity.PARENT.exit_code)) and half through depends_on, each
// an exec with the named policy retry_policy.std.
func Blocks(n int) string {
	var b strings.Builder
	b.WriteString("retry_policy \"std\" {\n  initial_interval = \"1s\"\n  maximum_attempts = 3\n}\n\nworkflow \"big\" {\n")
	for i := range n {
		fmt.Fprintf(&b, "  activity \"a%06d\" {\n", i)
		parent := (i - 1) / 2
		switch {
		case i > 0 && i%2 == 1:
			fmt.Fprintf(&b, "    exec { command = [\"true\", \"%d\", tostring(activity.a%06d.exit_code)] }\n", i, parent)
		case i > 0:
			fmt.Fprintf(&b, "    exec { command = [\"true\", \"%d\"] }\n    depends_on = [activity.a%06d]\n", i, parent)
		default:
			fmt.Fprintf(&b, "    exec { command = [\"true\", \"%d\"] }\n", i)
		}
		b.WriteString("    retry = retry_policy.std\n  }\n")
	}
	b.WriteString("}\n")
	return b.String()
}
