package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Hash identifies what the activity does: its evaluated kind block and
// therefore its inputs. Retry settings and the timeout are left out on
// purpose: tuning how an activity is retried must not re-run (and so
// re-charge) an activity that already succeeded.
//
// Paths are hashed as written in the configuration, never as resolved on
// this machine: an exec activity's working directory enters the hash as
// its WrittenDir (".", "bin", or an absolute path the user wrote), so
// moving or cloning the configuration directory, or reaching it through a
// symlink, keeps every definition unchanged (SPEC §4.2).
func (r *Resolved) Hash() string {
	h := *r
	if r.Exec != nil {
		e := *r.Exec
		e.Dir = e.WrittenDir
		if e.Dir == "" {
			e.Dir = "."
		}
		h.Exec = &e
	}
	// encoding/json sorts map keys, so the encoding is canonical.
	b, err := json.Marshal(&h)
	if err != nil {
		// Resolved holds only strings, ints, bools and maps of strings.
		panic("config: marshal resolved activity: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// Matches reports whether a definition hash stored in state is this
// activity's: Hash, or for a record written before hashes left out the
// absolute directory, the hash as it was computed then (the evaluated kind
// block with the exec working directory as resolved on this machine). The
// second form lets a state written by an older wf plan as unchanged where
// it was written; it stops matching once the directory moves, like the
// old behaviour.
func (r *Resolved) Matches(stored string) bool {
	return stored == r.Hash() || (r.Exec != nil && stored == r.legacyHash())
}

func (r *Resolved) legacyHash() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic("config: marshal resolved activity: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
