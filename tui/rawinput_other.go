//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package tui

import "github.com/charmbracelet/x/term"

// rawInput falls back to the platform's raw mode where there is no termios.
func rawInput(fd int) (restore func() error, err error) {
	st, err := term.MakeRaw(uintptr(fd))
	if err != nil {
		return nil, err
	}
	return func() error { return term.Restore(uintptr(fd), st) }, nil
}
