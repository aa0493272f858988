// Package proc identifies processes through Linux's /proc and ends the
// processes of an attempt that a previous wf left running.
//
// A PID alone names nothing durable: once a process is gone its number is
// reused. So a process is the attempt's only when more than its PID
// matches: the boot (/proc/sys/kernel/random/boot_id) and the process
// start time (field 22 of /proc/PID/stat, in clock ticks since boot), or
// the attempt's own WF_IDEMPOTENCY_KEY and WF_ATTEMPT in its environment.
// Signals go through a pidfd opened and then checked against the start
// time, so that a PID reused between the check and the kill is never
// signalled.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Table reads one /proc tree. The zero value reads the real /proc and
// signals real processes.
type Table struct {
	// Root is the proc file system; "/proc" when empty. Tests point it
	// at a fake tree.
	Root string
	// Signal sends sig to the process pid if it is still the process that
	// started at startTicks; nil means the real thing (a pidfd). Tests
	// replace it.
	Signal func(pid int, startTicks uint64, sig syscall.Signal) error
	// SignalGroup sends sig to the process group pgid; nil means
	// kill(-pgid, sig).
	SignalGroup func(pgid int, sig syscall.Signal) error
	// Self is never signalled; os.Getpid() when zero.
	Self int

	// bootClock says whether CLOCK_BOOTTIME has been seen to give the
	// start times this table reads (SpawnTicks): 0 not yet known,
	// clockAgrees, clockDisagrees.
	bootClock atomic.Int32
}

const (
	clockAgrees    = 1
	clockDisagrees = -1
)

func (t *Table) root() string {
	if t.Root == "" {
		return "/proc"
	}
	return t.Root
}

func (t *Table) self() int {
	if t.Self == 0 {
		return os.Getpid()
	}
	return t.Self
}

// Stat is what wf needs from /proc/PID/stat.
type Stat struct {
	PID int
	// State is the one-letter state: R, S, D, Z (zombie), X (dead), ...
	State byte
	PPID  int
	PGRP  int
	// StartTicks is when the process started, in clock ticks since boot.
	StartTicks uint64
}

// Exited reports whether the process has exited (a zombie has: only its
// parent's wait is left).
func (s Stat) Exited() bool { return s.State == 'Z' || s.State == 'X' }

// ErrNoProcess is returned (wrapped) when a process does not exist.
var ErrNoProcess = errors.New("no such process")

// Stat reads /proc/PID/stat.
func (t *Table) Stat(pid int) (Stat, error) {
	b, err := os.ReadFile(filepath.Join(t.root(), strconv.Itoa(pid), "stat"))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
			return Stat{}, fmt.Errorf("process %d: %w", pid, ErrNoProcess)
		}
		return Stat{}, fmt.Errorf("read stat of process %d: %w", pid, err)
	}
	st, err := ParseStat(b)
	if err != nil {
		return Stat{}, fmt.Errorf("process %d: %w", pid, err)
	}
	return st, nil
}

// ParseStat parses the contents of /proc/PID/stat. The command name
// (field 2) is in parentheses and may itself contain spaces and
// parentheses, so the fields after it are found from its last ')'.
func ParseStat(b []byte) (Stat, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 1 || end < open {
		return Stat{}, errors.New("malformed stat: no (comm)")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return Stat{}, fmt.Errorf("malformed stat: pid: %v", err)
	}
	// rest starts at field 3 (state).
	rest := strings.Fields(string(b[end+1:]))
	if len(rest) < 20 {
		return Stat{}, fmt.Errorf("malformed stat: %d fields after comm, want at least 20", len(rest))
	}
	if len(rest[0]) != 1 {
		return Stat{}, fmt.Errorf("malformed stat: state %q", rest[0])
	}
	ppid, err1 := strconv.Atoi(rest[1])
	pgrp, err2 := strconv.Atoi(rest[2])
	start, err3 := strconv.ParseUint(rest[19], 10, 64) // field 22
	if err := errors.Join(err1, err2, err3); err != nil {
		return Stat{}, fmt.Errorf("malformed stat: %v", err)
	}
	return Stat{PID: pid, State: rest[0][0], PPID: ppid, PGRP: pgrp, StartTicks: start}, nil
}

// StartTicks is the start time of process pid (field 22 of its stat).
func (t *Table) StartTicks(pid int) (uint64, error) {
	st, err := t.Stat(pid)
	if err != nil {
		return 0, err
	}
	return st.StartTicks, nil
}

// userHZ is the unit of the start time in /proc/PID/stat: Linux's
// USER_HZ, 100 on every architecture Go runs on (SpawnTicks checks it
// against /proc before relying on it).
const userHZ = 100

// bootTicks converts a CLOCK_BOOTTIME reading to clock ticks as the
// kernel converts a process's start (nsec_to_clock_t: rounded down).
func bootTicks(d time.Duration) uint64 { return uint64(d / (time.Second / userHZ)) }

// SpawnTicks is the start time (StartTicks) of pid, a child this process
// has just forked and not yet waited for, with CLOCK_BOOTTIME read just
// before and just after the fork (0: not read). The kernel stamped the
// child's start between the two, so when both fall in the same clock tick
// that tick is its start time, and /proc is not read: a file open, read
// and close that was a tenth of the engine's CPU per exec attempt. (No
// other process can hold the PID yet: the child is not reaped.) Otherwise,
// for a fake /proc (Root), and until /proc has once confirmed that the
// clock gives its start times (a time namespace, another USER_HZ), it
// reads /proc as StartTicks does; every read checks the clock again.
func (t *Table) SpawnTicks(pid int, before, after time.Duration) (uint64, error) {
	known := before > 0 && after >= before && t.Root == ""
	lo, hi := bootTicks(before), bootTicks(after)
	if known && lo == hi && t.bootClock.Load() == clockAgrees {
		return lo, nil
	}
	ticks, err := t.StartTicks(pid)
	if err == nil && known && t.bootClock.Load() != clockDisagrees {
		if ticks >= lo && ticks <= hi {
			t.bootClock.CompareAndSwap(0, clockAgrees)
		} else {
			t.bootClock.Store(clockDisagrees)
		}
	}
	return ticks, err
}

// BootID identifies the current boot of the machine.
func (t *Table) BootID() (string, error) {
	b, err := os.ReadFile(filepath.Join(t.root(), "sys", "kernel", "random", "boot_id"))
	if err != nil {
		return "", fmt.Errorf("read boot id: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// PIDs lists the processes in the table.
func (t *Table) PIDs() ([]int, error) {
	ents, err := os.ReadDir(t.root())
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var out []int
	for _, e := range ents {
		if pid, err := strconv.Atoi(e.Name()); err == nil && pid > 0 {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Environ is the environment process pid was started with, as a set of
// NAME=VALUE entries; empty when it cannot be read (another user's
// process, a kernel thread, or one that is gone).
func (t *Table) Environ(pid int) map[string]bool {
	b, err := os.ReadFile(filepath.Join(t.root(), strconv.Itoa(pid), "environ"))
	if err != nil || len(b) == 0 {
		return nil
	}
	env := map[string]bool{}
	for _, entry := range bytes.Split(b, []byte{0}) {
		if len(entry) > 0 {
			env[string(entry)] = true
		}
	}
	return env
}

// signal sends sig to pid if it is still the process that started at
// startTicks.
func (t *Table) signal(pid int, startTicks uint64, sig syscall.Signal) error {
	if pid == t.self() {
		return fmt.Errorf("process %d is wf itself", pid)
	}
	if t.Signal != nil {
		return t.Signal(pid, startTicks, sig)
	}
	return t.pidfdSignal(pid, startTicks, sig)
}

func (t *Table) signalGroup(pgid int, sig syscall.Signal) error {
	if t.SignalGroup != nil {
		return t.SignalGroup(pgid, sig)
	}
	err := syscall.Kill(-pgid, sig)
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}

// Linux system call numbers, the same on every architecture (they come
// from the unified table added in Linux 5.1).
const (
	sysPidfdSendSignal = 424
	sysPidfdOpen       = 434
)

// pidfdSignal opens a pidfd for pid, checks that it is still the process
// that started at startTicks (a pidfd keeps naming the same process even
// if the PID is reused afterwards), then signals through the pidfd.
// Without pidfds (Linux before 5.3) it falls back to a check and kill(2),
// which leaves a window of a few microseconds.
func (t *Table) pidfdSignal(pid int, startTicks uint64, sig syscall.Signal) error {
	fd, _, errno := syscall.Syscall(sysPidfdOpen, uintptr(pid), 0, 0)
	if errno == syscall.ENOSYS {
		if ticks, err := t.StartTicks(pid); err != nil || ticks != startTicks {
			return nil // gone or reused: not ours any more
		}
		return ignoreGone(syscall.Kill(pid, sig))
	}
	if errno != 0 {
		return ignoreGone(errno)
	}
	defer syscall.Close(int(fd))
	if ticks, err := t.StartTicks(pid); err != nil || ticks != startTicks {
		return nil
	}
	_, _, errno = syscall.Syscall6(sysPidfdSendSignal, fd, uintptr(sig), 0, 0, 0, 0)
	if errno != 0 {
		return ignoreGone(errno)
	}
	return nil
}

func ignoreGone(err error) error {
	if errors.Is(err, syscall.ESRCH) {
		return nil
	}
	return err
}
