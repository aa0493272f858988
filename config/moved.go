package config

import (
	"fmt"
	"sort"

	"github.com/hashicorp/hcl/v2"
)

// Moved is a moved block: the state stored under From now belongs to To,
// so a renamed activity keeps its outputs, generation, attempts, pending
// timer and idempotency key instead of running again (SPEC §10).
type Moved struct {
	From, To  Address
	DeclRange hcl.Range
}

var movedSchema = &hcl.BodySchema{
	Attributes: []hcl.AttributeSchema{{Name: "from", Required: true}, {Name: "to", Required: true}},
}

// Rename is one stored activity record that the moved blocks give a new
// name.
type Rename struct {
	From, To string
	// By is the moved block that decided it.
	By *Moved
}

// Renames works out what the moved blocks do to the records stored under
// the names in stored: each record whose name a block moves (an activity,
// every element of an activity moved as a whole, or one element) is
// renamed, following chains (a to b, then b to c), unless a record already
// has the new name: that one is kept, and the move is reported in
// conflicts instead (the old record is then an activity no longer in the
// configuration).
func (w *Workflow) Renames(stored map[string]bool) (renames, conflicts []Rename) {
	if len(w.Moved) == 0 {
		return nil, nil
	}
	names := keysOf(stored)
	cur := make(map[string]string, len(names)) // original -> current name
	by := map[string]*Moved{}
	taken := make(map[string]bool, len(names))
	for _, n := range names {
		cur[n] = n
		taken[n] = true
	}
	// Until nothing moves: a chain may be declared in any order. The
	// loader refuses cycles, so each record moves at most once per block.
	for pass := 0; pass <= len(w.Moved); pass++ {
		moved := false
		for i := range w.Moved {
			m := &w.Moved[i]
			for _, orig := range names {
				name := cur[orig]
				to, ok := m.apply(name)
				if !ok || to == name {
					continue
				}
				if taken[to] {
					if pass == 0 {
						conflicts = append(conflicts, Rename{From: name, To: to, By: m})
					}
					continue
				}
				delete(taken, name)
				taken[to] = true
				cur[orig] = to
				by[orig] = m
				moved = true
			}
		}
		if !moved {
			break
		}
	}
	for _, orig := range names {
		if cur[orig] != orig {
			renames = append(renames, Rename{From: orig, To: cur[orig], By: by[orig]})
		}
	}
	sort.Slice(renames, func(i, j int) bool { return renames[i].To < renames[j].To })
	return renames, conflicts
}

// apply returns the name a record named name has after this block.
func (m *Moved) apply(name string) (string, bool) {
	block, key, isElem := SplitName(name)
	switch {
	case !m.From.HasKey && !isElem && block == m.From.Name:
		return m.To.StateName(), true
	case !m.From.HasKey && isElem && block == m.From.Name && !m.To.HasKey:
		// An activity with for_each moved as a whole: every element.
		return ElementName(m.To.Name, key), true
	case m.From.HasKey && isElem && block == m.From.Name && key == m.From.Key:
		return m.To.StateName(), true
	}
	return "", false
}

// loadMoved decodes a workflow's moved blocks; declared holds the
// workflow's activities. A destination must be declared, or be where
// another moved block starts (a chain: a to b, b to c).
func (l *loader) loadMoved(w *Workflow, blocks []*hcl.Block, declared map[string]*Activity) {
	type parsed struct {
		from, to         Address
		fromAttr, toAttr *hcl.Attribute
		b                *hcl.Block
	}
	var all []parsed
	froms := map[string]bool{}
	for _, b := range blocks {
		content, d := b.Body.Content(movedSchema)
		l.addDiags(d)
		if content == nil || d.HasErrors() {
			continue
		}
		from, ok := l.movedAddress(content.Attributes["from"])
		if !ok {
			continue
		}
		to, ok := l.movedAddress(content.Attributes["to"])
		if !ok {
			continue
		}
		all = append(all, parsed{from, to, content.Attributes["from"], content.Attributes["to"], b})
		froms[from.String()] = true
	}
	seenTo := map[string]hcl.Range{}
	for _, p := range all {
		from, to := p.from, p.to
		switch target := declared[to.Name]; {
		case target == nil && froms[to.String()]:
			// A link of a chain.
		case target == nil:
			l.errorf(p.toAttr.Expr.Range().Ptr(), "Moved to an undeclared activity",
				"There is no activity named %q in this workflow to move the state of %s to.%s", to.Name, from, didYouMean(to.Name, keysOf(declared)))
			continue
		case to.HasKey && target.ForEach == nil:
			l.errorf(p.toAttr.Expr.Range().Ptr(), "Moved to an element of an activity without for_each",
				"%s has an element key, but activity %q has no for_each. Move to activity.%s.", to, to.Name, to.Name)
			continue
		case !to.HasKey && from.HasKey && target.ForEach != nil:
			l.errorf(p.toAttr.Expr.Range().Ptr(), "Moved an element to an activity with for_each",
				"activity %q has for_each, so one element's state must move to one of its elements, like activity.%s[\"KEY\"].", to.Name, to.Name)
			continue
		}
		if f := declared[from.Name]; f != nil {
			// activity.a to activity.a["k"] (for_each added) and back are
			// moves within one declared activity.
			stillThere := !from.HasKey && f.ForEach == nil
			if from.HasKey && f.ForEach != nil && f.ForEach.Known() {
				for _, k := range f.StaticKeys() {
					stillThere = stillThere || k == from.Key
				}
			}
			if stillThere {
				l.errorf(p.fromAttr.Expr.Range().Ptr(), "Moved object still declared",
					"%s is still in the configuration, so its state cannot move to %s. Remove or rename the activity it names, or remove this moved block.", from, to)
				continue
			}
		}
		if from == to {
			l.errorf(p.toAttr.Expr.Range().Ptr(), "Moved to itself", "from and to are both %s.", from)
			continue
		}
		if prev, dup := seenTo[to.String()]; dup {
			l.errorf(p.toAttr.Expr.Range().Ptr(), "Ambiguous move",
				"Another moved block (at %s) already moves state to %s; the state of one address can go to only one place, and one place can take only one.", prev, to)
			continue
		}
		seenTo[to.String()] = p.toAttr.Expr.Range()
		w.Moved = append(w.Moved, Moved{From: from, To: to, DeclRange: p.b.DefRange})
	}
	// A cycle (a to b, b to a) would move state back and forth.
	next := map[string]string{}
	for _, m := range w.Moved {
		next[m.From.String()] = m.To.String()
	}
	for i, m := range w.Moved {
		at := m.To.String()
		for range len(w.Moved) {
			n, ok := next[at]
			if !ok {
				break
			}
			if n == m.From.String() || n == m.To.String() {
				l.errorf(w.Moved[i].DeclRange.Ptr(), "Cyclic moved blocks",
					"The moved blocks starting at %s lead back to it; state can only move forward. Remove one of them.", m.From)
				w.Moved = nil
				return
			}
			at = n
		}
	}
}

func (l *loader) movedAddress(attr *hcl.Attribute) (Address, bool) {
	t, d := hcl.AbsTraversalForExpr(attr.Expr)
	if d.HasErrors() {
		l.errorf(attr.Expr.Range().Ptr(), "Invalid "+attr.Name+" address",
			"%s must be an activity address, like activity.NAME or activity.NAME[\"KEY\"].", attr.Name)
		return Address{}, false
	}
	a, err := addressOf(t, "")
	if err != nil {
		l.errorf(attr.Expr.Range().Ptr(), "Invalid "+attr.Name+" address", "%s must be an activity address, like activity.NAME or activity.NAME[\"KEY\"].", attr.Name)
		return Address{}, false
	}
	return a, true
}

// describeRenames is "activity.a (moved from activity.b)" wording for the
// planner.
func (r Rename) String() string {
	return fmt.Sprintf("activity.%s moved from activity.%s", r.To, r.From)
}
