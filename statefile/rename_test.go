package statefile

import (
	"testing"

	"github.com/wf-engine/wf/statefile/record"
)

// TestDeleteActivity forgets one activity with its timer, attempts and
// spawn, and nothing of its neighbours (`fetch` vs `fetch["a"]`).
func TestDeleteActivity(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	commitT(t, s,
		record.Mutation{Instance: inst("w", "k")},
		record.Mutation{Activity: act("w", "k", "fetch", true)},
		record.Mutation{Activity: act("w", "k", `fetch["a"]`, true)},
		record.Mutation{Attempt: att("w", "k", "fetch", 1, 1)},
		record.Mutation{Attempt: att("w", "k", `fetch["a"]`, 1, 1)},
		record.Mutation{Spawn: &record.Spawn{Workflow: "w", Instance: "k", Activity: "fetch", Generation: 1, Number: 1, PID: 42}},
	)
	commitT(t, s, record.Mutation{DeleteActivity: &record.ActivityRef{Workflow: "w", Key: "k", Name: "fetch"}})
	acts, err := s.Activities("w", "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(acts) != 1 || acts[`fetch["a"]`] == nil {
		t.Errorf("activities left: %v", acts)
	}
	if atts, _ := s.Attempts("w", "k", "fetch"); len(atts) != 0 {
		t.Errorf("attempts left: %v", atts)
	}
	if atts, _ := s.Attempts("w", "k", `fetch["a"]`); len(atts) != 1 {
		t.Errorf("the element's attempts: %v", atts)
	}
	if sp, _ := s.Spawns("w", "k"); len(sp) != 0 {
		t.Errorf("spawns left: %v", sp)
	}
	timers, err := s.PendingTimers()
	if err != nil || len(timers) != 1 || timers[0].Name != `fetch["a"]` {
		t.Errorf("timers: %v %v", timers, err)
	}
	if err := s.Commit([]record.Mutation{{DeleteActivity: &record.ActivityRef{Workflow: "w", Key: "k"}}}); err == nil {
		t.Error("delete without a name accepted")
	}
}

// TestRenameActivity moves the record, timer, attempts and spawn, with the
// names inside them, in one commit with the record written after it.
func TestRenameActivity(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	old := act("w", "k", "charge_card", true)
	old.IdempotencyKey = "wf2-kept"
	commitT(t, s,
		record.Mutation{Instance: inst("w", "k")},
		record.Mutation{Activity: old},
		record.Mutation{Attempt: att("w", "k", "charge_card", 1, 1)},
		record.Mutation{Attempt: att("w", "k", "charge_card", 1, 2)},
		record.Mutation{Spawn: &record.Spawn{Workflow: "w", Instance: "k", Activity: "charge_card", Generation: 1, Number: 2, PID: 42}},
	)
	moved := *old
	moved.Name = `charge["eu"]`
	commitT(t, s,
		record.Mutation{RenameActivity: &record.ActivityRename{Workflow: "w", Key: "k", From: "charge_card", To: `charge["eu"]`}},
		record.Mutation{Activity: &moved},
	)
	acts, _ := s.Activities("w", "k")
	if len(acts) != 1 || acts[`charge["eu"]`] == nil || acts[`charge["eu"]`].IdempotencyKey != "wf2-kept" {
		t.Fatalf("activities: %v", acts)
	}
	atts, _ := s.Attempts("w", "k", `charge["eu"]`)
	if len(atts) != 2 || atts[1].Activity != `charge["eu"]` || atts[1].Number != 2 {
		t.Errorf("attempts: %v", atts)
	}
	if old, _ := s.Attempts("w", "k", "charge_card"); len(old) != 0 {
		t.Errorf("old attempts: %v", old)
	}
	sp, _ := s.Spawns("w", "k")
	if len(sp) != 1 || sp[`charge["eu"]`] == nil || sp[`charge["eu"]`].Activity != `charge["eu"]` {
		t.Errorf("spawns: %v", sp)
	}
	timers, _ := s.PendingTimers()
	if len(timers) != 1 || timers[0].Name != `charge["eu"]` {
		t.Errorf("timers: %v", timers)
	}
	// Renaming what is not there changes nothing.
	commitT(t, s, record.Mutation{RenameActivity: &record.ActivityRename{Workflow: "w", Key: "k", From: "nothing", To: "x"}})
	if acts, _ := s.Activities("w", "k"); len(acts) != 1 {
		t.Errorf("after a rename of nothing: %v", acts)
	}
}
