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
func (r *Resolved) Hash() string {
	// encoding/json sorts map keys, so the encoding is canonical.
	b, err := json.Marshal(r)
	if err != nil {
		// Resolved holds only strings, ints, bools and maps of strings.
		panic("config: marshal resolved activity: " + err.Error())
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
