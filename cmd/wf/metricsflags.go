package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/wf-engine/wf/executor/event"
	"github.com/wf-engine/wf/executor/metrics"
)

// metricsFileInterval is how often -metrics-file is rewritten (SPEC §9).
const metricsFileInterval = 5 * time.Second

// metricsFlags are -metrics-addr and -metrics-file, shared by wf apply and
// (later) wf worker, and what they start.
type metricsFlags struct {
	addr string
	file string

	m      *metrics.Metrics
	server *metrics.Server
	writer *metrics.FileWriter
	stop   context.CancelFunc
}

func (f *metricsFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.addr, "metrics-addr", "", "serve Prometheus metrics at http://`HOST:PORT`/metrics while running")
	fs.StringVar(&f.file, "metrics-file", "", "write the metrics to `PATH` every 5s and at exit (atomically, for node_exporter's textfile collector)")
}

// open binds -metrics-addr and writes -metrics-file once, so that a taken
// port or an unwritable path fails the command before anything runs.
// Warnings about later writes go to stderr.
func (f *metricsFlags) open(stderr io.Writer) error {
	if f.addr == "" && f.file == "" {
		return nil
	}
	f.m = metrics.New(metrics.Options{})
	if f.addr != "" {
		s, err := metrics.Listen(f.addr, f.m.Handler())
		if err != nil {
			return fmt.Errorf("-metrics-addr: %w", err)
		}
		f.server = s
	}
	if f.file != "" {
		w, err := f.m.WriteFileEvery(f.file, metricsFileInterval, func(err error) {
			fmt.Fprintf(stderr, "Warning: %v\n", err)
		})
		if err != nil {
			f.close(stderr)
			return fmt.Errorf("-metrics-file: %w", err)
		}
		f.writer = w
	}
	return nil
}

// follow feeds the metrics from bus; call it before the run publishes.
func (f *metricsFlags) follow(bus *event.Bus) {
	if f.m == nil {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.stop = cancel
	go f.m.Follow(ctx, bus.Subscribe())
}

// close, once the run's bus is closed, lets the metrics count its last
// events, writes -metrics-file a last time and stops the server.
func (f *metricsFlags) close(stderr io.Writer) {
	if f.m == nil {
		return
	}
	if f.stop != nil {
		// The bus is closed by now: stopping applies what is queued, then
		// Follow returns.
		f.stop()
		<-f.m.Done()
	}
	if f.writer != nil {
		if err := f.writer.Close(); err != nil {
			fmt.Fprintf(stderr, "Warning: %v\n", err)
		}
	}
	if f.server != nil {
		f.server.Close()
	}
}
