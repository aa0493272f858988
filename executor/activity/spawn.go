package activity

import "context"

type spawnHookKey struct{}

// WithSpawnHook returns a context under which every exec attempt calls
// hook with the PID of its process (the leader of the attempt's own
// process group, so also the group ID) as soon as the process has
// started, before waiting for it. The executor records it there, so that
// a later run can end an attempt that a crashed engine left behind. The
// hook runs on the attempt's goroutine; the attempt waits for it.
func WithSpawnHook(ctx context.Context, hook func(pid int)) context.Context {
	return context.WithValue(ctx, spawnHookKey{}, hook)
}

func spawnHook(ctx context.Context) func(pid int) {
	h, _ := ctx.Value(spawnHookKey{}).(func(pid int))
	return h
}
