package config

import (
	"reflect"
	"sort"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// contentSchemas are the schemas bodies are checked against: the
// loader's, and one with a required argument and labelled blocks.
func contentSchemas() []*hcl.BodySchema {
	out := []*hcl.BodySchema{fileSchema, workflowSchema, activitySchema, retryBlockSchema, {
		Attributes: []hcl.AttributeSchema{{Name: "a", Required: true}, {Name: "b"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "c", LabelNames: []string{"x", "y"}}, {Type: "d"}},
	}}
	for _, s := range kindSchemas {
		out = append(out, s)
	}
	return out
}

// checkContent holds bodyContent to hclsyntax's Content for every body of
// src and every schema: whenever Content has no diagnostic, bodyContent
// gives the same content and none either; otherwise it gives Content's
// diagnostics. It returns how many bodies took the quick way.
func checkContent(t *testing.T, src []byte) (quick int) {
	t.Helper()
	f, diags := hclsyntax.ParseConfig(src, "c.wf.hcl", hcl.InitialPos)
	if diags.HasErrors() || f == nil {
		return 0
	}
	var bodies []*hclsyntax.Body
	var walk func(b *hclsyntax.Body)
	walk = func(b *hclsyntax.Body) {
		bodies = append(bodies, b)
		for _, blk := range b.Blocks {
			walk(blk.Body)
		}
	}
	walk(f.Body.(*hclsyntax.Body))
	for _, b := range bodies {
		for _, s := range contentSchemas() {
			want, wantDiags := b.Content(s)
			got, gotDiags := bodyContent(b, s)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(diagStrings(gotDiags), diagStrings(wantDiags)) {
				t.Fatalf("bodyContent of the body at %v differs from Content's (diagnostics %v, want %v) in %.300q", b.SrcRange, gotDiags, wantDiags, src)
			}
			if quickContent(b, s) != nil {
				quick++
				if len(wantDiags) > 0 {
					t.Fatalf("quickContent took the body at %v that Content reports %v about", b.SrcRange, wantDiags)
				}
			}
		}
	}
	return quick
}

// diagStrings are diags as sorted text: Content reports unsupported
// arguments in map order.
func diagStrings(diags hcl.Diagnostics) []string {
	var out []string
	for _, d := range diags {
		out = append(out, d.Error())
	}
	sort.Strings(out)
	return out
}

func TestBodyContentIsHCLs(t *testing.T) {
	quick := 0
	for _, s := range quickScanSeeds(t) {
		quick += checkContent(t, s)
	}
	for _, s := range []string{
		"a = 1\nc \"x\" \"y\" {\n}\nd {\n}\nd {\n}\n",
		"a = 1\nb = 2\n",
		"b = 2\n",               // a missing
		"a = 1\nz = 2\n",        // z not in the schema
		"a = 1\nc \"x\" {\n}\n", // a label short
		"a = 1\nd \"x\" {\n}\n", // a label too many
		"a = 1\nq {\n}\n",       // no q blocks
		"exec {\n  command = [\"true\"]\n}\nretry = retry_policy.std\ndepends_on = [activity.a]\n",
	} {
		quick += checkContent(t, []byte(s))
	}
	if quick == 0 {
		t.Fatal("no body took the quick way")
	}
}

func FuzzBodyContent(f *testing.F) {
	for _, s := range quickScanSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src []byte) { checkContent(t, src) })
}
