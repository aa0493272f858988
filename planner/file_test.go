package planner

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestPlanFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "order.wfplan")
	p := symbolsPlan()
	p.Instances[0].StateHash = "abc"
	load := LoadInputs{Dir: "/cfg", Vars: []string{"order_id=7"}, VarFiles: []string{"prod.wfvars"},
		Env: map[string]string{"WF_VAR_region": "eu"}, Workflow: "order", Replace: []string{"activity.ship"}}
	if err := WriteFile(path, p, load); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != 0o600 {
		t.Errorf("plan file mode %v, want 0600", info.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary files left behind: %v", entries)
	}
	got, gotLoad, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotLoad, load) {
		t.Errorf("load inputs = %+v, want %+v", gotLoad, load)
	}
	// Compare through JSON: time.Time's monotonic/location details aside,
	// the plan must survive unchanged.
	a, _ := json.Marshal(p)
	b, _ := json.Marshal(got)
	if string(a) != string(b) {
		t.Errorf("plan changed in the round trip\n got %s\nwant %s", b, a)
	}
	if err := CheckStale(p, got); err != nil {
		t.Errorf("CheckStale after round trip: %v", err)
	}
}

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	tests := []struct {
		name, path, want string
	}{
		{"missing", filepath.Join(dir, "nope"), "read plan file"},
		{"garbage", write("garbage", "\x00\x01not json"), "not a wf plan file"},
		{"other json", write("other.json", `{"hello": "world"}`), "not a wf plan file"},
		{"future version", write("future", `{"tool": "wf-plan", "format_version": 99, "plan": {}}`), "format version 99"},
		{"no plan", write("noplan", `{"tool": "wf-plan", "format_version": 1}`), "holds no plan"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, _, err := ReadFile(tt.path)
			if err == nil || p != nil {
				t.Fatalf("ReadFile = %v, %v; want an error", p, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
		})
	}
}

func TestWriteFileError(t *testing.T) {
	err := WriteFile(filepath.Join(t.TempDir(), "no", "such", "dir", "p"), &Plan{}, LoadInputs{})
	if err == nil || !strings.Contains(err.Error(), "write plan file") {
		t.Errorf("err = %v", err)
	}
}

func TestCheckStale(t *testing.T) {
	base := func() *Plan {
		return &Plan{ConfigHash: "cfg", Instances: []InstancePlan{
			{Workflow: "order", Key: "order-1001", StateHash: "s1"},
			{Workflow: "billing", Key: "default", StateHash: "s2"},
		}}
	}
	tests := []struct {
		name   string
		mutate func(p *Plan)
		want   string
	}{
		{"same", func(*Plan) {}, ""},
		{"config changed", func(p *Plan) { p.ConfigHash = "cfg2" }, "saved plan is stale: configuration changed since it was created"},
		{"state changed", func(p *Plan) { p.Instances[0].StateHash = "s1b" }, "saved plan is stale: state of order/order-1001 changed since it was created"},
		{"new instance", func(p *Plan) {
			p.Instances = append(p.Instances, InstancePlan{Workflow: "x", Key: "y"})
		}, "saved plan is stale: state of x/y changed"},
		{"instance gone", func(p *Plan) { p.Instances = p.Instances[:1] }, "saved plan is stale: instance billing/default is no longer planned"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fresh := base()
			tt.mutate(fresh)
			err := CheckStale(base(), fresh)
			if tt.want == "" {
				if err != nil {
					t.Errorf("CheckStale = %v, want nil", err)
				}
				return
			}
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) || !errors.Is(err, ErrStale) {
				t.Errorf("CheckStale = %v, want %q wrapping ErrStale", err, tt.want)
			}
		})
	}
}
