// Package planner turns a configuration and the stored state into a plan:
// the activity graph and its order, what each activity will do on the next
// apply (+ run, ~ re-run, > resume, ! retry failed, = unchanged), how a
// plan is rendered, and how it is saved to and read from a plan file.
//
// It reads state only through StateReader and the plain records of
// statefile/record, so it never touches the store itself.
package planner

import (
	"container/heap"
	"fmt"
	"slices"
	"strings"

	"github.com/hashicorp/hcl/v2"

	"github.com/wf-engine/wf/config"
)

// Graph is the dependency graph of one workflow's activities.
type Graph struct {
	wf    *config.Workflow
	names []string       // declaration order
	index map[string]int // name -> declaration index
	up    [][]int        // direct upstream, ascending declaration index
	down  [][]int        // direct downstream, ascending declaration index
	order []string
}

// BuildGraph builds the graph of wf's activities from their DependsOn
// lists. A dependency on an undeclared activity and every dependency cycle
// are error diagnostics; the graph is returned regardless so callers such
// as `wf graph` can still draw it.
func BuildGraph(wf *config.Workflow) (*Graph, hcl.Diagnostics) {
	g := &Graph{wf: wf, index: make(map[string]int, len(wf.Activities))}
	for _, a := range wf.Activities {
		if _, dup := g.index[a.Name]; dup {
			continue // the loader reports duplicates; keep the first
		}
		g.index[a.Name] = len(g.names)
		g.names = append(g.names, a.Name)
	}
	g.up = make([][]int, len(g.names))
	g.down = make([][]int, len(g.names))

	var diags hcl.Diagnostics
	wired := make(map[string]bool, len(g.names))
	for _, a := range wf.Activities {
		if wired[a.Name] {
			continue
		}
		wired[a.Name] = true
		i := g.index[a.Name]
		seen := map[int]bool{}
		for _, dep := range a.DependsOn {
			j, ok := g.index[dep]
			if !ok {
				rng := depRange(a, dep)
				diags = append(diags, &hcl.Diagnostic{
					Severity: hcl.DiagError,
					Summary:  "Reference to undeclared activity",
					Detail:   fmt.Sprintf("activity.%s depends on activity.%s, which is not declared in workflow %q.", a.Name, dep, wf.Name),
					Subject:  &rng,
				})
				continue
			}
			if seen[j] {
				continue
			}
			seen[j] = true
			g.up[i] = append(g.up[i], j)
			g.down[j] = append(g.down[j], i)
		}
	}
	for i := range g.up {
		slices.Sort(g.up[i])
		slices.Sort(g.down[i])
	}
	diags = append(diags, g.cycles()...)
	g.order = g.topo()
	return g, diags
}

// depRange is where activity a refers to dep, falling back to a's block.
func depRange(a *config.Activity, dep string) hcl.Range {
	if r, ok := a.DependsOnRange(dep); ok {
		return r
	}
	return a.DeclRange
}

// Order returns every activity, upstream before downstream, ties broken by
// declaration order. Activities caught in a cycle (already reported by
// BuildGraph) come last, in declaration order.
func (g *Graph) Order() []string { return append([]string(nil), g.order...) }

// Upstream returns the activities name depends on directly, in declaration
// order; nil for an unknown name.
func (g *Graph) Upstream(name string) []string { return g.namesOf(g.up, name) }

// Downstream returns the activities that depend on name directly, in
// declaration order; nil for an unknown name.
func (g *Graph) Downstream(name string) []string { return g.namesOf(g.down, name) }

func (g *Graph) namesOf(adj [][]int, name string) []string {
	i, ok := g.index[name]
	if !ok {
		return nil
	}
	out := make([]string, len(adj[i]))
	for k, j := range adj[i] {
		out[k] = g.names[j]
	}
	return out
}

// intHeap is a min-heap of declaration indexes, so the topological sort
// always picks the earliest-declared ready activity.
type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// topo is Kahn's algorithm with a declaration-ordered ready set.
func (g *Graph) topo() []string {
	pending := make([]int, len(g.names))
	ready := &intHeap{}
	for i := range g.names {
		pending[i] = len(g.up[i])
		if pending[i] == 0 {
			*ready = append(*ready, i)
		}
	}
	heap.Init(ready)
	done := make([]bool, len(g.names))
	order := make([]string, 0, len(g.names))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		done[i] = true
		order = append(order, g.names[i])
		for _, j := range g.down[i] {
			if pending[j]--; pending[j] == 0 {
				heap.Push(ready, j)
			}
		}
	}
	for i, ok := range done {
		if !ok {
			order = append(order, g.names[i])
		}
	}
	return order
}

// cycles finds the strongly connected components (Tarjan) and reports one
// diagnostic per component that contains a cycle.
func (g *Graph) cycles() hcl.Diagnostics {
	n := len(g.names)
	index := make([]int, n)
	low := make([]int, n)
	onStack := make([]bool, n)
	for i := range index {
		index[i] = -1
	}
	var stack []int
	next := 0
	var comps [][]int
	var visit func(v int)
	visit = func(v int) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range g.up[v] {
			if index[w] < 0 {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] != index[v] {
			return
		}
		var comp []int
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			comp = append(comp, w)
			if w == v {
				break
			}
		}
		comps = append(comps, comp)
	}
	for v := range n {
		if index[v] < 0 {
			visit(v)
		}
	}

	var cyclic [][]int
	for _, comp := range comps {
		if len(comp) > 1 || g.selfLoop(comp[0]) {
			slices.Sort(comp)
			cyclic = append(cyclic, comp)
		}
	}
	// Report in declaration order of each cycle's first activity.
	slices.SortFunc(cyclic, func(a, b []int) int { return a[0] - b[0] })
	var diags hcl.Diagnostics
	for _, comp := range cyclic {
		diags = append(diags, g.cycleDiag(g.cycleWalk(comp)))
	}
	return diags
}

func (g *Graph) selfLoop(v int) bool {
	for _, w := range g.up[v] {
		if w == v {
			return true
		}
	}
	return false
}

// cycleWalk returns a closed walk through a strongly connected component
// that visits every member, starting and ending at the earliest-declared
// one. For a simple cycle it is exactly that cycle.
func (g *Graph) cycleWalk(comp []int) []int {
	member := make(map[int]bool, len(comp))
	for _, v := range comp {
		member[v] = true
	}
	start := comp[0]
	walk := []int{start}
	visited := map[int]bool{start: true}
	cur := start
	for len(visited) < len(comp) {
		path := g.shortestPath(cur, member, func(v int) bool { return !visited[v] })
		for _, v := range path {
			visited[v] = true
		}
		walk = append(walk, path...)
		cur = walk[len(walk)-1]
	}
	back := g.shortestPath(cur, member, func(v int) bool { return v == start })
	return append(walk, back...)
}

// shortestPath is a BFS along dependency edges inside member from src to
// the nearest node satisfying goal (src itself excluded); it returns the
// path without src. Within a strongly connected component such a node
// always exists.
func (g *Graph) shortestPath(src int, member map[int]bool, goal func(int) bool) []int {
	prev := map[int]int{src: -1}
	queue := []int{src}
	for len(queue) > 0 {
		v := queue[0]
		queue = queue[1:]
		for _, w := range g.up[v] {
			if !member[w] {
				continue
			}
			if goal(w) {
				path := []int{w}
				for u := v; u != src; u = prev[u] {
					path = append(path, u)
				}
				for i, j := 0, len(path)-1; i < j; i, j = i+1, j-1 {
					path[i], path[j] = path[j], path[i]
				}
				return path
			}
			if _, seen := prev[w]; !seen {
				prev[w] = v
				queue = append(queue, w)
			}
		}
	}
	return nil
}

func (g *Graph) cycleDiag(walk []int) *hcl.Diagnostic {
	addrs := make([]string, len(walk))
	for i, v := range walk {
		addrs[i] = "activity." + g.names[v]
	}
	var detail strings.Builder
	fmt.Fprintf(&detail, "The activities of workflow %q depend on each other in a cycle, so none of them can run first:\n", g.wf.Name)
	var subject *hcl.Range
	for i := 0; i+1 < len(walk); i++ {
		a := g.wf.Activity(g.names[walk[i]])
		rng := depRange(a, g.names[walk[i+1]])
		if subject == nil {
			subject = &rng
		}
		fmt.Fprintf(&detail, "  %s depends on %s (%s:%d)\n", addrs[i], addrs[i+1], rng.Filename, rng.Start.Line)
	}
	detail.WriteString("Remove one of these dependencies to break the cycle.")
	return &hcl.Diagnostic{
		Severity: hcl.DiagError,
		Summary:  "Dependency cycle: " + strings.Join(addrs, " -> "),
		Detail:   detail.String(),
		Subject:  subject,
	}
}
