package config

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"

	"github.com/wf-engine/wf/config/jsontext"
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
	var buf [512]byte
	if b, ok := appendHTTP(buf[:0], r); ok {
		return digest(b)
	}
	if b, ok := appendExec(buf[:0], r); ok {
		return digest(b)
	}
	return digest(marshalResolved(r))
}

// marshalResolved is the encoding Hash digests, through reflection: the
// definition of every stored record rests on these bytes, which
// appendHTTP and appendExec reproduce by hand for their kinds.
func marshalResolved(r *Resolved) []byte {
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
	return b
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
	return digest(b)
}

// digest is the hex SHA-256 of a definition's encoding.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// appendHTTP appends the encoding json.Marshal gives r when r is an http
// block; ok is false for the other kinds. Marshalling through reflection
// was most of a Hash, which every first attempt of an activity computes.
func appendHTTP(b []byte, r *Resolved) ([]byte, bool) {
	h := r.HTTP
	if h == nil || r.Exec != nil || r.Sleep != nil {
		return nil, false
	}
	keys := jsontext.SortedKeys(h.Headers)
	b = append(b, `{"http":{"url":`...)
	b = jsontext.AppendString(b, h.URL)
	b = append(b, `,"method":`...)
	b = jsontext.AppendString(b, h.Method)
	if len(keys) > 0 {
		b = append(b, `,"headers":`...)
		b = jsontext.AppendObject(b, h.Headers, keys)
	}
	if h.Body != "" {
		b = append(b, `,"body":`...)
		b = jsontext.AppendString(b, h.Body)
	}
	if len(h.ExpectStatus) > 0 {
		b = append(b, `,"expect_status":[`...)
		for i, c := range h.ExpectStatus {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(c), 10)
		}
		b = append(b, ']')
	}
	if h.InsecureSkipVerify {
		b = append(b, `,"insecure_skip_verify":true`...)
	}
	if h.MaxResponseBytes != 0 {
		b = append(b, `,"max_response_bytes":`...)
		b = strconv.AppendInt(b, h.MaxResponseBytes, 10)
	}
	return append(b, "}}"...), true
}
