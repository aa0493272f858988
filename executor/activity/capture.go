package activity

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"
)

// tailSize is how much of the end of a stream is kept for failure messages:
// the last lines of stderr usually say why a process failed, and they may lie
// beyond the capped head.
const tailSize = 512

// capBuffer is an io.Writer that keeps the first max bytes and the last
// tailSize bytes of what is written and counts the rest, so a chatty process
// can never make wf hold more than max+tailSize bytes per stream. It is not
// safe for concurrent use; one goroutine reads both streams (attemptPipes).
type capBuffer struct {
	max   int64
	head  []byte
	tail  []byte
	total int64
}

func newCapBuffer(max int64) *capBuffer {
	return &capBuffer{max: max}
}

// Write never fails: dropping bytes is the point.
func (c *capBuffer) Write(p []byte) (int, error) {
	c.total += int64(len(p))
	if room := c.max - int64(len(c.head)); room > 0 {
		n := int64(len(p))
		if n > room {
			n = room
		}
		c.head = append(c.head, p[:n]...)
	}
	if len(p) >= tailSize {
		c.tail = append(c.tail[:0], p[len(p)-tailSize:]...)
	} else {
		c.tail = append(c.tail, p...)
		if over := len(c.tail) - tailSize; over > 0 {
			c.tail = append(c.tail[:0], c.tail[over:]...)
		}
	}
	return len(p), nil
}

// firstChunk and readChunk bound the size of each read of a pipe
// (readPipe). A 32 KiB buffer per stream, as io.Copy uses, dominated the
// allocations of a short exec attempt; most activities print little, so
// the buffer starts small and doubles up to readChunk only while reads
// fill it.
const (
	firstChunk = 512
	readChunk  = 8 << 10
)

// Bytes returns the kept head.
func (c *capBuffer) Bytes() []byte { return c.head }

// Truncated reports whether more was written than kept.
func (c *capBuffer) Truncated() bool { return c.total > int64(len(c.head)) }

// Tail returns the last (up to tailSize) bytes written, trimmed of
// surrounding whitespace and of a rune cut at the start.
func (c *capBuffer) Tail() string {
	t := c.tail
	// Skip continuation bytes of a rune whose start fell off the ring.
	for i := 0; i < len(t) && i < utf8.UTFMax && !utf8.RuneStart(t[0]); i++ {
		t = t[1:]
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(t), "\uFFFD"))
}

// truncationNote describes a truncated stream for a failure message.
func (c *capBuffer) truncationNote(name string) string {
	if !c.Truncated() {
		return ""
	}
	return fmt.Sprintf("%s truncated to the first %d of %d bytes", name, len(c.head), c.total)
}

// errTooLarge reports a file larger than the cap.
var errTooLarge = errors.New("file too large")

// takeFile reads a whole file of at most max bytes and removes it, so
// that nothing an attempt wrote outlives the attempt. A missing file reads
// as empty: the activity wrote nothing (or removed what it wrote). A larger
// file yields errTooLarge without reading more than max+1 bytes.
func takeFile(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	defer removeFile(path)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("read %s: %w (more than %d bytes)", path, errTooLarge, max)
	}
	return b, nil
}

// removeFile removes what an attempt left at path, if anything. Errors are
// ignored: Runner.Close removes the whole directory anyway.
func removeFile(path string) {
	// One unlink is the common case (a file, or nothing); os.Remove and
	// os.RemoveAll would try rmdir as well after ENOENT.
	err := syscall.Unlink(path)
	if err == nil || errors.Is(err, syscall.ENOENT) {
		return
	}
	// The activity made a directory there, or something stranger.
	_ = os.RemoveAll(path)
}

// firstBytes returns at most n bytes of b as valid UTF-8, without cutting a
// rune in half.
func firstBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
		// Drop a rune cut in half at the end; invalid bytes elsewhere are
		// replaced below.
		for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
			if utf8.RuneStart(b[len(b)-i]) {
				if !utf8.FullRune(b[len(b)-i:]) {
					b = b[:len(b)-i]
				}
				break
			}
		}
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// joinNotes joins the non-empty parts with "; ".
func joinNotes(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, "; ")
}
