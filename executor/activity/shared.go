package activity

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
)

// execShared is what exec attempts share instead of creating it per
// attempt. On this project's reference machine a per-attempt directory with
// two pre-created files cost more CPU than the fork/exec itself (see
// docs/performance.md), so a Runner keeps:
//
//   - one private directory, created on the first exec attempt and removed
//     by Runner.Close. Each attempt gets two fresh paths in it, numbered by
//     a counter so no two attempts ever share one; the files are not
//     created up front: the activity creates them by writing them, Run
//     reads and removes them after the process exits, and a missing file
//     means the activity wrote nothing. Removing the directory whenever no
//     attempt runs instead would cost a mkdir and an rmdir per attempt of
//     a sequential workflow (0.33 ms on the reference disk);
//   - /dev/null opened once, as every process's stdin (os/exec would open
//     and close it per process);
//   - resolved program paths per (name, PATH, working directory), like a
//     shell's command hash table.
type execShared struct {
	// mu is read-held by each exec attempt from acquire to release, and
	// write-held to set up or to tear down, so Close never removes the
	// directory under a running attempt.
	mu      sync.RWMutex
	setupMu sync.Mutex // serialises setup
	dir     string
	devNull *os.File
	seq     atomic.Uint64

	paths sync.Map // pathKey -> string
}

// attemptFiles are one attempt's $WF_OUTPUT_FILE and $WF_ERROR_FILE paths
// and its stdin.
type attemptFiles struct {
	output, error, heartbeat string
	stdin                    *os.File
}

// acquire returns fresh paths for one attempt, setting up the shared
// directory first if needed. The caller must call release once the
// attempt's process has exited and its files are read.
func (s *execShared) acquire(tempDir string) (attemptFiles, error) {
	for {
		s.mu.RLock()
		if s.dir != "" {
			n := strconv.FormatUint(s.seq.Add(1), 10)
			return attemptFiles{
				output:    filepath.Join(s.dir, n+".output.json"),
				error:     filepath.Join(s.dir, n+".error.json"),
				heartbeat: filepath.Join(s.dir, n+".heartbeat"),
				stdin:     s.devNull,
			}, nil
		}
		s.mu.RUnlock()
		if afterEmptyCheck != nil {
			afterEmptyCheck()
		}
		if err := s.setup(tempDir); err != nil {
			return attemptFiles{}, err
		}
	}
}

// release ends an attempt started by a successful acquire.
func (s *execShared) release() { s.mu.RUnlock() }

// afterEmptyCheck, when set (by tests), runs in acquire between finding
// no directory and setting one up.
var afterEmptyCheck func()

// setup creates the directory and opens /dev/null unless another attempt
// did meanwhile. It takes mu for writing only once it knows the directory
// is missing, when no attempt can hold mu for long: had it waited for mu
// first, as it did, an attempt that set the directory up just before
// would hold the read lock for its whole run, and the waiting writer
// would block every attempt starting meanwhile (a sync.RWMutex lets no
// new reader in while a writer waits) until that one ended; in
// TestDashboardInTmux every attempt stayed "running" behind an attempt
// that ran for good.
func (s *execShared) setup(tempDir string) error {
	s.setupMu.Lock()
	defer s.setupMu.Unlock()
	s.mu.RLock()
	done := s.dir != ""
	s.mu.RUnlock()
	if done {
		return nil
	}
	dir, err := os.MkdirTemp(tempDir, "wf-attempts-*")
	if err != nil {
		return fmt.Errorf("create attempt directory: %w", err)
	}
	devNull, err := os.Open(os.DevNull)
	if err != nil {
		_ = os.Remove(dir)
		return fmt.Errorf("open %s: %w", os.DevNull, err)
	}
	// Only setup sets the directory, one at a time (setupMu): it is
	// still missing, so readers hold mu only for the check in acquire.
	s.mu.Lock()
	s.dir, s.devNull = dir, devNull
	s.mu.Unlock()
	return nil
}

// close removes the directory and closes /dev/null; acquire sets them up
// again if the Runner is used afterwards.
func (s *execShared) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dir == "" {
		return nil
	}
	var errs []error
	if err := os.RemoveAll(s.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove attempt directory: %w", err))
	}
	if err := s.devNull.Close(); err != nil {
		errs = append(errs, fmt.Errorf("close %s: %w", os.DevNull, err))
	}
	s.dir, s.devNull = "", nil
	return errors.Join(errs...)
}

type pathKey struct{ name, pathEnv, dir string }

// lookPath is the package's lookPath with a cache; cached reports a hit.
// Only successes are cached. A cached path is not checked again: when
// starting it fails, the caller forgets it and looks again, so a program
// that was removed or moved is found where it is now. Like a shell's
// command hash, a program newly installed earlier in PATH is not seen while
// the cached one still starts.
func (s *execShared) lookPath(name, pathEnv, dir string) (path string, cached bool, err error) {
	k := pathKey{name, pathEnv, dir}
	if p, ok := s.paths.Load(k); ok {
		return p.(string), true, nil
	}
	p, err := lookPath(name, pathEnv, dir)
	if err != nil {
		return "", false, err
	}
	s.paths.Store(k, p)
	return p, false, nil
}

func (s *execShared) forget(name, pathEnv, dir string) {
	s.paths.Delete(pathKey{name, pathEnv, dir})
}
