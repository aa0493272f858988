package main

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/wf-engine/wf/config"
	wftemporal "github.com/wf-engine/wf/executor/temporal"
	"github.com/wf-engine/wf/planner"
	"github.com/wf-engine/wf/statefile/record"
)

// engineFlags select the engine: the local one (state in a Badger
// directory) or Temporal (SPEC §12).
type engineFlags struct {
	engine    string
	address   string
	namespace string
	taskQueue string
	security  securityFlags
}

// securityFlags say how the connection to Temporal is secured; each falls
// back to an environment variable, so a cluster's settings can live in
// the environment of every command (docs/temporal.md).
type securityFlags struct {
	tls        envBool
	ca         string
	cert       string
	key        string
	serverName string
	apiKeyFile string
}

// envBool is a boolean flag that remembers whether it was given, so that
// an absent one falls back to its environment variable.
type envBool struct {
	set, value bool
}

func (b *envBool) String() string   { return strconv.FormatBool(b.value) }
func (b *envBool) IsBoolFlag() bool { return true }
func (b *envBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	b.set, b.value = true, v
	return nil
}

// register adds -engine and the Temporal connection flags. withQueue adds
// -task-queue (commands that start work).
func (f *engineFlags) register(fs *flag.FlagSet, withQueue bool) {
	fs.StringVar(&f.engine, "engine", "", "`ENGINE` to run on: local or temporal (default $WF_ENGINE, else local)")
	f.registerConn(fs)
	if withQueue {
		fs.StringVar(&f.taskQueue, "task-queue", "", "Temporal task `QUEUE` of the instances and their attempts (default wf)")
	}
}

// registerConn adds the flags that say how to reach Temporal.
func (f *engineFlags) registerConn(fs *flag.FlagSet) {
	fs.StringVar(&f.address, "temporal-address", "", "Temporal frontend `HOST:PORT` (default $WF_TEMPORAL_ADDRESS, else 127.0.0.1:7233)")
	fs.StringVar(&f.namespace, "namespace", "", "Temporal `NAMESPACE` (default default)")
	sf := &f.security
	fs.Var(&sf.tls, "temporal-tls", "connect to Temporal over TLS, checking its certificate against the system's roots (default $WF_TEMPORAL_TLS; implied by the other -temporal-tls flags and by an API key)")
	fs.StringVar(&sf.ca, "temporal-tls-ca", "", "PEM `FILE` of the CA certificates that sign Temporal's (default $WF_TEMPORAL_TLS_CA, else the system's roots)")
	fs.StringVar(&sf.cert, "temporal-tls-cert", "", "PEM `FILE` of the client certificate for mTLS (default $WF_TEMPORAL_TLS_CERT)")
	fs.StringVar(&sf.key, "temporal-tls-key", "", "PEM `FILE` of the client certificate's key (default $WF_TEMPORAL_TLS_KEY)")
	fs.StringVar(&sf.serverName, "temporal-tls-server-name", "", "`NAME` Temporal's certificate must carry, when not the address's host (default $WF_TEMPORAL_TLS_SERVER_NAME)")
	fs.StringVar(&sf.apiKeyFile, "temporal-api-key-file", "", "`FILE` holding the Temporal API key sent with every call (default: the key in $WF_TEMPORAL_API_KEY; implies TLS)")
}

// engineTemporal is the name of the Temporal engine (-engine, and in
// saved plans).
const engineTemporal = "temporal"

// temporal reports whether the command runs against Temporal; an unknown
// engine is an error.
func (f *engineFlags) temporal(c *CLI) (bool, error) {
	e := f.engine
	if e == "" {
		e = c.getenv("WF_ENGINE")
	}
	switch e {
	case "", "local":
		return false, nil
	case engineTemporal:
		return true, nil
	}
	return false, fmt.Errorf("unknown engine %q: want local or temporal", e)
}

func (f *engineFlags) queue() string {
	if f.taskQueue != "" {
		return f.taskQueue
	}
	return wftemporal.DefaultTaskQueue
}

// dial connects to the Temporal service the flags name.
func (c *CLI) dialTemporal(ctx context.Context, f *engineFlags) (*wftemporal.Client, error) {
	opts, err := c.temporalOptions(f)
	if err != nil {
		return nil, err
	}
	return wftemporal.Dial(ctx, opts)
}

// temporalOptions are the flags' connection, each unset flag taken from
// its environment variable.
func (c *CLI) temporalOptions(f *engineFlags) (wftemporal.ClientOptions, error) {
	sec, err := c.temporalSecurity(&f.security)
	if err != nil {
		return wftemporal.ClientOptions{}, err
	}
	return wftemporal.ClientOptions{Address: c.orEnv(f.address, "WF_TEMPORAL_ADDRESS"), Namespace: f.namespace, Security: sec}, nil
}

func (c *CLI) temporalSecurity(f *securityFlags) (wftemporal.Security, error) {
	sec := wftemporal.Security{
		TLS:        f.tls.value,
		CAFile:     c.orEnv(f.ca, "WF_TEMPORAL_TLS_CA"),
		CertFile:   c.orEnv(f.cert, "WF_TEMPORAL_TLS_CERT"),
		KeyFile:    c.orEnv(f.key, "WF_TEMPORAL_TLS_KEY"),
		ServerName: c.orEnv(f.serverName, "WF_TEMPORAL_TLS_SERVER_NAME"),
	}
	if !f.tls.set {
		if v := c.getenv("WF_TEMPORAL_TLS"); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return sec, fmt.Errorf("WF_TEMPORAL_TLS=%q: want true or false", v)
			}
			sec.TLS = b
		}
	}
	if f.apiKeyFile != "" {
		b, err := os.ReadFile(f.apiKeyFile)
		if err != nil {
			return sec, fmt.Errorf("read the Temporal API key: %w", err)
		}
		// A key file written by an editor or echo ends with a newline
		// that is not part of the key.
		if sec.APIKey = strings.TrimSpace(string(b)); sec.APIKey == "" {
			return sec, fmt.Errorf("the Temporal API key file %s is empty", f.apiKeyFile)
		}
	} else {
		sec.APIKey = strings.TrimSpace(c.getenv("WF_TEMPORAL_API_KEY"))
	}
	return sec, nil
}

// orEnv is v, or the environment variable name when v is empty.
func (c *CLI) orEnv(v, name string) string {
	if v != "" {
		return v
	}
	return c.getenv(name)
}

// temporalConfig loads the configuration of dir twice: as wf reads it
// (diagnostics name the user's files) and as the interpreter will, from
// the sources it sends to Temporal (definition hashes are the
// interpreter's). It returns the latter, narrowed to -workflow.
func (c *CLI) temporalConfig(dir string, flags *commonFlags) (*config.Config, wftemporal.Sources, error) {
	return c.temporalConfigEnv(dir, flags, c.Environ)
}

// temporalConfigEnv is temporalConfig with the WF_VAR_* variables taken
// from env (a saved plan's, for example).
func (c *CLI) temporalConfigEnv(dir string, flags *commonFlags, env []string) (*config.Config, wftemporal.Sources, error) {
	if _, err := c.loadConfig(dir, flags.loadOptions(env), flags.noColor); err != nil {
		return nil, wftemporal.Sources{}, err
	}
	varFiles, err := absPaths(flags.varFiles)
	if err != nil {
		return nil, wftemporal.Sources{}, err
	}
	src, err := wftemporal.ReadSources(dir, config.LoadOptions{Vars: flags.vars, VarFiles: varFiles, Env: env})
	if err != nil {
		return nil, wftemporal.Sources{}, err
	}
	cfg, diags := src.Load()
	if diags.HasErrors() {
		return nil, wftemporal.Sources{}, fmt.Errorf("configuration as sent to Temporal: %s", diags.Error())
	}
	cfg, err = selectWorkflow(cfg, flags.workflow)
	if err != nil {
		return nil, wftemporal.Sources{}, err
	}
	return cfg, src, nil
}

// temporalStates reads the records of every instance of cfg from
// Temporal: what the plan is made against.
type temporalStates struct {
	states map[string]*wftemporal.State
	runs   map[string]*wftemporal.Run
	// breakers are the cluster's circuit breakers, from their workflows.
	breakers map[string]*record.Breaker
}

// With running false, the records of running instances are not read
// (wf apply attaches to those; reading them needs a worker).
func readTemporalStates(ctx context.Context, cl *wftemporal.Client, cfg *config.Config, running bool) (*temporalStates, error) {
	ts := &temporalStates{states: map[string]*wftemporal.State{}, runs: map[string]*wftemporal.Run{}}
	for _, wf := range cfg.Workflows {
		run, err := cl.Describe(ctx, wf.Name, wf.Key)
		if err != nil {
			return nil, err
		}
		if run == nil || run.Removed {
			continue
		}
		ts.runs[wf.Address()] = run
		if run.Running() && !running {
			continue
		}
		st, err := cl.RunState(ctx, run)
		if err != nil {
			return nil, err
		}
		ts.states[wf.Address()] = st
	}
	ts.breakers = map[string]*record.Breaker{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Breakers)) {
		v, err := cl.Breaker(ctx, name)
		if err != nil {
			if !running {
				// wf apply: the instances ask the breaker themselves.
				continue
			}
			return nil, err
		}
		if v != nil {
			ts.breakers[name] = v.Record()
		}
	}
	return ts, nil
}

// Breakers implements planner.BreakerReader: a breaker whose workflow
// does not run is closed.
func (ts *temporalStates) Breakers() (map[string]*record.Breaker, error) { return ts.breakers, nil }

// Activities implements planner.StateReader.
func (ts *temporalStates) Activities(workflow, key string) (map[string]*record.Activity, error) {
	if st := ts.states[workflow+"/"+key]; st != nil && st.Activities != nil {
		return st.Activities, nil
	}
	return map[string]*record.Activity{}, nil
}

var (
	_ planner.StateReader   = (*temporalStates)(nil)
	_ planner.BreakerReader = (*temporalStates)(nil)
)
