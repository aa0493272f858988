package main

// End-to-end tests of the http limits of SPEC §4.3 through `wf apply`:
// capped Retry-After on any failed status, cut response bodies and too many
// redirects.

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
)

func jsonEvents(t *testing.T, stdout string) []map[string]any {
	t.Helper()
	var evs []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("not a JSON line: %q", line)
		}
		evs = append(evs, ev)
	}
	return evs
}

func findEvent(evs []map[string]any, typ, activity string) map[string]any {
	for _, ev := range evs {
		if ev["type"] == typ && ev["activity"] == activity {
			return ev
		}
	}
	return nil
}

// TestApplyCapsRetryAfter: a 413 with Retry-After: 9223372036 (292 years)
// is retried after maximum_retry_after, and both the -json event and the
// plain line say the delay was capped.
func TestApplyCapsRetryAfter(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Retry-After", "9223372036")
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			return
		}
		io.WriteString(w, `{"ok": true}`)
	}))
	defer srv.Close()
	cfg := fmt.Sprintf(`workflow "w" {
  activity "upload" {
    http { url = "%s/upload" }
    retry {
      maximum_attempts    = 3
      maximum_retry_after = "200ms"
    }
  }
}
`, srv.URL)

	dir := writeConfig(t, map[string]string{"main.wf.hcl": cfg})
	r := invocation{args: []string{"apply", "-auto-approve", "-json", dir}}.run(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	ev := findEvent(jsonEvents(t, r.stdout), "retry_scheduled", "activity.upload")
	if ev == nil {
		t.Fatalf("no retry_scheduled event:\n%s", r.stdout)
	}
	if ev["delay_ms"] != float64(200) || ev["delay_source"] != "server" || ev["delay_capped"] != true ||
		ev["requested_delay_ms"] != float64(9223372036000) {
		t.Errorf("retry_scheduled = %v, want delay_ms 200 from the server, delay_capped, requested_delay_ms 9223372036000", ev)
	}

	calls.Store(0)
	dir = writeConfig(t, map[string]string{"main.wf.hcl": cfg})
	r = invocation{args: []string{"apply", "-auto-approve", dir}}.run(t)
	if r.code != 0 {
		t.Fatalf("apply exited %d:\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	want := "activity.upload: attempt 1 failed (http:413); retry 2 in 200ms (server asked for 2562047h47m16s, capped by maximum_retry_after)"
	if !strings.Contains(r.stdout, want) {
		t.Errorf("plain output lacks %q:\n%s", want, r.stdout)
	}
}

// TestApplyTruncatedBodyResult: a 1.2 MB JSON body is cut at the default
// 1 MiB; the activity succeeds with body_truncated true, and the downstream
// activity that uses its result fails with an error naming the cap and the
// activity instead of receiving null.
func TestApplyTruncatedBodyResult(t *testing.T) {
	big := `{"items": [` + strings.Repeat(`"xxxxxxxxxx",`, 100_000) + `"end"]}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, big)
	}))
	defer srv.Close()
	dir := writeConfig(t, map[string]string{"main.wf.hcl": fmt.Sprintf(`workflow "w" {
  activity "fetch" {
    http { url = "%s/big" }
  }
  activity "flag" {
    exec { script = "echo ${activity.fetch.body_truncated} > flag.txt" }
  }
  activity "count" {
    exec { command = ["echo", length(activity.fetch.result.items)] }
  }
}
`, srv.URL)})
	r := invocation{args: []string{"apply", "-auto-approve", "-json", dir}}.run(t)
	if r.code == 0 {
		t.Fatalf("apply succeeded, want the count activity to fail:\n%s", r.stdout)
	}
	evs := jsonEvents(t, r.stdout)
	if findEvent(evs, "activity_succeeded", "activity.fetch") == nil || findEvent(evs, "activity_succeeded", "activity.flag") == nil {
		t.Fatalf("fetch and flag should succeed:\n%s", r.stdout)
	}
	failed := findEvent(evs, "activity_failed", "activity.count")
	if failed == nil {
		t.Fatalf("count did not fail:\n%s", r.stdout)
	}
	msg, _ := failed["error"].(map[string]any)["message"].(string)
	for _, s := range []string{"activity.fetch.result is not available", "max_response_bytes of 1048576 bytes", `activity "fetch"`, "main.wf.hcl:9"} {
		if !strings.Contains(msg, s) {
			t.Errorf("failure message lacks %q: %s", s, msg)
		}
	}
	if flag, err := os.ReadFile(filepath.Join(dir, "flag.txt")); err != nil || string(flag) != "true\n" {
		t.Errorf("activity.fetch.body_truncated = %q (%v), want true", flag, err)
	}
}

// TestApplyTooManyRedirects: /redirect/11 fails as http:too_many_redirects.
func TestApplyTooManyRedirects(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("/redirect/{n}", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("n"))
		http.Redirect(w, r, fmt.Sprintf("/redirect/%d", max(n-1, 0)), http.StatusFound)
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := writeConfig(t, map[string]string{"main.wf.hcl": fmt.Sprintf(`workflow "w" {
  activity "loop" {
    http { url = "%s/redirect/11" }
  }
}
`, srv.URL)})
	r := invocation{args: []string{"apply", "-auto-approve", "-json", dir}}.run(t)
	ev := findEvent(jsonEvents(t, r.stdout), "attempt_failed", "activity.loop")
	if ev == nil {
		t.Fatalf("no attempt_failed:\n%s", r.stdout)
	}
	e, _ := ev["error"].(map[string]any)
	if e["type"] != "http:too_many_redirects" || !strings.Contains(e["message"].(string), "stopped after 10 redirects") {
		t.Errorf("error = %v, want http:too_many_redirects after 10 redirects", e)
	}
}
