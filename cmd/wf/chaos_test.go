package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// chaosActivity is every attempt of the chaos workflow: it logs its start,
// does a slow side effect in a child process (which a kill -9 of wf does
// not take down with it: only the next wf's supervision can), waits for
// it, then fails the first $FAILS times it gets that far (counted in a
// file it replaces by a rename, so that a kill cannot reset the count).
const chaosActivity = `#!/bin/sh
echo "start $WF_IDEMPOTENCY_KEY $WF_ATTEMPT $(date +%s%N) $WF_INSTANCE $WF_ACTIVITY" >> "$LOG"
(
  sleep "$EFFECT"
  echo "effect $WF_IDEMPOTENCY_KEY $WF_ATTEMPT $(date +%s%N) $WF_INSTANCE $WF_ACTIVITY" >> "$LOG"
) &
wait
counter="count.$WF_IDEMPOTENCY_KEY"
# read is the shell's own: no child to be killed apart from the script.
n=0
if [ -s "$counter" ]; then read -r n < "$counter"; fi
n=$((n + 1))
# Written aside and renamed: a kill between the truncation of "> counter"
# and its write would leave it empty, which reads as 0, and the activity
# would fail more often than FAILS (its own bookkeeping, not the engine's).
echo "$n" > "$counter.tmp"
mv "$counter.tmp" "$counter"
if [ "$n" -le "${FAILS:-0}" ]; then
  if [ -n "$ERROR_TYPE" ]; then
    echo "{\"type\": \"$ERROR_TYPE\"}" > "$WF_ERROR_FILE"
  fi
  exit 3
fi
echo '{"ok": true}'
`

// chaosHCL mixes single-attempt activities, a retryable_errors allowlist,
// retrying activities with backoff, ordered rules and a durable sleep.
const chaosHCL = `
variable "round" { default = "0" }

workflow "chaos" {
  key = "round-${var.round}"

  activity "once" {
    exec {
      command = ["./act.sh"]
      env     = { LOG = "log", EFFECT = "0.25" }
    }
  }
  activity "allowlist" {
    exec {
      command = ["./act.sh"]
      env     = { LOG = "log", EFFECT = "0.15", FAILS = "1", ERROR_TYPE = "NotReady" }
    }
    retry {
      initial_interval = "100ms"
      maximum_attempts = 3
      retryable_errors = ["NotReady"]
    }
  }
  activity "retrying" {
    exec {
      command = ["./act.sh"]
      env     = { LOG = "log", EFFECT = "0.2", FAILS = "2" }
    }
    timeout = "20s"
    retry {
      initial_interval = "150ms"
      maximum_attempts = 4
    }
  }
  activity "ordered" {
    exec {
      command = ["./act.sh"]
      env     = { LOG = "log", EFFECT = "0.1", FAILS = "1" }
    }
    retry {
      on               = ["exit:3"]
      initial_interval = "200ms"
      maximum_attempts = 3
    }
    retry {
      maximum_attempts = 1
    }
    depends_on = [activity.once]
  }
  activity "pause" {
    sleep { duration = "300ms" }
    depends_on = [activity.allowlist]
  }
  activity "charge" {
    exec {
      command = ["./act.sh"]
      env     = { LOG = "log", EFFECT = "0.3" }
    }
    depends_on = [activity.pause, activity.retrying]
  }
  activity "final" {
    exec {
      command = ["./act.sh"]
      env     = { LOG = "log", EFFECT = "0.2" }
    }
    depends_on = [activity.charge, activity.ordered]
  }
}
`

type chaosLine struct {
	kind     string // start | effect
	key      string
	attempt  int
	at       int64 // the process's own clock, ns
	instance string
	activity string
}

func readChaosLog(t *testing.T, path string) []chaosLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []chaosLine
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.Fields(l)
		if len(f) != 6 {
			continue
		}
		n, _ := strconv.Atoi(f[2])
		at, _ := strconv.ParseInt(f[3], 10, 64)
		out = append(out, chaosLine{kind: f[0], key: f[1], attempt: n, at: at, instance: f[4], activity: f[5]})
	}
	return out
}

// TestChaosKills kill -9s wf apply at random moments, at least chaosKills
// times, restarting it after each kill, then lets the run finish. When an
// instance completes between kills, the next round starts a new one. Each
// round must end complete (next plan: No changes), with no two attempts of
// an activity overlapping in time (no side effect of attempt k after the
// start of a later attempt, on the processes' own clock) and every side
// effect of an activity under one idempotency key.
func TestChaosKills(t *testing.T) {
	const chaosKills = 50
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, seed>>7))
	dir := durSetup(t, chaosHCL)
	if err := os.WriteFile(filepath.Join(dir, "act.sh"), []byte(chaosActivity), 0o755); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	round, kills, runs := 0, 0, 0
	roundVar := func() string { return "round=" + strconv.Itoa(round) }
	// procs are the runs so far: what their attempts ended in goes into
	// a failure's message (chaosEnds).
	var procs []*durProc
	for kills < chaosKills {
		runs++
		p := durStart(t, dir, "-var", roundVar())
		procs = append(procs, p)
		// Kills land once the run has begun (its plan event is out):
		// in recovery, mid-attempt, in a backoff, mid-commit. Kills while
		// the state store opens are the store's own tests' business.
		waitRunning(p)
		var delay time.Duration
		if rng.IntN(10) < 7 {
			// Most kills land mid-attempt: some time after an attempt
			// started, while its side effect may be under way.
			deadline := time.Now().Add(30 * time.Second)
			for !p.hasEvent("attempt_started", nil) && time.Now().Before(deadline) {
				select {
				case <-p.done:
				case <-time.After(5 * time.Millisecond):
				}
				if p.exited() {
					break
				}
			}
			delay = time.Duration(rng.IntN(350)) * time.Millisecond
		} else {
			// The rest anywhere: start-up, recovery, a backoff, a commit.
			delay = time.Duration(rng.IntN(900)) * time.Millisecond
		}
		select {
		case <-p.done:
		case <-time.After(delay):
		}
		// A run that is still going is killed; one that exited on its
		// own, before the kill or in the instant between the check and
		// the signal, has its exit status judged.
		if p.exited() || !p.kill9IfRunning(t) {
			switch p.exit {
			case 0:
				round++ // this instance is complete: go on with a new one
				continue
			default:
				t.Fatalf("run %d (round %d) exited %d; stderr:\n%s\nlast events:\n%s\nhow the attempts of every run ended:\n%s\nthe activities' own log and counters:\n%s\nstate files:\n%s", runs, round, p.exit, p.stderr.String(), p.lastEvents(20), chaosEnds(procs), chaosTrail(dir), listDB(dir))
			}
		}
		kills++
	}
	// Let the last round finish.
	p := durStart(t, dir, "-var", roundVar())
	if code := p.wait(t, 120*time.Second); code != 0 {
		t.Fatalf("final run exited %d; stderr:\n%s", code, p.stderr.String())
	}
	t.Logf("%d kills over %d runs and %d rounds in %v", kills, runs+1, round+1, time.Since(began).Round(time.Millisecond))

	for r := 0; r <= round; r++ {
		out, err := runWF(t, "plan", "-no-color", "-var", "round="+strconv.Itoa(r), dir)
		if err != nil || !strings.Contains(out, "No changes.") {
			t.Errorf("round %d: plan after the chaos: %v\n%s", r, err, out)
		}
	}
	checkChaosLog(t, readChaosLog(t, filepath.Join(dir, "log")))
}

// waitRunning waits until p printed its first event or exited.
func waitRunning(p *durProc) {
	deadline := time.Now().Add(60 * time.Second)
	for !p.hasEvent("plan", nil) && !p.exited() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}

func (p *durProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func runWF(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(durBinary(t), args...).CombinedOutput()
	return string(out), err
}

// checkChaosLog checks the invariants on what the activities observed.
func checkChaosLog(t *testing.T, lines []chaosLine) {
	t.Helper()
	type actKey struct{ instance, activity string }
	by := map[actKey][]chaosLine{}
	keyOwner := map[string]actKey{}
	for _, l := range lines {
		k := actKey{l.instance, l.activity}
		by[k] = append(by[k], l)
		if o, ok := keyOwner[l.key]; ok && o != k {
			t.Errorf("key %s used by %v and %v", l.key, o, k)
		}
		keyOwner[l.key] = k
	}
	overlaps, effects := 0, 0
	for k, ls := range by {
		keys := map[string]bool{}
		for _, l := range ls {
			if l.kind == "effect" {
				keys[l.key] = true
				effects++
			}
		}
		if len(keys) > 1 {
			t.Errorf("%v: side effects under %d keys: %v", k, len(keys), keys)
		}
		if len(keys) == 0 {
			t.Errorf("%v: never did its side effect", k)
		}
		starts := map[int]int64{}
		var numbers []int
		for _, l := range ls {
			if l.kind == "start" {
				if _, dup := starts[l.attempt]; dup {
					t.Errorf("%v: attempt %d started twice", k, l.attempt)
				}
				starts[l.attempt] = l.at
				numbers = append(numbers, l.attempt)
			}
		}
		// Attempts start in order (numbers may be skipped: an attempt
		// killed before its process wrote a line).
		if !slices.IsSorted(numbers) {
			t.Errorf("%v: attempts started out of order: %v", k, numbers)
		}
		for _, l := range ls {
			if l.kind != "effect" {
				continue
			}
			for n, at := range starts {
				if n > l.attempt && l.at > at {
					overlaps++
					t.Errorf("%v: the side effect of attempt %d came %v after attempt %d started",
						k, l.attempt, time.Duration(l.at-at), n)
				}
			}
		}
	}
	t.Logf("%d activity executions, %d side effects, %d overlaps", len(by), effects, overlaps)
}

// chaosEnds lists how every attempt of the runs ended, run by run: the
// engine's side of what chaosTrail shows.
func chaosEnds(procs []*durProc) string {
	var b strings.Builder
	for i, p := range procs {
		p.mu.Lock()
		for _, ev := range p.events {
			switch ev["type"] {
			case "attempt_started", "attempt_failed", "attempt_succeeded", "orphan_ended", "activity_failed":
				errType := ""
				if e, ok := ev["error"].(map[string]any); ok {
					errType = fmt.Sprint(e["type"], " ", e["message"])
				}
				fmt.Fprintf(&b, "  run %d %s %v %s attempt %v %v %s\n", i+1, ev["@timestamp"], ev["instance"], ev["activity"], ev["attempt"], ev["type"], errType)
			}
		}
		p.mu.Unlock()
	}
	return b.String()
}

// chaosTrail is what the activities themselves wrote (their log of starts
// and side effects, and the counters of their failures), for a failure
// message: it tells an attempt the engine ran twice from one the activity
// counted wrong.
func chaosTrail(dir string) string {
	var b strings.Builder
	log, _ := os.ReadFile(filepath.Join(dir, "log"))
	b.Write(log)
	counters, _ := filepath.Glob(filepath.Join(dir, "count.wf*[0-9a-f]"))
	for _, c := range counters {
		n, _ := os.ReadFile(c)
		fmt.Fprintf(&b, "%s: %q\n", filepath.Base(c), n)
	}
	return b.String()
}

// listDB lists the state's database files with their sizes, for a failure
// message.
func listDB(dir string) string {
	ents, _ := os.ReadDir(filepath.Join(dir, ".wf", "db"))
	var b strings.Builder
	for _, e := range ents {
		if fi, err := e.Info(); err == nil {
			b.WriteString("  " + e.Name() + " " + strconv.FormatInt(fi.Size(), 10) + "\n")
		}
	}
	return b.String()
}

// TestTableLeftByAKillMidFlush: a kill -9 while Badger flushes or compacts
// leaves a table file its MANIFEST never lists (Badger writes the table,
// syncs it and only then records it). That is crash residue, not damage:
// plan reads the state and apply opens it and removes the file.
func TestTableLeftByAKillMidFlush(t *testing.T) {
	t.Parallel()
	dir := durSetup(t, `
workflow "w" {
  activity "a" {
    exec { command = ["true"] }
  }
}
`)
	applyOK(t, dir)
	stray := filepath.Join(dir, ".wf", "db", "999999.sst")
	if err := os.WriteFile(stray, []byte("half a table"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runWF(t, "plan", "-no-color", dir)
	if err != nil {
		t.Fatalf("plan refused a state with an unlisted table: %v\n%s", err, out)
	}
	if !strings.Contains(out, "up to date") {
		t.Fatalf("plan after the stray table:\n%s", out)
	}
	p := durStart(t, dir, "-replace", "activity.a")
	if code := p.wait(t, 60*time.Second); code != 0 {
		t.Fatalf("apply -replace with an unlisted table exited %d; stderr:\n%s", code, p.stderr.String())
	}
	if _, err := os.Stat(stray); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the unlisted table is still there after apply (stat: %v)", err)
	}
}
