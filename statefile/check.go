package statefile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"

	"github.com/wf-engine/wf/statefile/record"
)

// CheckReport is what Check found in a state directory.
type CheckReport struct {
	Dir string
	// Exists is false when there is no state there yet.
	Exists bool
	// Schema is 2 for a state with a log, 1 for one written by a wf from
	// before the log (the next wf apply migrates it), 0 for none yet.
	Schema int
	// RecordSchema is the version of the records' encoding the state was
	// last written with (record.SchemaVersion then; 0: none yet).
	RecordSchema int
	Identity     string
	// Checkpoint is the sequence up to which the database's tables hold
	// the log; LogLast the last sequence in the log.
	Checkpoint, LogLast uint64
	LogSegments         int
	// Replayed is the number of log records after the checkpoint, which
	// readers lay over the database and the next writer applies to it.
	Replayed int
	// TornRecord is the sequence of a record a crash cut short at the end
	// of the log (0: none). It was never acknowledged; the next writer
	// clears it. That is a crash, not damage.
	TornRecord uint64
	// TornAfter counts the records after it that a power loss left (each
	// written with no sync completed since TornRecord's write), cleared
	// with it.
	TornAfter int
	Tables    int
	ValueLogs int
	// Residue counts files a crash left that the next writer removes:
	// memtable logs (their content is in the log), tables the MANIFEST
	// does not list, log segments the checkpoint covers.
	Residue int
	// Records counts every record, each decoded and checked.
	Instances, Activities, Timers, Attempts, Budgets, Spawns, Breakers int

	withTimer int
}

// Check verifies the state in dir as a reader would open it, then reads
// and decodes every record in it. It changes nothing. Damage is an error
// (a *DamageError when a file is damaged, or an error naming the record
// that does not decode); a healthy state gives a report.
func Check(dir string, opts Options) (*CheckReport, error) {
	r := &CheckReport{Dir: dir}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return r, nil
	}
	opts.ReadOnly = true
	s, err := openReader(dir, opts)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	r.Exists = true
	r.Identity = s.id
	if si := s.info; si != nil {
		switch si.kind {
		case kindLog:
			r.Schema = stateSchemaWith
		case kindLegacy:
			r.Schema = 1
		}
		r.Checkpoint, r.LogLast = si.cp.flushed, si.last
		r.LogSegments, r.Replayed = len(si.segs), len(si.records)
		if si.torn != nil {
			r.TornRecord, r.TornAfter = si.torn.seq, si.torn.after
		}
		r.Tables, r.ValueLogs = len(si.tables), len(si.vlogs)
		r.Residue = len(si.memFiles) + len(si.unlisted) + len(si.leftovers)
		if si.kind == kindLegacy {
			r.Residue -= len(si.memFiles) // a legacy state's memtables are data
		}
	}
	if err := s.checkRecords(r); err != nil {
		return nil, err
	}
	return r, nil
}

// checkRecords decodes every record of every table.
func (s *Store) checkRecords(r *CheckReport) error {
	err := s.read("check records", func(snap *snapshot) error {
		c := snap.cursor(nil)
		defer c.close()
		for c.rewind(); c.valid(); c.next() {
			k := c.key()
			v, err := c.value()
			if err != nil {
				return err
			}
			if err := checkRecord(k, v, r); err != nil {
				return keyError(k, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	// The timer index must match the activities both ways: PendingTimers
	// checks that each entry has its activity and that it has a timer.
	timers, err := s.PendingTimers()
	if err != nil {
		return err
	}
	if len(timers) != r.withTimer {
		return fmt.Errorf("state in %s: %d activities have a timer but the timer index has %d", s.dir, r.withTimer, len(timers))
	}
	return nil
}

func checkRecord(k, v []byte, r *CheckReport) error {
	switch k[0] {
	case tableMeta:
		switch string(k) {
		case string(keySchema):
			n, err := strconv.Atoi(string(v))
			if err != nil {
				return fmt.Errorf("schema %q: %w", v, err)
			}
			r.RecordSchema = n
			return nil
		case string(keyID), string(keySeq):
			return nil
		}
		return errors.New("unknown meta key")
	case tableInstance:
		in, err := record.DecodeInstance(v)
		if err == nil && string(instanceKey(in.Workflow, in.Key)) != string(k) {
			err = mismatch("instance", in.Address(), describeKey(k))
		}
		r.Instances++
		return err
	case tableActivity:
		a, err := record.DecodeActivity(v)
		if err == nil && string(activityKey(a.Workflow, a.Instance, a.Name)) != string(k) {
			err = mismatch("activity", a.Workflow+"/"+a.Instance+"/"+a.Name, describeKey(k))
		}
		r.Activities++
		if err == nil && a.Timer != nil {
			r.withTimer++
		}
		return err
	case tableTimer:
		if len(v) != 0 {
			return errors.New("timer index entry with a value")
		}
		r.Timers++
		return nil
	case tableAttempt:
		a, err := record.DecodeAttempt(v)
		if err == nil && string(attemptKey(a.Workflow, a.Instance, a.Activity, a.Generation, a.Number)) != string(k) {
			err = mismatch("attempt", fmt.Sprintf("%s/%s/%s #%d.%d", a.Workflow, a.Instance, a.Activity, a.Generation, a.Number), describeKey(k))
		}
		r.Attempts++
		return err
	case tableBudget:
		b, err := record.DecodeBudget(v)
		if err == nil && string(budgetKey(b.Name)) != string(k) {
			err = mismatch("budget", b.Name, describeKey(k))
		}
		r.Budgets++
		return err
	case tableSpawn:
		sp, err := record.DecodeSpawn(v)
		if err == nil && string(spawnKey(sp.Workflow, sp.Instance, sp.Activity)) != string(k) {
			err = mismatch("spawn", sp.Workflow+"/"+sp.Instance+"/"+sp.Activity, describeKey(k))
		}
		r.Spawns++
		return err
	case tableBreaker:
		b, err := record.DecodeBreaker(v)
		if err == nil && string(breakerKey(b.Name)) != string(k) {
			err = mismatch("breaker", b.Name, describeKey(k))
		}
		r.Breakers++
		return err
	}
	return errors.New("key of an unknown table")
}
