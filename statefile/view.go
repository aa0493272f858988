package statefile

import (
	"bytes"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/dgraph-io/badger/v4"
)

// Every read of the Store goes through a snapshot: one Badger read
// transaction (none for an empty state) seen through the overlay of log
// records that a read-only Store found after the checkpoint. A writer
// replays those records into Badger when it opens, so its overlay is
// empty; a reader may not write, so it keeps them in memory instead, and
// reads see exactly what the last writer committed.

// overlay is the net effect of a run of log records: keys set or deleted
// (a deletion hides the base value), and prefixes deleted (hiding every
// base key under them; keys set again afterwards are in entries).
type overlay struct {
	entries  map[string]ovEntry
	sorted   []string // keys of entries, sorted
	prefixes []string // deleted prefixes, as seen by the base
}

type ovEntry struct {
	val     []byte
	deleted bool
}

func newOverlay() *overlay { return &overlay{entries: map[string]ovEntry{}} }

// apply adds one record's ops, in order.
func (o *overlay) apply(ops []op) {
	for _, op := range ops {
		switch op.kind {
		case opSet:
			o.entries[string(op.key)] = ovEntry{val: op.val}
		case opDelete:
			o.entries[string(op.key)] = ovEntry{deleted: true}
		case opDeletePrefix:
			p := string(op.key)
			for k := range o.entries {
				if strings.HasPrefix(k, p) {
					o.entries[k] = ovEntry{deleted: true}
				}
			}
			o.prefixes = append(o.prefixes, p)
		}
	}
}

// seal sorts the keys; the overlay is read-only afterwards.
func (o *overlay) seal() {
	o.sorted = o.sorted[:0]
	for k := range o.entries {
		o.sorted = append(o.sorted, k)
	}
	sort.Strings(o.sorted)
}

func (o *overlay) len() int { return len(o.entries) }

// hidesBase reports whether the base value of key is replaced or deleted.
func (o *overlay) hidesBase(key []byte) bool {
	if _, ok := o.entries[string(key)]; ok {
		return true
	}
	for _, p := range o.prefixes {
		if hasPrefix(key, p) {
			return true
		}
	}
	return false
}

// hasPrefix is bytes.HasPrefix for a string prefix, without allocating.
func hasPrefix(b []byte, p string) bool { return len(b) >= len(p) && string(b[:len(p)]) == p }

// snapshot is one consistent read.
type snapshot struct {
	txn *badger.Txn // nil for an empty state
	ov  *overlay    // nil when there is nothing on top of Badger
}

func (s *snapshot) discard() {
	if s.txn != nil {
		s.txn.Discard()
	}
}

// get returns a copy of key's value.
func (s *snapshot) get(key []byte) ([]byte, bool, error) {
	if s.ov != nil {
		if e, ok := s.ov.entries[string(key)]; ok {
			if e.deleted {
				return nil, false, nil
			}
			return bytes.Clone(e.val), true, nil
		}
		if s.ov.hidesBase(key) {
			return nil, false, nil
		}
	}
	if s.txn == nil {
		return nil, false, nil
	}
	item, err := s.txn.Get(key)
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	v, err := item.ValueCopy(nil)
	if err != nil {
		return nil, false, fmt.Errorf("%s: %w", describeKey(key), err)
	}
	return v, true, nil
}

// cursor iterates the keys under a prefix in order, merging the base with
// the overlay.
type cursor struct {
	prefix []byte
	pstr   string
	base   *badger.Iterator
	ov     *overlay
	oi     int // next overlay key index
	// cur is the current position: from the overlay (fromOv) or the base.
	fromOv bool
}

func (s *snapshot) cursor(prefix []byte) *cursor {
	c := &cursor{prefix: bytes.Clone(prefix), pstr: string(prefix), ov: s.ov}
	if s.txn != nil {
		c.base = s.txn.NewIterator(badger.IteratorOptions{Prefix: c.prefix})
	}
	return c
}

func (c *cursor) close() {
	if c.base != nil {
		c.base.Close()
	}
}

func (c *cursor) rewind() { c.seek(c.prefix) }

// seek moves to the first key >= key (within the prefix).
func (c *cursor) seek(key []byte) {
	if c.base != nil {
		c.base.Seek(key)
	}
	if c.ov != nil {
		c.oi = sort.SearchStrings(c.ov.sorted, string(key))
	}
	c.settle()
}

func (c *cursor) next() {
	if c.fromOv {
		c.oi++
	} else if c.base != nil {
		c.base.Next()
	}
	c.settle()
}

// settle skips hidden base keys and deleted overlay keys and picks the
// smaller of the two current keys.
func (c *cursor) settle() {
	for c.baseValid() && c.ov != nil && c.ov.hidesBase(c.base.Item().Key()) {
		c.base.Next()
	}
	for c.ovValid() && c.ov.entries[c.ov.sorted[c.oi]].deleted {
		c.oi++
	}
	switch {
	case c.ovValid() && c.baseValid():
		c.fromOv = c.ov.sorted[c.oi] < string(c.base.Item().Key())
	default:
		c.fromOv = c.ovValid()
	}
}

func (c *cursor) baseValid() bool { return c.base != nil && c.base.Valid() }

func (c *cursor) ovValid() bool {
	return c.ov != nil && c.oi < len(c.ov.sorted) && strings.HasPrefix(c.ov.sorted[c.oi], c.pstr)
}

func (c *cursor) valid() bool { return c.ovValid() || c.baseValid() }

// key is valid until the next move.
func (c *cursor) key() []byte {
	if c.fromOv {
		return []byte(c.ov.sorted[c.oi])
	}
	return c.base.Item().Key()
}

// withValue calls fn with the current value, valid only during the call:
// many values read in one pass are copied into shared buffers.
func (c *cursor) withValue(fn func(v []byte) error) error {
	if c.fromOv {
		return fn(c.ov.entries[c.ov.sorted[c.oi]].val)
	}
	if err := c.base.Item().Value(fn); err != nil {
		return fmt.Errorf("%s: %w", describeKey(c.base.Item().Key()), err)
	}
	return nil
}

// value returns a copy of the current value.
func (c *cursor) value() ([]byte, error) {
	if c.fromOv {
		return bytes.Clone(c.ov.entries[c.ov.sorted[c.oi]].val), nil
	}
	v, err := c.base.Item().ValueCopy(nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", describeKey(c.base.Item().Key()), err)
	}
	return v, nil
}
