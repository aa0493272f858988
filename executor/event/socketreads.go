package event

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"sync"
	"syscall"
)

// Reads on the event socket: while an apply holds the state's lock, the
// commands that only read (wf plan, history, state list|show, output,
// stats) ask the apply for the records instead of opening the state. A
// reader's first line is a read request; the server answers each request
// with any number of item lines and then one end (or error) line, and
// reads the next request. A reader never receives events.
//
//	client: {"read":{"id":1,"op":"state","args":{...}}}
//	server: {"reply":1,"item":{...}}
//	server: {"reply":1,"item":{...}}
//	server: {"reply":1,"end":true}            (or {"reply":1,"error":"..."})

// ErrReadsUnsupported is returned by Reads.Read when the apply serving the
// socket does not answer reads (a wf from before them, or one started
// without a ReadFunc).
var ErrReadsUnsupported = errors.New("the running wf apply does not answer reads (it is an older wf)")

// ReadFunc answers one read request: it calls emit with each item of the
// answer, in order, and returns nil once the answer is complete. An
// error is sent to the client as the answer's error. emit fails when the
// client has gone; ReadFunc should then return.
type ReadFunc func(ctx context.Context, op string, args json.RawMessage, emit func(item any) error) error

// maxReadRequest bounds one request line.
const maxReadRequest = 1 << 20

type readReq struct {
	ID   uint64          `json:"id"`
	Op   string          `json:"op"`
	Args json.RawMessage `json:"args,omitempty"`
}

type readReply struct {
	Reply uint64          `json:"reply"`
	Item  json.RawMessage `json:"item,omitempty"`
	End   bool            `json:"end,omitempty"`
	Error string          `json:"error,omitempty"`
}

// serveReads answers a reader's requests, first then every line it sends,
// until it hangs up or the server shuts down.
func (s *server) serveReads(ctx context.Context, conn net.Conn, br *bufio.Reader, first *readReq) {
	w := bufio.NewWriterSize(conn, 64<<10)
	sc := bufio.NewScanner(br)
	sc.Buffer(make([]byte, 0, 4096), maxReadRequest)
	req := first
	for {
		if err := s.answer(ctx, w, req); err != nil {
			return
		}
		req = nil
		for req == nil {
			if !sc.Scan() {
				return
			}
			var m clientMsg
			if json.Unmarshal(sc.Bytes(), &m) == nil && m.Read != nil {
				req = m.Read
			}
		}
	}
}

// answer runs one request and writes its reply; an error is a write error
// (the client has gone).
func (s *server) answer(ctx context.Context, w *bufio.Writer, req *readReq) error {
	var werr error
	put := func(r readReply) error {
		if werr != nil {
			return werr
		}
		b, err := json.Marshal(r)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			werr = err
		}
		return werr
	}
	emit := func(item any) error {
		b, err := json.Marshal(item)
		if err != nil {
			return fmt.Errorf("encode reply: %w", err)
		}
		return put(readReply{Reply: req.ID, Item: b})
	}
	var err error
	if s.opts.OnRead == nil {
		err = ErrReadsUnsupported
	} else {
		err = s.opts.OnRead(ctx, req.Op, req.Args, emit)
	}
	if werr != nil {
		return werr
	}
	if err != nil {
		_ = put(readReply{Reply: req.ID, Error: err.Error()})
	} else {
		_ = put(readReply{Reply: req.ID, End: true})
	}
	if werr != nil {
		return werr
	}
	return w.Flush()
}

// Reads is a connection to the event socket of a running apply, for reads.
// Its methods may be called from one goroutine at a time.
type Reads struct {
	conn net.Conn
	sc   *bufio.Scanner
	next uint64
	mu   sync.Mutex
	stop func() bool
}

// DialReads connects to the event socket at path for reads. A missing
// socket or a refused connection returns an error wrapping ErrNoApply.
func DialReads(ctx context.Context, path string) (*Reads, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ENOENT) {
			return nil, fmt.Errorf("dial %s: %w: %w", path, ErrNoApply, err)
		}
		return nil, fmt.Errorf("dial event socket %s: %w", path, err)
	}
	sc := bufio.NewScanner(conn)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	r := &Reads{conn: conn, sc: sc}
	r.stop = context.AfterFunc(ctx, func() { _ = conn.Close() })
	return r, nil
}

// Read sends one request (op, with args encoded as JSON) and calls each
// with every item of the answer, in order. An error from each ends the
// read (and the connection: the rest of the answer is not drained).
func (r *Reads) Read(op string, args any, each func(item json.RawMessage) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.next++
	id := r.next
	a, err := json.Marshal(args)
	if err != nil {
		return fmt.Errorf("encode read %s: %w", op, err)
	}
	line, err := json.Marshal(clientMsg{Read: &readReq{ID: id, Op: op, Args: a}})
	if err != nil {
		return fmt.Errorf("encode read %s: %w", op, err)
	}
	if _, err := r.conn.Write(append(line, '\n')); err != nil {
		return fmt.Errorf("read %s from the running apply: %w: %w", op, ErrNoApply, err)
	}
	for r.sc.Scan() {
		var rep readReply
		if err := json.Unmarshal(r.sc.Bytes(), &rep); err != nil || rep.Reply == 0 {
			// Events, not replies: a server that does not know reads
			// took this client for a watcher.
			_ = r.conn.Close()
			return ErrReadsUnsupported
		}
		if rep.Reply != id {
			continue
		}
		switch {
		case rep.Error != "":
			return fmt.Errorf("the running apply: %s", rep.Error)
		case rep.End:
			return nil
		}
		if err := each(rep.Item); err != nil {
			_ = r.conn.Close()
			return err
		}
	}
	err = r.sc.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	// The apply ended (or stopped serving) mid-answer.
	return fmt.Errorf("read %s from the running apply: %w: %w", op, ErrNoApply, err)
}

// Close hangs up.
func (r *Reads) Close() error {
	r.stop()
	return r.conn.Close()
}
