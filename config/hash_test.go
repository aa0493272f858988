package config

import (
	"os"
	"path/filepath"
	"testing"
)

const hashSrc = `
workflow "w" {
  activity "plain" {
    exec { command = ["./run.sh"] }
  }
  activity "dot" {
    exec {
      command = ["./run.sh"]
      dir     = "."
    }
  }
  activity "sub" {
    exec {
      command = ["./run.sh"]
      dir     = "bin"
    }
  }
  activity "sub_unclean" {
    exec {
      command = ["./run.sh"]
      dir     = "./bin/../bin/"
    }
  }
  activity "abs" {
    exec {
      command = ["./run.sh"]
      dir     = "/opt/tools"
    }
  }
}
`

// hashesIn loads hashSrc as if it lived in dir and returns each activity's
// definition hash and resolved working directory.
func hashesIn(t *testing.T, dir string) (hashes, dirs map[string]string) {
	t.Helper()
	cfg, diags := LoadFiles(dir, map[string][]byte{"main.wf.hcl": []byte(hashSrc)}, LoadOptions{})
	if diags.HasErrors() {
		t.Fatal(diags)
	}
	hashes, dirs = map[string]string{}, map[string]string{}
	for _, a := range cfg.Workflows[0].Activities {
		res, diags := a.Resolve(nil)
		if diags.HasErrors() {
			t.Fatal(diags)
		}
		hashes[a.Name], dirs[a.Name] = res.Hash(), res.Exec.Dir
	}
	return hashes, dirs
}

// TestHashIndependentOfLocation: the same files loaded from different
// directories, or from one directory reached through a symlink or a
// relative path, give the same definition hashes; only the directory the
// process runs in follows the location (SPEC §4.2).
func TestHashIndependentOfLocation(t *testing.T) {
	root := t.TempDir()
	a := filepath.Join(root, "proj")
	b := filepath.Join(root, "elsewhere", "proj2")
	link := filepath.Join(root, "link")
	for _, d := range []string{a, b} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(a, link); err != nil {
		t.Fatal(err)
	}
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(wd, a)
	if err != nil {
		t.Fatal(err)
	}

	base, baseDirs := hashesIn(t, a)
	for _, dir := range []string{b, link, rel, a + "/./"} {
		got, dirs := hashesIn(t, dir)
		for name, h := range base {
			if got[name] != h {
				t.Errorf("loaded from %s: activity %s hash %s, want %s (as loaded from %s)", dir, name, got[name], h, a)
			}
		}
		if dir == b && dirs["sub"] != filepath.Join(b, "bin") {
			t.Errorf("loaded from %s: sub runs in %s, want %s", dir, dirs["sub"], filepath.Join(b, "bin"))
		}
	}
	if baseDirs["plain"] != a || baseDirs["sub"] != filepath.Join(a, "bin") || baseDirs["abs"] != "/opt/tools" {
		t.Errorf("resolved dirs = %v", baseDirs)
	}
	// Spelling the same directory differently is the same definition;
	// a different directory is a different one.
	if base["plain"] != base["dot"] {
		t.Error(`no dir and dir = "." hash differently`)
	}
	if base["sub"] != base["sub_unclean"] {
		t.Error(`dir = "bin" and dir = "./bin/../bin/" hash differently`)
	}
	if base["plain"] == base["sub"] || base["sub"] == base["abs"] {
		t.Error("different working directories hash alike")
	}
}
