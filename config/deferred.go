package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// A large workflow block's activities are parsed as they are loaded, not
// all before the first is: the loader needs every activity's name, kind
// and for_each before it loads any (a reference may point forward), and
// HCL's tree of 10,000 activities (about 3.5 KB each) was live at once for
// that alone, the most memory the load held. parseChunked, asked to, scans
// the items of a large workflow block's body instead: each activity block
// written the plain way (`activity "NAME" {` ending its line, its
// arguments and blocks each starting a line, its closing brace alone on
// its last line) gives its name, kind and for_each from its bytes, and is
// left out of the tree; every other item (key, output, moved, comments) is
// parsed at once, as fill parses it. loadWorkflow then parses the deferred
// activities in runs of up to chunk bytes, loads each run's activities and
// lets that run's tree go before it parses the next.
//
// The scan decides nothing a diagnostic depends on. A body with any item it
// does not follow, a name that is not a plain identifier, or a name twice
// is filled as before. Each run, when parsed, must hold exactly the blocks
// the scan found, with the names, kinds and for_each it found, and parse
// without a diagnostic; if one does not (or a deferred body is never
// loaded and one of its runs does not parse), the load starts again with
// nothing deferred (LoadFiles), so that every diagnostic, and its order,
// is the one the whole parse leads to.

// deferredBody is the activities of a workflow body left out of its tree.
type deferredBody struct {
	p    *chunkParser
	runs []activityRun
	// count is the number of activities in runs.
	count int
}

// activityRun is src[lo:hi], whole items starting at pos: the activities
// acts, and nothing else but comments and blank lines.
type activityRun struct {
	lo, hi int
	pos    hcl.Pos
	acts   []scannedActivity
}

// scannedActivity is what the loader needs of an activity before loading
// any: its name, its kind ("" unless exactly one kind block) and whether it
// sets for_each, as kindAndForEach reads them from its tree.
type scannedActivity struct {
	name    string
	kind    Kind
	forEach bool
}

// itemClass is what scanning a workflow body's item found.
type itemClass int

const (
	itemOther    itemClass = iota // parsed at once
	itemComment                   // nothing but a comment and blank lines
	itemActivity                  // a plain activity block
)

// fillDeferred fills body from src[lo:hi] as fill does, but for its plain
// activity blocks, which it returns, deferred. ok is false where fill's
// would be (a piece with a diagnostic, an argument set twice), and def is
// nil, with body untouched, when the scan does not follow an item: then
// the caller fills body.
func (p *chunkParser) fillDeferred(body *hclsyntax.Body, lo, hi int) (def *deferredBody, ok bool) {
	items := itemStarts(p.src, lo, hi)
	items = append(items, hi)
	classes := make([]itemClass, len(items)-1)
	acts := make([]scannedActivity, 0, len(items)-1)
	seen := make(map[string]bool, len(items)-1)
	for i := range classes {
		c, a := scanWorkflowItem(p.src, items[i], items[i+1])
		if c == itemActivity {
			if seen[a.name] {
				return nil, true // the loader reports it, from the tree
			}
			seen[a.name] = true
			acts = append(acts, a)
		}
		classes[i] = c
	}
	if len(acts) == 0 {
		return nil, true
	}
	def = &deferredBody{p: p, count: len(acts)}
	for i := 0; i < len(classes); {
		// A run is items of one side: activities (and comments among
		// them) deferred, anything else parsed now.
		deferred := classes[i] != itemOther
		j := i + 1
		for j < len(classes) && (classes[j] != itemOther) == deferred && items[j+1]-items[i] <= p.chunk {
			j++
		}
		if deferred {
			run := activityRun{lo: items[i], hi: items[j], pos: p.pos(items[i])}
			for k := i; k < j; k++ {
				if classes[k] == itemActivity {
					run.acts = append(run.acts, acts[0])
					acts = acts[1:]
				}
			}
			if len(run.acts) > 0 {
				def.runs = append(def.runs, run)
			}
			i = j
			continue
		}
		f, ok := p.parse(items[i], items[j])
		if !ok {
			return nil, false
		}
		part := f.Body.(*hclsyntax.Body)
		for name, attr := range part.Attributes {
			if _, dup := body.Attributes[name]; dup {
				return nil, false
			}
			body.Attributes[name] = attr
		}
		for _, b := range part.Blocks {
			if b.Type == "activity" {
				return nil, false // not one the scan took for an activity
			}
		}
		body.Blocks = append(body.Blocks, part.Blocks...)
		i = j
	}
	return def, true
}

// parseRun parses a run of deferred activities into their blocks, or
// returns false if the run does not parse without a diagnostic into
// exactly the activities the scan found.
func (d *deferredBody) parseRun(run activityRun) ([]*hclsyntax.Block, bool) {
	d.p.at, d.p.line = run.lo, run.pos.Line
	f, ok := d.p.parse(run.lo, run.hi)
	if !ok {
		return nil, false
	}
	body := f.Body.(*hclsyntax.Body)
	if len(body.Attributes) != 0 || len(body.Blocks) != len(run.acts) {
		return nil, false
	}
	for i, b := range body.Blocks {
		a := run.acts[i]
		if b.Type != "activity" || len(b.Labels) != 1 || b.Labels[0] != a.name {
			return nil, false
		}
		if kind, each := kindAndForEach(b.AsHCLBlock()); kind != a.kind || each != a.forEach {
			return nil, false
		}
		b.Labels[0] = a.name // one string for the name, not two
	}
	return body.Blocks, true
}

// scanWorkflowItem classifies the item src[s:e] of a workflow body and,
// for a plain activity block, reads its name, kind and for_each.
func scanWorkflowItem(src []byte, s, e int) (itemClass, scannedActivity) {
	i := skipSpaces(src, s, e)
	if lineCommentAt(src, i, e) {
		// itemStarts starts an item after a line comment: the item is
		// the comment, then blank lines.
		return itemComment, scannedActivity{}
	}
	word, i := scanWord(src, i, e)
	if string(word) != "activity" || i >= e || src[i] != ' ' {
		return itemOther, scannedActivity{}
	}
	i = skipSpaces(src, i, e)
	if i >= e || src[i] != '"' {
		return itemOther, scannedActivity{}
	}
	label, i := scanWord(src, i+1, e)
	if len(label) == 0 || i >= e || src[i] != '"' {
		return itemOther, scannedActivity{}
	}
	i = skipSpaces(src, i+1, e)
	b, ok := blockInterior(src, s, e)
	if !ok || i != b.open {
		return itemOther, scannedActivity{}
	}
	a := scannedActivity{name: string(label)}
	kinds := 0
	inner := itemStarts(src, b.lo, b.hi)
	for k, at := range inner {
		end := b.hi
		if k+1 < len(inner) {
			end = inner[k+1]
		}
		j := skipSpaces(src, at, end)
		if lineCommentAt(src, j, end) {
			continue
		}
		word, j := scanWord(src, j, end)
		if len(word) == 0 {
			if skipBlank(src, at, end) == end {
				continue // the blank lines of the first item
			}
			return itemOther, scannedActivity{}
		}
		j = skipSpaces(src, j, end)
		switch {
		case j >= end:
			return itemOther, scannedActivity{}
		case src[j] == '=' && (j+1 >= end || src[j+1] != '='):
			if string(word) == "for_each" {
				a.forEach = true
			}
		case src[j] == '{':
			for _, k := range []Kind{KindExec, KindHTTP, KindSleep} {
				if string(word) == string(k) {
					kinds++
					a.kind = k
				}
			}
		case src[j] == '"' || identStart(src[j]):
			// A block with labels: no kind block (PartialContent
			// reports it), whatever its type.
		default:
			return itemOther, scannedActivity{}
		}
	}
	if kinds != 1 {
		a.kind = ""
	}
	return itemActivity, a
}

// scanWord returns the ASCII identifier at src[i:e] (empty if none; every
// such word is a valid name) and the offset after it.
func scanWord(src []byte, i, e int) ([]byte, int) {
	if i >= e || !identStart(src[i]) {
		return nil, i
	}
	j := i + 1
	for j < e && identPart(src[j]) {
		j++
	}
	return src[i:j], j
}

func skipSpaces(src []byte, i, e int) int {
	for i < e && (src[i] == ' ' || src[i] == '\t') {
		i++
	}
	return i
}

// skipBlank skips spaces and line breaks.
func skipBlank(src []byte, i, e int) int {
	for i < e && (src[i] == ' ' || src[i] == '\t' || src[i] == '\r' || src[i] == '\n') {
		i++
	}
	return i
}

// declare adds the deferred activities to the names, kinds and for_each
// sets of their workflow (d may be nil: none).
func (d *deferredBody) declare(names map[string]bool, kinds map[string]Kind, forEach map[string]bool) {
	if d == nil {
		return
	}
	for _, run := range d.runs {
		for _, a := range run.acts {
			names[a.name] = true
			kinds[a.name] = a.kind
			if a.forEach {
				forEach[a.name] = true
			}
		}
	}
}

// loadDeferred parses and loads the deferred activities of w, a run at a
// time, each run's tree let go before the next is parsed. It returns false,
// with l.restart set, at a run that does not parse as scanned.
func (l *loader) loadDeferred(w *Workflow, d *deferredBody, names map[string]bool, kinds map[string]Kind, forEach map[string]bool) bool {
	for i, run := range d.runs {
		d.runs[i] = activityRun{}
		blocks, ok := d.parseRun(run)
		if !ok {
			l.restart = true
			return false
		}
		for j, sb := range blocks {
			blocks[j] = nil
			ab := sb.AsHCLBlock()
			guardActivity(ab)
			if a := l.loadActivity(w, ab, names, kinds, forEach); a != nil {
				w.Activities = append(w.Activities, a)
				w.index[a.Name] = a
			}
		}
	}
	return true
}

// checkDeferred parses the runs of the deferred bodies no workflow loaded
// (a workflow declared twice, or with an invalid name): the whole parse
// would have reported a diagnostic in any of them, so one that does not
// parse sets l.restart.
func (l *loader) checkDeferred() {
	for body, d := range l.deferred {
		delete(l.deferred, body)
		for _, run := range d.runs {
			if _, ok := d.parseRun(run); !ok {
				l.restart = true
				return
			}
		}
	}
}
