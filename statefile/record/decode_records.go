package record

import "time"

// The record types' decoders, one per stored JSON record, on top of
// the field iterator (decode.go) and the values (decode_values.go).

func (d *decoder) errorObj(p **Error) error {
	if d.null() {
		*p = nil
		return nil
	}
	e := &Error{}
	var f fields
	for f.init(d); f.next(); {
		switch string(f.key) {
		case "type":
			f.fail(d.strField(&e.Type))
		case "message":
			f.fail(d.strField(&e.Message))
		case "non_retryable":
			f.fail(d.boolField(&e.NonRetryable))
		default:
			f.unknown()
		}
	}
	if f.err != nil {
		return f.err
	}
	*p = e
	return nil
}

func (d *decoder) timerObj(p **Timer) error {
	if d.null() {
		*p = nil
		return nil
	}
	t := &Timer{}
	var f fields
	for f.init(d); f.next(); {
		switch string(f.key) {
		case "kind":
			f.fail(d.strField((*string)(&t.Kind)))
		case "fire_at":
			f.fail(d.timeField(&t.FireAt))
		case "attempt":
			f.fail(d.intField(&t.Attempt))
		case "set":
			f.fail(d.timeField(&t.Set))
		case "delay":
			f.fail(d.durationField(&t.Delay))
		case "source":
			f.fail(d.strField(&t.Source))
		default:
			f.unknown()
		}
	}
	if f.err != nil {
		return f.err
	}
	*p = t
	return nil
}

// top starts the fields of a whole record. A top-level null leaves the
// record zero, as in encoding/json: f then yields no fields.
func (d *decoder) top(f *fields) {
	if d.null() {
		*f = fields{d: d, done: true}
		return
	}
	f.init(d)
}

// finish ends a whole record: a field's error, else anything after it.
func (d *decoder) finish(f *fields) error {
	if f.err != nil {
		return f.err
	}
	return d.end()
}

func decodeInstance(b []byte, r *Instance) error {
	d := decoder{b: b}
	var f fields
	for d.top(&f); f.next(); {
		switch string(f.key) {
		case "workflow":
			f.fail(d.strField(&r.Workflow))
		case "key":
			f.fail(d.strField(&r.Key))
		case "created":
			f.fail(d.timeField(&r.Created))
		case "updated":
			f.fail(d.timeField(&r.Updated))
		default:
			f.unknown()
		}
	}
	return d.finish(&f)
}

func decodeActivity(b []byte, r *Activity) error {
	d := decoder{b: b}
	var f fields
	for d.top(&f); f.next(); {
		switch string(f.key) {
		case "workflow":
			f.fail(d.strField(&r.Workflow))
		case "instance":
			f.fail(d.strField(&r.Instance))
		case "name":
			f.fail(d.strField(&r.Name))
		case "generation":
			f.fail(d.intField(&r.Generation))
		case "def_hash":
			f.fail(d.strField(&r.DefHash))
		case "idempotency_key":
			f.fail(d.strField(&r.IdempotencyKey))
		case "status":
			f.fail(d.strField((*string)(&r.Status)))
		case "attempts":
			f.fail(d.intField(&r.Attempts))
		case "rule_counts":
			f.fail(d.intsField(&r.RuleCounts))
		case "interrupted":
			f.fail(d.intField(&r.Interrupted))
		case "first_start":
			f.fail(d.timeField(&r.FirstStart))
		case "last_delay":
			f.fail(d.durationField(&r.LastDelay))
		case "timer":
			f.fail(d.timerObj(&r.Timer))
		case "outputs":
			raw, err := d.raw()
			r.Outputs = raw
			f.fail(err)
		case "last_error":
			f.fail(d.errorObj(&r.LastError))
		case "fail_reason":
			f.fail(d.strField(&r.FailReason))
		case "finished":
			f.fail(d.timeField(&r.Finished))
		case "heartbeat_details":
			f.fail(d.strField(&r.HeartbeatDetails))
		default:
			f.unknown()
		}
	}
	return d.finish(&f)
}

func decodeAttempt(b []byte, r *Attempt) error {
	d := decoder{b: b}
	var f fields
	for d.top(&f); f.next(); {
		switch string(f.key) {
		case "workflow":
			f.fail(d.strField(&r.Workflow))
		case "instance":
			f.fail(d.strField(&r.Instance))
		case "activity":
			f.fail(d.strField(&r.Activity))
		case "generation":
			f.fail(d.intField(&r.Generation))
		case "number":
			f.fail(d.intField(&r.Number))
		case "idempotency_key":
			f.fail(d.strField(&r.IdempotencyKey))
		case "start":
			f.fail(d.timeField(&r.Start))
		case "end":
			f.fail(d.timeField(&r.End))
		case "outcome":
			f.fail(d.strField((*string)(&r.Outcome)))
		case "error":
			f.fail(d.errorObj(&r.Error))
		case "wait":
			f.fail(d.durationField(&r.Wait))
		case "has_wait":
			f.fail(d.boolField(&r.HasWait))
		case "wait_source":
			f.fail(d.strField(&r.WaitSource))
		case "fired_by":
			f.fail(d.strField(&r.FiredBy))
		case "output":
			f.fail(d.outputObj(&r.Output))
		default:
			f.unknown()
		}
	}
	return d.finish(&f)
}

func (d *decoder) outputObj(p **Output) error {
	if d.null() {
		*p = nil
		return nil
	}
	o := &Output{}
	var f fields
	for f.init(d); f.next(); {
		switch string(f.key) {
		case "stdout":
			f.fail(d.strField(&o.Stdout))
		case "stdout_bytes":
			f.fail(d.intField(&o.StdoutBytes))
		case "stderr":
			f.fail(d.strField(&o.Stderr))
		case "stderr_bytes":
			f.fail(d.intField(&o.StderrBytes))
		case "body":
			f.fail(d.strField(&o.Body))
		case "body_bytes":
			f.fail(d.intField(&o.BodyBytes))
		default:
			f.unknown()
		}
	}
	if f.err != nil {
		return f.err
	}
	*p = o
	return nil
}

func decodeBudget(b []byte, r *Budget) error {
	d := decoder{b: b}
	var f fields
	for d.top(&f); f.next(); {
		switch string(f.key) {
		case "name":
			f.fail(d.strField(&r.Name))
		case "stamps":
			f.fail(d.timesField(&r.Stamps))
		default:
			f.unknown()
		}
	}
	return d.finish(&f)
}

// intsField decodes an []int; null makes it nil, [] empty, as in
// encoding/json.
func (d *decoder) intsField(p *[]int) error {
	if d.null() {
		*p = nil
		return nil
	}
	out := []int{}
	err := d.array(func(d *decoder) error {
		var n int
		err := d.intField(&n)
		out = append(out, n)
		return err
	})
	*p = out
	return err
}

func (d *decoder) timesField(p *[]time.Time) error {
	if d.null() {
		*p = nil
		return nil
	}
	out := []time.Time{}
	err := d.array(func(d *decoder) error {
		var t time.Time
		err := d.timeField(&t)
		out = append(out, t)
		return err
	})
	*p = out
	return err
}

func decodeBreaker(b []byte, r *Breaker) error {
	d := decoder{b: b}
	var f fields
	for d.top(&f); f.next(); {
		switch string(f.key) {
		case "name":
			f.fail(d.strField(&r.Name))
		case "state":
			f.fail(d.strField(&r.State))
		case "since":
			f.fail(d.timeField(&r.Since))
		case "half_open_at":
			f.fail(d.timeField(&r.HalfOpenAt))
		case "window":
			f.fail(d.bucketsField(&r.Window))
		case "trial_successes":
			f.fail(d.intField(&r.TrialSuccesses))
		case "epoch":
			f.fail(d.intField(&r.Epoch))
		default:
			f.unknown()
		}
	}
	return d.finish(&f)
}

// bucketsField decodes a breaker's window; null makes it nil, [] empty.
func (d *decoder) bucketsField(p *[]BreakerBucket) error {
	if d.null() {
		*p = nil
		return nil
	}
	out := []BreakerBucket{}
	err := d.array(func(d *decoder) error {
		var bk BreakerBucket
		var f fields
		for f.init(d); f.next(); {
			switch string(f.key) {
			case "start":
				f.fail(d.timeField(&bk.Start))
			case "successes":
				f.fail(d.intField(&bk.Successes))
			case "failures":
				f.fail(d.intField(&bk.Failures))
			default:
				f.unknown()
			}
		}
		out = append(out, bk)
		return f.err
	})
	*p = out
	return err
}
