package activity

import (
	"context"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Two attempts start on a fresh Runner at once and both find no attempt
// directory; the first to set it up starts a process that runs until the
// test ends it. The second must start and finish meanwhile, not wait for
// the first one's end (as it did when setup waited for the write lock
// while the first attempt held the read lock, and every later attempt
// queued behind that writer).
func TestExecSetupDoesNotWaitForRunningAttempts(t *testing.T) {
	dir := t.TempDir()
	gate := filepath.Join(dir, "gate")
	r := newTestRunner(t, Options{})

	resume := make(chan struct{})
	var calls atomic.Int32
	afterEmptyCheck = func() {
		// The second attempt's check holds on until the first one runs.
		if calls.Add(1) == 1 {
			<-resume
		}
	}
	t.Cleanup(func() { afterEmptyCheck = nil })

	second := make(chan Result, 1)
	go func() { second <- r.Run(context.Background(), scriptReq(dir, "true")) }()
	for calls.Load() == 0 {
		time.Sleep(time.Millisecond)
	}

	started := make(chan struct{})
	first := make(chan Result, 1)
	ctx := WithSpawnHook(context.Background(), func(Spawned) { close(started) })
	go func() { first <- r.Run(ctx, scriptReq(dir, `while [ ! -e gate ]; do sleep 0.02; done`)) }()
	<-started
	close(resume)

	var res Result
	select {
	case res = <-second:
	case <-time.After(10 * time.Second):
		t.Error("the second attempt waited for the first one to end")
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if res := <-first; res.Failure != nil {
		t.Errorf("first attempt: %+v", *res.Failure)
	}
	if t.Failed() {
		res = <-second
	}
	if res.Failure != nil {
		t.Errorf("second attempt: %+v", *res.Failure)
	}
}
