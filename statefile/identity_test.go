package statefile

import (
	"testing"
	"time"

	"github.com/wf-engine/wf/statefile/record"
)

func TestIdentityIsRandomAndKept(t *testing.T) {
	dirA, dirB := t.TempDir(), t.TempDir()
	a := openT(t, dirA)
	idA := a.ID()
	closeT(t, a)
	b := openT(t, dirB)
	idB := b.ID()
	closeT(t, b)
	if !validID(idA) || !validID(idB) {
		t.Fatalf("identities %q, %q: want %d hex digits", idA, idB, idLen)
	}
	if idA == idB {
		t.Fatalf("two new states share identity %s", idA)
	}
	again := openT(t, dirA)
	defer closeT(t, again)
	if again.ID() != idA {
		t.Fatalf("reopened identity = %s, want %s", again.ID(), idA)
	}
}

func TestSpawnRoundTripAndDelete(t *testing.T) {
	s := openT(t, t.TempDir())
	defer closeT(t, s)
	sp := &record.Spawn{
		Workflow: "w", Instance: "k", Activity: "charge",
		Generation: 2, Number: 3, PID: 4242, StartTicks: 123456,
		BootID: "0b5f7a2c-1111-2222-3333-444455556666", Recorded: time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC),
	}
	if err := s.RecordSpawn(sp); err != nil {
		t.Fatal(err)
	}
	got, err := s.Spawns("w", "k")
	if err != nil {
		t.Fatal(err)
	}
	if g := got["charge"]; g == nil || *g != *sp {
		t.Fatalf("Spawns = %+v, want %+v", got["charge"], sp)
	}
	if err := s.RecordSpawn(&record.Spawn{Workflow: "w", Instance: "k", Activity: "x", Generation: 1, Number: 1}); err == nil {
		t.Fatal("a spawn without a pid was accepted")
	}
	if err := s.DeleteInstance("w", "k"); err != nil {
		t.Fatal(err)
	}
	got, err = s.Spawns("w", "k")
	if err != nil || len(got) != 0 {
		t.Fatalf("after DeleteInstance: Spawns = %v, %v; want none", got, err)
	}
}
