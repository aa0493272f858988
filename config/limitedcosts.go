package config

import (
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/zclconf/go-cty/cty"
)

// What the guards of limitedfuncs.go measure a call by: the steps and
// bytes particular functions cost, checked before they run.

// Step costs of particular functions, measured against a step being about
// the time to walk one node of a value.
const (
	regexStepsDiv = 16  // pattern bytes x string bytes per step
	chunkSteps    = 160 // per chunk chunklist builds
)

// sizeOf is a value's size as the value limits count it (the guards have
// already walked it once and paid for it).
func sizeOf(v cty.Value, limit int64) int64 {
	size, _, _ := valueCost(v, plainCost, limit+1, math.MaxInt64/2)
	return size
}

// formatWidths checks the widths and precisions of format's verbs and
// returns what they can add to the output.
func formatWidths(f string) (float64, error) {
	extra := 0.0
	for i := 0; i < len(f); i++ {
		if f[i] != '%' {
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			continue
		}
		// Flags, an argument index, width, precision: every number there
		// is bounded, and a width or precision adds up to that much.
		for i < len(f) && strings.IndexByte("+-# 0[].*0123456789", f[i]) >= 0 {
			if f[i] >= '0' && f[i] <= '9' {
				j := i
				for j < len(f) && f[j] >= '0' && f[j] <= '9' {
					j++
				}
				if j-i > 5 || atoiSmall(f[i:j]) > MaxFormatWidth {
					return 0, limitf("Format width too large", "the format verb at byte %d has a width or precision of %s; wf allows at most %d", i, f[i:j], MaxFormatWidth)
				}
				extra += float64(atoiSmall(f[i:j]))
				i = j
				continue
			}
			i++
		}
	}
	return extra, nil
}

func atoiSmall(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// compileBounded compiles a pattern whose matching against s is bounded in
// time. It returns nil, nil for an invalid pattern: the function reports
// that itself, in its own words.
func compileBounded(fn, pattern, s string) (*regexp.Regexp, error) {
	if len(pattern) > MaxRegexPattern {
		return nil, limitf("Pattern too large", "%s: the pattern is %d bytes; wf allows %d", fn, len(pattern), MaxRegexPattern)
	}
	if work := float64(len(pattern)+1) * float64(len(s)+1); work > MaxRegexWork {
		return nil, limitf("Regular expression too expensive", "%s: matching a %d-byte pattern against a %d-byte string is more work than wf allows (%d)", fn, len(pattern), len(s), MaxRegexWork)
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, nil
	}
	return re, nil
}

// checkJSONShape scans JSON text (without recursing) for nesting deeper
// than MaxValueDepth and more elements than limit allows, both of which
// the decoder would otherwise build first and reject later, if at all.
func checkJSONShape(s string, limit int64) error {
	depth, elems := 0, 0
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '[', '{':
			depth++
			elems++
			if depth > MaxValueDepth {
				return limitf("Value nested too deeply", "the JSON nests more than %d levels deep", MaxValueDepth)
			}
		case ']', '}':
			depth--
		case ',':
			elems++
		}
	}
	if est := float64(len(s)) + float64(elems)*elementCost; est > float64(limit) {
		return limitf("Result too large", "the decoded JSON would be about %s, more than the %d MiB wf allows for one value", humanBytes(est), limit>>20)
	}
	return nil
}

func humanBytes(n float64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.3g GiB", n/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.3g MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.3g KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f bytes", n)
}
