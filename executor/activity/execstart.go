package activity

import (
	"errors"
	"os"
	"strings"
	"syscall"
)

// startProcess forks and execs the attempt's process with stdin, stdout
// and stderr on those fds, in its own process group, and returns its PID
// and, when withPidfd, its pidfd (-1 if the kernel gave none), with
// CLOCK_BOOTTIME read around the fork (Spawned).
//
// It calls syscall.ForkExec, not os/exec: an exec.Cmd and its os.Process
// cost a pidfd duplicate, an os.File per pipe end (an fcntl and a cleanup
// each) and their allocations on every attempt, for nothing that wait
// (attemptPipes.wait) does not do itself. The error is os.StartProcess's.
func startProcess(path string, argv, env []string, dir string, stdin, stdout, stderr uintptr, withPidfd bool) (sp Spawned, pidfd int, err error) {
	pidfd = -1
	// Pdeathsig: if wf dies (kill -9, a crash), the kernel kills the
	// direct child at once rather than letting it run unsupervised. It
	// reaches only that child (grandchildren are ended by the next run,
	// from the spawn record and their environment), and it fires when the
	// forking OS thread exits, which for Go means the process: the
	// runtime never retires a thread that is not locked, and attempts
	// never lock theirs.
	sys := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if withPidfd {
		sys.PidFD = &pidfd
	}
	sp.BootBefore = bootNow()
	sp.PID, err = syscall.ForkExec(path, argv, &syscall.ProcAttr{
		Dir:   dir,
		Env:   env,
		Files: []uintptr{stdin, stdout, stderr},
		Sys:   sys,
	})
	sp.BootAfter = bootNow()
	if err != nil {
		return Spawned{}, -1, &os.PathError{Op: "fork/exec", Path: path, Err: err}
	}
	return sp, pidfd, nil
}

// errEnvNUL is os/exec's error for an environment variable that holds a
// NUL byte, which execve would silently cut there.
var errEnvNUL = errors.New("exec: environment variable contains NUL")

// dedupEnv is the environment as os/exec would pass it: for a name given
// more than once only the last entry is kept (getenv(3) would find the
// first), in the order of those last entries; an entry without "=" is
// kept as is, an empty one dropped. An entry with a NUL byte is an error.
// env is returned as is when it needs nothing, the common case.
func dedupEnv(env []string) ([]string, error) {
	seen := make(map[string]struct{}, len(env))
	clean := true
	for _, kv := range env {
		if strings.IndexByte(kv, 0) >= 0 {
			return nil, errEnvNUL
		}
		k, ok := envKey(kv)
		if !ok {
			if kv == "" {
				clean = false
			}
			continue
		}
		if _, dup := seen[k]; dup {
			clean = false
		}
		seen[k] = struct{}{}
	}
	if clean {
		return env, nil
	}
	// Backwards, keeping the first (that is, last) of each name.
	out := make([]string, 0, len(env))
	clear(seen)
	for i := len(env) - 1; i >= 0; i-- {
		kv := env[i]
		k, ok := envKey(kv)
		if !ok {
			if kv != "" {
				out = append(out, kv)
			}
			continue
		}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		out = append(out, kv)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out, nil
}

// baseEnvNames is the set of names of a base environment that dedupEnv
// would pass as is (every name once, no NUL, no empty entry), or nil when
// it would not: built once per Runner so that an attempt checks only what
// it appends to the base (dedupEnvAfter) instead of building a map of
// the whole environment, a few KiB, every time.
func baseEnvNames(base []string) map[string]struct{} {
	// dedupEnv keeps every entry only when no name repeats and none is
	// empty.
	if out, err := dedupEnv(base); err != nil || len(out) != len(base) {
		return nil
	}
	names := make(map[string]struct{}, len(base))
	for _, kv := range base {
		if k, ok := envKey(kv); ok {
			names[k] = struct{}{}
		}
	}
	return names
}

// maxEnvTail bounds the appended entries dedupEnvAfter compares pairwise.
const maxEnvTail = 32

// dedupEnvAfter is dedupEnv(env) for an env whose first n entries are a
// base whose names are baseNames (baseEnvNames): when no appended entry
// holds a NUL, is empty, or repeats a name of the base or of another
// appended entry, env is returned as is, and otherwise dedupEnv decides.
func dedupEnvAfter(env []string, n int, baseNames map[string]struct{}) ([]string, error) {
	tail := env[n:]
	if baseNames == nil || len(tail) > maxEnvTail {
		return dedupEnv(env)
	}
	for i, kv := range tail {
		if kv == "" || strings.IndexByte(kv, 0) >= 0 {
			return dedupEnv(env)
		}
		k, ok := envKey(kv)
		if !ok {
			continue
		}
		if _, dup := baseNames[k]; dup {
			return dedupEnv(env)
		}
		for _, prev := range tail[:i] {
			if pk, ok := envKey(prev); ok && pk == k {
				return dedupEnv(env)
			}
		}
	}
	return env, nil
}

// envKey is the name of a NAME=value entry; a leading "=" is part of the
// name, as os/exec has it.
func envKey(kv string) (string, bool) {
	i := strings.IndexByte(kv, '=')
	if i == 0 {
		i = strings.IndexByte(kv[1:], '=') + 1
	}
	if i < 0 {
		return "", false
	}
	return kv[:i], true
}

// reap collects the exited child pid and returns its status.
func reap(pid int) (syscall.WaitStatus, error) {
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			return ws, err
		}
	}
}
