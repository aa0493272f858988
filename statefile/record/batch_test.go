package record

import (
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestActivityBatchMatchesDecodeActivity: decoding through an
// ActivityBatch gives what DecodeActivity gives, record after record
// (blocks and counts refilled on the way; half of them with their strings
// cut from a larger string), refuses what it refuses, and no record
// shares its timer, last error, rule counts or outputs with another: an
// append to one record's counts or outputs never writes into the next
// one's.
func TestActivityBatchMatchesDecodeActivity(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var ab ActivityBatch
	var got []*Activity
	var want []*Activity
	for i := range 8 * batchBlock {
		a := randActivity(r)
		if i%3 != 0 { // mostly records the validation passes
			s := sampleActivity()
			s.Name, s.Timer, s.RuleCounts, s.LastError = a.Name+"x", a.Timer, a.RuleCounts, a.LastError
			a = s
		}
		if i%7 == 0 {
			a.RuleCounts = make([]int, batchBlock/4+1+r.IntN(3)) // longer than the batch cuts
		}
		b, err := appendActivityBinary(nil, a)
		if err != nil {
			continue // randActivity makes some the encoder refuses
		}
		w, werr := DecodeActivity(b)
		var g *Activity
		var gerr error
		if i%2 == 0 {
			g, gerr = ab.Decode(b)
		} else {
			big := "<" + string(b) + ">"
			g, gerr = ab.DecodeShared(b, big[1:len(big)-1])
			if _, err := ab.DecodeShared(b, big[1:]); err == nil && gerr == nil {
				t.Fatalf("record %d decoded with a shared string of another length", i)
			}
		}
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("record %d: DecodeActivity error %v, batch error %v", i, werr, gerr)
		}
		if werr != nil {
			continue
		}
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("record %d: batch decoded\n%+v\nDecodeActivity\n%+v", i, g, w)
		}
		got, want = append(got, g), append(want, w)
		// A damaged record in the middle changes nothing for the others.
		if i%5 != 0 {
			continue
		}
		if _, err := ab.Decode(b[:len(b)-1]); err == nil {
			t.Fatalf("record %d: a truncated record decoded", i)
		}
	}
	if len(got) < batchBlock {
		t.Fatalf("only %d records decoded", len(got))
	}
	change := func(a *Activity) {
		a.RuleCounts = append(a.RuleCounts, 99)
		if a.Timer != nil {
			a.Timer.Attempt = -1
		}
		if a.LastError != nil {
			a.LastError.Type += "!"
		}
		if len(a.Outputs) > 0 {
			a.Outputs[len(a.Outputs)-1] = '~'
			a.Outputs = append(a.Outputs, '~')
		}
	}
	for _, g := range got {
		change(g)
	}
	for i, g := range got {
		w := want[i]
		change(w)
		if !reflect.DeepEqual(g, w) {
			t.Fatalf("record %d changed through another: %+v, want %+v", i, g, w)
		}
	}
}
