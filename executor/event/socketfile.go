package event

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
)

// bindDirPrefix names the temporary directories listenPrivate binds in,
// next to the socket. It is short because a socket path must fit in the
// 108 bytes of sun_path, and the bind path is this much longer than the
// final one.
const bindDirPrefix = ".sock"

// listenPrivate listens on a Unix socket at path that only this user can
// ever reach. A socket file takes its mode from the umask at bind time, so
// binding at path and then calling chmod leaves a window in which anyone
// may connect (under umask 000, another user did in 40 of 60 applies).
// Instead the socket is bound inside a fresh 0700 directory next to path,
// made 0600 while nobody else can reach it, and renamed into place: from
// the moment it exists at path, it is 0600.
func listenPrivate(ctx context.Context, path string) (net.Listener, error) {
	if err := checkSocketPath(path); err != nil {
		return nil, err
	}
	parent := filepath.Dir(path)
	removeStaleBindDirs(parent, bindDirPrefix)
	dir, err := os.MkdirTemp(parent, bindDirPrefix+"*")
	if err != nil {
		return nil, fmt.Errorf("event socket %s: create private directory: %w", path, err)
	}
	defer os.RemoveAll(dir) // empty once the socket has moved
	// MkdirTemp asks for 0700, and the umask can only take bits away; say
	// it anyway, so a strange umask cannot lock us out of our own directory.
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("event socket %s: %w", path, err)
	}
	tmp := filepath.Join(dir, "s")
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "unix", tmp)
	if err != nil {
		return nil, fmt.Errorf("listen on event socket %s: %w", path, err)
	}
	ul := ln.(*net.UnixListener)
	// The file moves away from where it was bound; the server removes it
	// at path when it stops.
	ul.SetUnlinkOnClose(false)
	fail := func(err error) (net.Listener, error) {
		_ = ln.Close()
		return nil, fmt.Errorf("event socket %s: %w", path, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fail(err)
	}
	// rename replaces a stale socket atomically and never follows a
	// symlink; checkSocketPath refused anything else already.
	if err := os.Rename(tmp, path); err != nil {
		return fail(err)
	}
	return ln, nil
}

// checkSocketPath refuses a file at path that is not a socket (a stale
// socket left by an apply that died is replaced): it is not ours to delete,
// and a symlink planted there must not be followed.
func checkSocketPath(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect event socket %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("event socket %s: a file that is not a socket is in the way", path)
	}
	return nil
}

// removeStaleBindDirs removes private bind directories that an apply killed
// between bind and rename left behind: directories (not symlinks) named
// prefix+random that hold nothing but a socket named s.
func removeStaleBindDirs(parent, prefix string) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), prefix) || e.Type()&fs.ModeSymlink != 0 {
			continue
		}
		dir := filepath.Join(parent, e.Name())
		inner, err := os.ReadDir(dir)
		if err != nil || len(inner) > 1 || (len(inner) == 1 && (inner[0].Name() != "s" || inner[0].Type()&fs.ModeSocket == 0)) {
			continue
		}
		_ = os.Remove(filepath.Join(dir, "s"))
		_ = os.Remove(dir)
	}
}
