package activity

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// attemptPipes carries an exec attempt's stdout and stderr to wf without the
// machinery os/exec uses for a writer that is not an *os.File: both ends of
// two pipes registered with the netpoller, one copy goroutine per stream
// and one goroutine watching the context. For a process such as `true`
// that machinery was about a third of wf's CPU per attempt (each copy
// goroutine parks in the poller and is woken on another thread: futex and
// epoll calls, see docs/performance/executor.md). Instead the attempt's own
// goroutine reads both read ends and watches the process's exit in one
// poll(2) (wait), and no fd is registered with the netpoller.
//
// Both ends are blocking: the child must not find O_NONBLOCK on its
// stdout, and wf reads a read end only after poll said it is readable, so
// the read returns at once (wf is its only reader).
type attemptPipes struct {
	outR, errR int // read ends; -1 once closed
	outW, errW int // write ends, the child's stdout and stderr; -1 once closed
}

// exitProbe bounds each poll while the process has not been seen to exit:
// the exit is then also checked with waitid(WNOHANG|WNOWAIT). With a pidfd
// that is only a safety net (a process whose pidfd never polled readable
// would end the wait within exitProbe instead of never); without one it is
// how the exit of a leader whose grandchild keeps the pipes open is seen.
func exitProbe(pidfd bool) time.Duration {
	if pidfd {
		return time.Second
	}
	return 20 * time.Millisecond
}

// pollFDs is unix.Poll; tests replace it to inject EINTR and failures.
var pollFDs = unix.Poll

// usePidfd reports whether the kernel gives pidfds (Linux 5.3 or later,
// and no seccomp filter in the way). Tests replace it to run the path
// without them.
var usePidfd = sync.OnceValue(func() bool {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return false
	}
	_ = unix.Close(fd)
	return true
})

func newAttemptPipes() (*attemptPipes, error) {
	var out, errp [2]int
	if err := unix.Pipe2(out[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if err := unix.Pipe2(errp[:], unix.O_CLOEXEC); err != nil {
		_ = unix.Close(out[0])
		_ = unix.Close(out[1])
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	return &attemptPipes{outR: out[0], errR: errp[0], outW: out[1], errW: errp[1]}, nil
}

// closeChildEnds closes wf's copies of the write ends, once the child has
// its own (once started) or will not get them: the read ends see EOF only
// when no process holds a write end.
func (p *attemptPipes) closeChildEnds() { closeFDs(&p.outW, &p.errW) }

// closeReadEnds stops reading: a process still writing gets EPIPE.
func (p *attemptPipes) closeReadEnds() { closeFDs(&p.outR, &p.errR) }

func closeFDs(fds ...*int) {
	for _, fd := range fds {
		if *fd >= 0 {
			_ = unix.Close(*fd)
			*fd = -1
		}
	}
}

// close releases every fd still open; it may be called more than once.
func (p *attemptPipes) close() {
	p.closeChildEnds()
	p.closeReadEnds()
}

// errCapture is a failure of wait itself, not of the process.
var errCapture = errors.New("capture")

// wait reads the process's stdout and stderr into their buffers until both
// are closed, or, once the process has exited, for at most waitDelay more
// (a grandchild that inherited them may keep them open: os/exec's
// WaitDelay), then reaps the process pid and returns its status. pidfd is
// the process's pidfd, or -1 without one. Cancelling ctx kills the
// process group; the exit then ends the wait as any exit does.
//
// Every way out of the loop waits for the kernel to report the exit (after
// killing the group on a poll failure), and only then ends the
// cancellation and reaps: until the reap, the process's PID, which is its
// group's ID, cannot be reused, so the kill never reaches another group.
// An error of wait itself wraps errCapture; the process is reaped anyway.
func (p *attemptPipes) wait(ctx context.Context, pid, pidfd int, stdout, stderr *capBuffer, waitDelay time.Duration) (syscall.WaitStatus, error) {
	// reaped, under mu, keeps a kill that started just before stop from
	// signalling the group once its ID may have been reused.
	var (
		mu     sync.Mutex
		reaped bool
	)
	stop := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !reaped {
			_ = killGroup(pid)
		}
	})
	defer stop()
	captureErr := p.read(pid, pidfd, stdout, stderr, waitDelay)
	p.closeReadEnds()
	if captureErr != nil {
		// Nothing reads the pipes any more and the output is incomplete:
		// end the attempt rather than let it run unwatched.
		_ = killGroup(pid)
	}
	// Whatever read saw (usually both pipes closed at the exit, but the
	// process may have closed them and run on), the exit is confirmed
	// by the kernel before the cancellation stops: until then a
	// cancellation must still kill the group.
	exitErr := waitExited(pid)
	mu.Lock()
	reaped = true
	mu.Unlock()
	ws, err := reap(pid)
	if err != nil {
		err = fmt.Errorf("wait for process %d: %w", pid, err)
	}
	if captureErr != nil || exitErr != nil {
		return ws, errors.Join(captureErr, exitErr, err)
	}
	return ws, err
}

// read is wait's poll loop. It returns when both pipes are closed, or
// waitDelay after the process exited, or on a poll failure.
func (p *attemptPipes) read(pid, pidfd int, stdout, stderr *capBuffer, waitDelay time.Duration) error {
	buf := make([]byte, firstChunk)
	exited := false
	var deadline time.Time
	fds := make([]unix.PollFd, 0, 3)
	for p.outR >= 0 || p.errR >= 0 {
		timeout := int(exitProbe(pidfd >= 0) / time.Millisecond)
		if exited {
			left := time.Until(deadline)
			if left <= 0 {
				return nil // a grandchild holds a pipe: stop reading, as WaitDelay does
			}
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		fds = fds[:0]
		if p.outR >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(p.outR), Events: unix.POLLIN})
		}
		if p.errR >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(p.errR), Events: unix.POLLIN})
		}
		if !exited && pidfd >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(pidfd), Events: unix.POLLIN})
		}
		n, err := pollFDs(fds, timeout)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: poll the pipes of process %d: %w", errCapture, pid, err)
		}
		sawExit := false
		for _, f := range fds {
			switch {
			case f.Revents == 0:
			case int(f.Fd) == p.outR:
				buf = readPipe(&p.outR, buf, stdout)
			case int(f.Fd) == p.errR:
				buf = readPipe(&p.errR, buf, stderr)
			default: // the pidfd: readable (or in error) once the process has exited
				sawExit = true
			}
		}
		if !exited && n == 0 {
			// A timeout: the safety net of a pidfd, or the only way
			// to see the exit without one.
			sawExit = hasExited(pid)
		}
		if sawExit && !exited {
			exited = true
			deadline = time.Now().Add(waitDelay)
		}
	}
	return nil
}

// readPipe reads what is in the pipe *fd into c, and closes *fd at EOF or
// on an error. The buffer grows, up to readChunk, only while reads fill it
// (most activities print little); it is returned for the next read.
func readPipe(fd *int, buf []byte, c *capBuffer) []byte {
	n, err := unix.Read(*fd, buf)
	if errors.Is(err, unix.EINTR) || errors.Is(err, unix.EAGAIN) {
		return buf
	}
	if n > 0 {
		c.Write(buf[:n])
		if n == len(buf) && len(buf) < readChunk {
			buf = make([]byte, 2*len(buf))
		}
		return buf
	}
	_ = unix.Close(*fd)
	*fd = -1
	return buf
}

// hasExited reports whether the child pid has exited, without reaping it.
func hasExited(pid int) bool {
	for {
		// Linux sets si_signo to SIGCHLD when it found the child
		// exited, and to 0 when it has not.
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOHANG|unix.WNOWAIT, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		// An error (ECHILD: nothing to wait for) counts as exited, so
		// that nothing waits for it; waitExited then reports it.
		return err != nil || info.Signo == int32(unix.SIGCHLD)
	}
}

// waitExited blocks until the child pid has exited, without reaping it.
func waitExited(pid int) error {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			if err != nil {
				return fmt.Errorf("%w: wait for process %d to exit: %w", errCapture, pid, err)
			}
			return nil
		}
	}
}
