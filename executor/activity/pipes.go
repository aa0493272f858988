package activity

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// usePidfd is false only in tests, which run the path of a kernel without
// pidfds (a goroutine waits) on kernels that have them.
var usePidfd = true

// attemptPipes captures an exec attempt's stdout and stderr without the
// machinery os/exec uses for a writer that is not an *os.File: two pipes
// whose both ends it registers with the netpoller, one copy goroutine per
// stream and a goroutine watching the context. For a short process that
// machinery cost about 170 µs of CPU per attempt on the reference machine,
// as much as wf's share of the fork itself (the goroutines park and wake
// through the poller, and each wake-up is a thread woken on another CPU;
// see docs/performance/executor.md). Here the attempt's own goroutine reads
// both pipes and waits for the process in one poll(2) over the two read
// ends and the process's pidfd, so no goroutine is started and no fd is
// registered with the netpoller.
//
// The behaviour is os/exec's with WaitDelay: the output beyond the cap is
// dropped and counted (capBuffer), and once the process has exited the
// pipes are read for at most waitDelay more, so that a grandchild that
// inherited them cannot keep the attempt waiting.
type attemptPipes struct {
	outR, errR int      // read ends, -1 once closed
	outW, errW *os.File // write ends, the child's stdout and stderr
}

// newAttemptPipes makes the two pipes. Both ends are blocking: the child
// must not see O_NONBLOCK on its stdout, and the read ends are read only
// after poll reports them readable, so a read never blocks.
func newAttemptPipes() (*attemptPipes, error) {
	var out, errp [2]int
	if err := unix.Pipe2(out[:], unix.O_CLOEXEC); err != nil {
		return nil, fmt.Errorf("stdout pipe: %w", err)
	}
	if err := unix.Pipe2(errp[:], unix.O_CLOEXEC); err != nil {
		unix.Close(out[0])
		unix.Close(out[1])
		return nil, fmt.Errorf("stderr pipe: %w", err)
	}
	return &attemptPipes{
		outR: out[0], errR: errp[0],
		outW: os.NewFile(uintptr(out[1]), "|1"),
		errW: os.NewFile(uintptr(errp[1]), "|2"),
	}, nil
}

// closeWriteEnds closes wf's copies of the write ends, once the child has
// its own (after Start) or will never get them (Start failed): the read
// ends see EOF when every process holding one has closed it.
func (p *attemptPipes) closeWriteEnds() {
	if p.outW != nil {
		_ = p.outW.Close()
		_ = p.errW.Close()
		p.outW, p.errW = nil, nil
	}
}

// close releases everything still open.
func (p *attemptPipes) close() {
	p.closeWriteEnds()
	for _, fd := range []*int{&p.outR, &p.errR} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// wait reads stdout and stderr into their buffers and waits for cmd, which
// has been started with the write ends as its stdout and stderr and, when
// the kernel has pidfds, with pidfd (otherwise -1). Cancelling ctx kills the
// process group (as os/exec's Cancel did); the process's exit then ends
// the wait, like a normal exit. It returns cmd.Wait's error.
func (p *attemptPipes) wait(ctx context.Context, cmd *exec.Cmd, pidfd int, stdout, stderr *capBuffer, waitDelay time.Duration) error {
	// When ctx is done, killGroup; cancelledAt lets the pipes' deadline
	// start then rather than at the exit, as os/exec's WaitDelay does.
	var cancelledAt atomic.Int64
	stop := context.AfterFunc(ctx, func() {
		cancelledAt.Store(time.Now().UnixNano())
		_ = killGroup(cmd.Process.Pid)
	})
	defer stop()

	exitFD := pidfd
	var waited chan error
	if exitFD < 0 {
		// No pidfd (an old kernel): a goroutine waits and closes a pipe,
		// whose read end then polls as readable, so one poll still
		// watches all three.
		var sig [2]int
		if err := unix.Pipe2(sig[:], unix.O_CLOEXEC); err != nil {
			_ = cmd.Process.Kill()
			return errors.Join(fmt.Errorf("wait pipe: %w", err), cmd.Wait())
		}
		defer unix.Close(sig[0])
		exitFD = sig[0]
		waited = make(chan error, 1)
		go func() {
			err := cmd.Wait()
			unix.Close(sig[1])
			waited <- err
		}()
	}

	buf := make([]byte, firstChunk)
	exited := false
	var deadline time.Time
	fds := make([]unix.PollFd, 0, 3)
	for {
		fds = fds[:0]
		if p.outR >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(p.outR), Events: unix.POLLIN})
		}
		if p.errR >= 0 {
			fds = append(fds, unix.PollFd{Fd: int32(p.errR), Events: unix.POLLIN})
		}
		if !exited {
			fds = append(fds, unix.PollFd{Fd: int32(exitFD), Events: unix.POLLIN})
		}
		if len(fds) == 0 {
			break
		}
		timeout := -1
		if exited {
			left := time.Until(deadline)
			if left <= 0 {
				break // a grandchild holds a pipe: stop reading, as WaitDelay does
			}
			timeout = int((left + time.Millisecond - 1) / time.Millisecond)
		}
		if _, err := unix.Poll(fds, timeout); err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			// Not expected with valid fds (ENOMEM at worst). Nothing
			// reads the pipes any more, so a child writing to them would
			// block for ever: kill its group, then reap it.
			_ = killGroup(cmd.Process.Pid)
			break
		}
		for _, f := range fds {
			if f.Revents == 0 {
				continue
			}
			switch int(f.Fd) {
			case p.outR:
				buf = p.read(&p.outR, buf, stdout)
			case p.errR:
				buf = p.read(&p.errR, buf, stderr)
			default:
				exited = true
				deadline = time.Now().Add(waitDelay)
				if at := cancelledAt.Load(); at != 0 {
					if d := time.Unix(0, at).Add(waitDelay); d.Before(deadline) {
						deadline = d
					}
				}
			}
		}
	}
	p.close()
	if waited != nil {
		return <-waited
	}
	// Stopped before the reap: a zombie's PID (its group's ID) cannot be
	// reused, so a late cancel never signals a stranger's group.
	stop()
	// The process has exited (its pidfd was readable) unless poll failed:
	// this reaps it. The pidfd is ours (os dups what it keeps).
	err := cmd.Wait()
	unix.Close(pidfd)
	return err
}

// read reads what is there from *fd into c, closing *fd at EOF or on an
// error. The buffer grows, up to readChunk, only while reads fill it (most
// activities print little); it is returned for the next read.
func (p *attemptPipes) read(fd *int, buf []byte, c *capBuffer) []byte {
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
	unix.Close(*fd)
	*fd = -1
	return buf
}
