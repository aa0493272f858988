package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Two activities that hang on their first run only (a marker file says
// it ran), each writing its pid so that the test can end it. "two" starts
// half a second after "one" (behind a durable sleep): by then one's spawn
// record has been written alone, unsynced (the store was idle), and two's
// start is the synced commit that follows it. Started together, both
// spawn records would go into one write with nothing after it.
const powerLossHCL = `
workflow "pl" {
  key = "p-1"
  activity "one" {
    exec {
      command = ["sh", "-c", "test -e ran.one && exit 0; touch ran.one; echo $$ > pid.one; exec sleep 60"]
    }
  }
  activity "gate" {
    sleep {
      duration = "500ms"
    }
  }
  activity "two" {
    exec {
      command = ["sh", "-c", "test -e ran.two && exit 0; touch ran.two; echo $$ > pid.two; exec sleep 60"]
    }
    depends_on = [activity.gate]
  }
}
`

// TestPowerLossAfterSpawnReopens: the real binary records an exec
// attempt's spawn (written, not synced), then commits the next attempt's
// start, which syncs both. A power loss during that sync can keep the
// commit's sector and lose the spawn's. The state on disk is made exactly
// that (the spawn's sector zeroed, nothing after the commit), from a wf
// killed with -9; the next wf apply must open it, repaired (not "damaged"),
// and finish the workflow.
func TestPowerLossAfterSpawnReopens(t *testing.T) {
	dir := durSetup(t, powerLossHCL)
	p := durStart(t, dir)
	for _, name := range []string{"one", "two"} {
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := os.Stat(filepath.Join(dir, "pid."+name)); err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("activity %s never started; stderr:\n%s", name, p.stderr.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	p.kill9(t)
	for _, name := range []string{"one", "two"} {
		b, _ := os.ReadFile(filepath.Join(dir, "pid."+name))
		var pid int
		if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
			_ = syscall.Kill(-pid, syscall.SIGKILL)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}

	segs, _ := filepath.Glob(filepath.Join(dir, ".wf", "wal", "*.wal"))
	sort.Strings(segs)
	if len(segs) == 0 {
		t.Fatal("no log segment")
	}
	seg := segs[len(segs)-1]
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	// The first record flagged "written after an unsynced record" (bit 0
	// of the flags at offset 16), and the spawn before it.
	spawn, flagged, end := int64(-1), int64(-1), int64(-1)
	prev := int64(-1)
	for off := int64(512); off+24 <= int64(len(data)); {
		if binary.BigEndian.Uint32(data[off:]) != 0x57465231 {
			break
		}
		n := int64(binary.BigEndian.Uint32(data[off+4:]))
		span := (24 + n + 4 + 511) / 512 * 512
		if binary.BigEndian.Uint32(data[off+16:])&1 != 0 {
			// The previous record's first op is a set (0) of a key in the
			// spawn table ('p') after a one-byte key length.
			if prev >= 0 && data[prev+24] == 0 && data[prev+26] == 'p' {
				spawn, flagged, end = prev, off, off+span
				break
			}
		}
		prev = off
		off += span
	}
	if flagged < 0 {
		t.Fatalf("no record flagged after an unsynced spawn in %s", seg)
	}
	clear(data[spawn : spawn+512]) // the spawn never reached the disk
	clear(data[end:])              // nothing after the commit was written yet
	if err := os.WriteFile(seg, data, 0o600); err != nil {
		t.Fatal(err)
	}
	// The memtables hold what the log held and more; a power loss would
	// have lost what they had beyond the log, and the next writer removes
	// them anyway.
	mems, _ := filepath.Glob(filepath.Join(dir, ".wf", "db", "*.mem"))
	for _, m := range mems {
		os.Remove(m)
	}

	chk := runStateWF(t, nil, "state", "check", dir)
	if chk.code != 0 || !strings.Contains(chk.stdout, "cut short by a power loss") {
		t.Fatalf("state check: exit %d\n%s%s", chk.code, chk.stdout, chk.stderr)
	}
	o := runStateWF(t, nil, "apply", "-auto-approve", dir)
	if o.code != 0 {
		t.Fatalf("apply after the power loss: exit %d\n%s%s", o.code, o.stdout, o.stderr)
	}
	list := runStateWF(t, nil, "state", "list", dir)
	if !strings.Contains(list.stdout, "pl/p-1  3 activities: 3 succeeded") {
		t.Fatalf("the workflow did not finish after the repair:\n%s%s", list.stdout, list.stderr)
	}
	if chk := runStateWF(t, nil, "state", "check", dir); chk.code != 0 || strings.Contains(chk.stdout, "cut short") {
		t.Fatalf("state check after the repair: exit %d\n%s%s", chk.code, chk.stdout, chk.stderr)
	}
}
