//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package tui

import "golang.org/x/sys/unix"

// rawInput switches the terminal's input side to raw mode: keys arrive one
// at a time, unechoed, and ctrl+c, ctrl+z, ctrl+s as keys rather than
// signals. Output processing (OPOST, ONLCR) is left as it is, so the
// renderer's newlines still return the carriage. restore puts back exactly
// what was there.
func rawInput(fd int) (restore func() error, err error) {
	old, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, err
	}
	t := *old
	t.Lflag &^= unix.ECHO | unix.ECHONL | unix.ICANON | unix.ISIG | unix.IEXTEN
	t.Iflag &^= unix.IXON | unix.ICRNL | unix.INLCR | unix.IGNCR | unix.ISTRIP | unix.BRKINT | unix.PARMRK | unix.INPCK
	t.Cc[unix.VMIN], t.Cc[unix.VTIME] = 1, 0
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, &t); err != nil {
		return nil, err
	}
	return func() error { return unix.IoctlSetTermios(fd, ioctlSetTermios, old) }, nil
}
