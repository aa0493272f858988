package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// bodyContent is body.Content(schema), read straight from the syntax tree
// when the body is as the parser made it and nothing in it would draw a
// diagnostic: every argument is in the schema, every required one is set
// and every block is of a type in the schema with its number of labels.
// hclsyntax's Content builds four maps and a body of what remains for
// every call (a kilobyte or so: 20,000 calls for 10,000 activities) to
// find what does not fit; anything that does not fit is still its call, so
// every diagnostic is HCL's. The content is the same as Content's
// (TestBodyContentIsHCLs, FuzzBodyContent).
//
// body must not be what remains of a PartialContent: the arguments that
// hides are not visible here.
func bodyContent(body hcl.Body, schema *hcl.BodySchema) (*hcl.BodyContent, hcl.Diagnostics) {
	if sb, ok := body.(*hclsyntax.Body); ok {
		if c := quickContent(sb, schema); c != nil {
			return c, nil
		}
	}
	return body.Content(schema)
}

// quickContent is body's content for schema, or nil if Content could have
// something to say about it.
func quickContent(body *hclsyntax.Body, schema *hcl.BodySchema) *hcl.BodyContent {
	for name := range body.Attributes {
		if !schemaHasAttr(schema, name) {
			return nil
		}
	}
	for _, s := range schema.Attributes {
		if _, set := body.Attributes[s.Name]; s.Required && !set {
			return nil
		}
	}
	for _, b := range body.Blocks {
		s, ok := schemaBlock(schema, b.Type)
		if !ok || len(b.Labels) != len(s.LabelNames) {
			return nil
		}
	}
	attrs := make(hcl.Attributes, len(body.Attributes))
	for name, attr := range body.Attributes {
		attrs[name] = attr.AsHCLAttribute()
	}
	var blocks hcl.Blocks
	if len(body.Blocks) > 0 {
		blocks = make(hcl.Blocks, len(body.Blocks))
		for i, b := range body.Blocks {
			blocks[i] = b.AsHCLBlock()
		}
	}
	return &hcl.BodyContent{Attributes: attrs, Blocks: blocks, MissingItemRange: body.MissingItemRange()}
}

func schemaHasAttr(schema *hcl.BodySchema, name string) bool {
	for _, s := range schema.Attributes {
		if s.Name == name {
			return true
		}
	}
	return false
}

func schemaBlock(schema *hcl.BodySchema, typ string) (hcl.BlockHeaderSchema, bool) {
	for _, s := range schema.Blocks {
		if s.Type == typ {
			return s, true
		}
	}
	return hcl.BlockHeaderSchema{}, false
}
