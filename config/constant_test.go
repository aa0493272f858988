package config

import (
	"reflect"
	"testing"
)

// TestConstantResolve: a kind block of literals resolves once, at load,
// to what evaluating it at run time gives; a block that refers to or
// calls anything is evaluated on every Resolve.
func TestConstantResolve(t *testing.T) {
	files := map[string][]byte{"main.wf.hcl": []byte(`
variable "host" {
  default = "h"
}
workflow "w" {
  activity "lit" {
    http {
      url           = "http://h/x?api_key=0123456789abcdef"
      method        = "post"
      headers       = { "Authorization" = "Bearer 0123456789abcdef", Accept = "*/*" }
      body          = "{\"a\": [1, 2]}"
      expect_status = [200, 201]
    }
  }
  activity "tpl" {
    http { url = "http://h/${1 + 1}" }
  }
  activity "var" {
    http { url = "http://${var.host}/" }
  }
  activity "call" {
    http { url = lower("HTTP://H/") }
  }
  activity "ex" {
    exec { command = ["echo", "a"] }
  }
  activity "sl" {
    sleep { duration = "1s" }
  }
}
`)}
	cfg, diags := LoadFiles("c", files, LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	// The same blocks loaded to be evaluated on every Resolve.
	foldConstantBlocks = false
	evalCfg, diags := LoadFiles("c", files, LoadOptions{})
	foldConstantBlocks = true
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	w := cfg.Workflows[0]
	for name, constant := range map[string]bool{"lit": true, "tpl": false, "var": false, "call": false, "ex": true, "sl": true} {
		a := w.Activity(name)
		if _, got := a.resolver.(*constantResolver); got != constant {
			t.Errorf("activity.%s: constant %v, want %v", name, got, constant)
		}
		got, d := a.Resolve(nil)
		if d.HasErrors() {
			t.Fatalf("activity.%s: %v", name, d)
		}
		// What evaluating it at run time gives.
		ea := evalCfg.Workflows[0].Activity(name)
		if _, ok := ea.resolver.(*kindResolver); !ok {
			t.Fatalf("activity.%s: resolver %T with constant blocks not folded", name, ea.resolver)
		}
		want, d := ea.Resolve(nil)
		if d.HasErrors() {
			t.Fatalf("activity.%s: %v", name, d)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("activity.%s: resolves to %+v, evaluated at run time %+v", name, got, want)
		}
		if name == "lit" && (len(got.Sensitive) == 0 || got.HTTP.Method != "POST") {
			t.Errorf("activity.lit: %+v, sensitive %q", got.HTTP, got.Sensitive)
		}
	}
}
