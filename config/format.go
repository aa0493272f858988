package config

import (
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/hashicorp/hcl/v2/hclwrite"
)

// Format returns src in canonical layout. The source is parsed first so
// that a syntax error is reported (with filename) instead of being
// "formatted" into something else, after the same bounds check the loader
// makes (hclwrite's parser recurses as deeply as HCL's).
func Format(src []byte, filename string) ([]byte, hcl.Diagnostics) {
	if diags := prescanConfig(src, filename); diags.HasErrors() {
		return nil, diags
	}
	if _, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos); diags.HasErrors() {
		return nil, diags
	}
	return hclwrite.Format(src), nil
}
