package config

import "github.com/hashicorp/hcl/v2"

// loadHeartbeat decodes heartbeat_timeout (SPEC §11): only an exec
// activity runs a process that can write to $WF_HEARTBEAT_FILE.
func (l *loader) loadHeartbeat(a *Activity, attr *hcl.Attribute) {
	if attr == nil {
		return
	}
	v, ok := l.evalStatic(attr.Expr, scope{where: "heartbeat_timeout"})
	if !ok || v.IsNull() {
		return
	}
	d, diag := parseDuration(v, attr.Expr, "heartbeat_timeout")
	switch {
	case diag != nil:
		l.addDiags(hcl.Diagnostics{diag})
	case d <= 0:
		l.errorf(attr.Expr.Range().Ptr(), "Invalid heartbeat_timeout",
			"heartbeat_timeout must be longer than zero; leave it out if the activity does not heartbeat.")
	case a.Kind != "" && a.Kind != KindExec:
		l.errorf(attr.NameRange.Ptr(), "heartbeat_timeout on a "+string(a.Kind)+" activity",
			"Only an exec activity heartbeats (by writing to $WF_HEARTBEAT_FILE); activity %q is %s.", a.Name, a.Kind)
	default:
		a.HeartbeatTimeout = d
	}
}
