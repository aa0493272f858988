package zzcheck

import (
	"testing"

	_ "charm.land/bubbles/v2/progress"
	_ "charm.land/bubbles/v2/spinner"
	_ "charm.land/bubbles/v2/viewport"
	_ "charm.land/bubbletea/v2"
	_ "charm.land/lipgloss/v2"
	_ "github.com/charmbracelet/x/exp/teatest/v2"
	_ "github.com/dgraph-io/badger/v4"
	_ "github.com/hashicorp/hcl/v2/ext/typeexpr"
	_ "github.com/hashicorp/hcl/v2/hclsyntax"
	_ "github.com/hashicorp/hcl/v2/hclwrite"
	_ "github.com/hashicorp/hcl/v2/gohcl"
	_ "github.com/zclconf/go-cty/cty/function/stdlib"
	_ "github.com/zclconf/go-cty/cty/json"
	_ "github.com/zclconf/go-cty/cty/gocty"
	_ "github.com/zclconf/go-cty/cty/convert"
)

func TestX(t *testing.T) {}
