package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestTemporalTLS runs a worker and an apply against a real Temporal
// development server reached only through a TLS endpoint that demands a
// client certificate (mTLS, as a self-hosted cluster or Temporal Cloud's
// certificate auth does). The endpoint terminates TLS in front of the dev
// server and reads the HTTP/2 headers going through, so the test sees the
// API key each call carries. Every setting comes from the environment
// but one, the key file, which is a flag.
func TestTemporalTLS(t *testing.T) {
	// A key of its own, so that a run of -count N starts afresh on the
	// shared server.
	key := fmt.Sprint(time.Now().UnixNano())
	e := newTEnv(t, `
workflow "tls" {
  key = "`+key+`"
  activity "a" {
    exec {
      command = ["./rec.sh"]
      env = { LOG = "log", SUCCEED_ON = "2" }
    }
    retry {
      backoff = "fixed"
      initial_interval = "100ms"
      maximum_attempts = 3
    }
  }
}
`)
	pki := newTestPKI(t, t.TempDir())
	proxy := startTLSProxy(t, e.addr, pki.server, pki.caPool)
	t.Setenv("WF_TEMPORAL_ADDRESS", proxy.addr)

	// What a wrong setting says, one line each, exit 1: nothing reaches
	// the server without TLS, a client certificate and the server's name.
	refusals := []struct {
		name string
		env  map[string]string
		want []string
	}{
		{"no client certificate", map[string]string{"WF_TEMPORAL_TLS_CA": pki.caFile, "WF_TEMPORAL_TLS_SERVER_NAME": testServerName},
			[]string{"cannot reach Temporal at " + proxy.addr + " over TLS: ", "the server ended the connection; if it wants a client certificate, pass -temporal-tls-cert and -temporal-tls-key"}},
		{"another CA", map[string]string{"WF_TEMPORAL_TLS_CA": pki.otherCAFile, "WF_TEMPORAL_TLS_SERVER_NAME": testServerName, "WF_TEMPORAL_TLS_CERT": pki.certFile, "WF_TEMPORAL_TLS_KEY": pki.keyFile},
			[]string{"over TLS with client certificate: tls: failed to verify certificate: x509: certificate signed by unknown authority (is -temporal-tls-ca the CA that signed the server's certificate?)"}},
		{"the address is not the certificate's name", map[string]string{"WF_TEMPORAL_TLS_CA": pki.caFile, "WF_TEMPORAL_TLS_CERT": pki.certFile, "WF_TEMPORAL_TLS_KEY": pki.keyFile},
			[]string{"over TLS with client certificate: tls: failed to verify certificate: x509: cannot validate certificate for 127.0.0.1 because it doesn't contain any IP SANs (pass the name on the server's certificate with -temporal-tls-server-name)"}},
		{"a certificate without its key", map[string]string{"WF_TEMPORAL_TLS_CA": pki.caFile, "WF_TEMPORAL_TLS_CERT": pki.certFile},
			[]string{"Error: a client certificate needs both -temporal-tls-cert and -temporal-tls-key"}},
		{"a missing CA file", map[string]string{"WF_TEMPORAL_TLS_CA": pki.keyFile + ".missing"},
			[]string{"Error: read the Temporal CA file: open " + pki.keyFile + ".missing: no such file or directory"}},
		{"a CA file of no certificate", map[string]string{"WF_TEMPORAL_TLS_CA": pki.keyFile},
			[]string{"Error: the Temporal CA file " + pki.keyFile + " holds no PEM certificate"}},
		{"WF_TEMPORAL_TLS not a boolean", map[string]string{"WF_TEMPORAL_TLS": "yes please"},
			[]string{`Error: WF_TEMPORAL_TLS="yes please": want true or false`}},
	}
	for _, r := range refusals {
		t.Run(r.name, func(t *testing.T) {
			for k, v := range r.env {
				t.Setenv(k, v)
			}
			out, errOut, code := e.wf("state", "list", "-engine", "temporal")
			if code != 1 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 {
				t.Fatalf("exit %d, want 1 and one line; stdout %q, stderr:\n%s", code, out, errOut)
			}
			for _, w := range r.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q lacks %q", errOut, w)
				}
			}
		})
	}

	t.Setenv("WF_TEMPORAL_TLS_CA", pki.caFile)
	t.Setenv("WF_TEMPORAL_TLS_CERT", pki.certFile)
	t.Setenv("WF_TEMPORAL_TLS_KEY", pki.keyFile)
	t.Setenv("WF_TEMPORAL_TLS_SERVER_NAME", testServerName)
	const envKey = "key-from-the-environment"
	t.Setenv("WF_TEMPORAL_API_KEY", envKey)
	e.worker()
	p := e.apply()
	if code := p.wait(t, 90*time.Second); code != 0 {
		t.Fatalf("wf apply over mTLS exit %d; stderr:\n%s", code, p.stderr.String())
	}
	done := p.waitEvent(t, time.Second, "run_completed", evType("run_completed"))
	if done["status"] != "succeeded" {
		t.Fatalf("run_completed = %v", done)
	}
	if h := e.history("tls/" + key); len(h) != 2 || h[0].Outcome != "failed" || h[1].Outcome != "succeeded" || h[0].IdempotencyKey != h[1].IdempotencyKey {
		t.Fatalf("history over mTLS = %+v, want a failed and a succeeded attempt under one key", h)
	}
	if strings.Contains(p.stderr.String(), envKey) {
		t.Errorf("the API key is in wf apply's output:\n%s", p.stderr.String())
	}

	// The key file flag wins over the environment; its newline is not
	// part of the key.
	keyFile := filepath.Join(t.TempDir(), "api-key")
	if err := os.WriteFile(keyFile, []byte("key-from-a-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, errOut, code := e.wf("state", "list", "-engine", "temporal", "-temporal-api-key-file", keyFile); code != 0 || !strings.Contains(out, "tls/"+key) {
		t.Fatalf("state list with a key file: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if err := os.WriteFile(keyFile, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := e.wf("state", "list", "-engine", "temporal", "-temporal-api-key-file", keyFile); code != 1 || !strings.Contains(errOut, "Error: the Temporal API key file "+keyFile+" is empty") {
		t.Fatalf("an empty key file: exit %d, stderr %q", code, errOut)
	}

	keys := proxy.authorizations()
	for _, want := range []string{"Bearer " + envKey, "Bearer key-from-a-file"} {
		if keys[want] == 0 {
			t.Errorf("no call carried authorization %q; seen %v", want, keys)
		}
	}
	if len(keys) != 2 {
		t.Errorf("authorizations seen = %v, want only the two keys", keys)
	}
}

const testServerName = "temporal.wf.test"

// testPKI is a CA, a server certificate for testServerName signed by it,
// a client certificate signed by it (files), and a second CA that signed
// nothing of ours.
type testPKI struct {
	caPool                                 *x509.CertPool
	server                                 tls.Certificate
	caFile, otherCAFile, certFile, keyFile string
}

func newTestPKI(t *testing.T, dir string) *testPKI {
	t.Helper()
	caCert, caKey := newCert(t, "wf test CA", nil, nil, func(c *x509.Certificate) {
		c.IsCA, c.BasicConstraintsValid = true, true
		c.KeyUsage = x509.KeyUsageCertSign
	})
	otherCA, _ := newCert(t, "another CA", nil, nil, func(c *x509.Certificate) {
		c.IsCA, c.BasicConstraintsValid = true, true
		c.KeyUsage = x509.KeyUsageCertSign
	})
	srvCert, srvKey := newCert(t, testServerName, caCert, caKey, func(c *x509.Certificate) {
		// Only a name, no IP: reaching it at 127.0.0.1 needs
		// -temporal-tls-server-name.
		c.DNSNames = []string{testServerName}
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	})
	cliCert, cliKey := newCert(t, "wf worker", caCert, caKey, func(c *x509.Certificate) {
		c.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	})
	p := &testPKI{
		caPool:      x509.NewCertPool(),
		server:      tls.Certificate{Certificate: [][]byte{srvCert.Raw}, PrivateKey: srvKey},
		caFile:      writePEM(t, filepath.Join(dir, "ca.pem"), "CERTIFICATE", caCert.Raw),
		otherCAFile: writePEM(t, filepath.Join(dir, "other-ca.pem"), "CERTIFICATE", otherCA.Raw),
		certFile:    writePEM(t, filepath.Join(dir, "client.pem"), "CERTIFICATE", cliCert.Raw),
	}
	der, err := x509.MarshalECPrivateKey(cliKey)
	if err != nil {
		t.Fatal(err)
	}
	p.keyFile = writePEM(t, filepath.Join(dir, "client-key.pem"), "EC PRIVATE KEY", der)
	p.caPool.AddCert(caCert)
	return p
}

// newCert makes a certificate for cn, signed by parent (self-signed when
// nil), shaped by edit.
func newCert(t *testing.T, cn string, parent *x509.Certificate, parentKey *ecdsa.PrivateKey, edit func(*x509.Certificate)) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	edit(tmpl)
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func writePEM(t *testing.T, path, typ string, der []byte) string {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// tlsProxy accepts TLS connections that present a client certificate
// signed by the test CA, and forwards their bytes to a plain gRPC server.
// It decodes the HTTP/2 headers the clients send, to count the
// authorization values they carry.
type tlsProxy struct {
	addr string
	mu   sync.Mutex
	auth map[string]int
}

func startTLSProxy(t *testing.T, upstream string, cert tls.Certificate, clientCAs *x509.CertPool) *tlsProxy {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{cert},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
		NextProtos:   []string{"h2"},
		MinVersion:   tls.VersionTLS12,
	})
	if err != nil {
		t.Fatal(err)
	}
	p := &tlsProxy{addr: ln.Addr().String(), auth: map[string]int{}}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				p.forward(c, upstream)
			}()
		}
	}()
	return p
}

// forward copies c to a new connection to upstream and back until either
// side closes, decoding the headers of what c sends on the way.
func (p *tlsProxy) forward(c net.Conn, upstream string) {
	defer c.Close()
	if err := c.(*tls.Conn).Handshake(); err != nil {
		return
	}
	u, err := net.Dial("tcp", upstream)
	if err != nil {
		return
	}
	defer u.Close()
	pr, pw := io.Pipe()
	headers := make(chan struct{})
	go func() {
		defer close(headers)
		p.readHeaders(pr)
		// Whatever the decoder did not take still has to flow.
		_, _ = io.Copy(io.Discard, pr)
	}()
	up := make(chan struct{})
	go func() {
		_, _ = io.Copy(u, io.TeeReader(c, pw))
		pw.Close()
		u.(*net.TCPConn).CloseWrite()
		close(up)
	}()
	_, _ = io.Copy(c, u)
	c.Close()
	<-up
	<-headers
}

// readHeaders reads a client's side of an HTTP/2 connection and counts
// the authorization header values of its requests.
func (p *tlsProxy) readHeaders(r io.Reader) {
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(r, preface); err != nil || string(preface) != http2.ClientPreface {
		return
	}
	fr := http2.NewFramer(io.Discard, r)
	fr.SetMaxReadFrameSize(1 << 24)
	fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			var se http2.StreamError
			if errors.As(err, &se) {
				continue
			}
			return
		}
		if h, ok := f.(*http2.MetaHeadersFrame); ok {
			if v := h.PseudoValue("method"); v == "" {
				continue
			}
			for _, hf := range h.Fields {
				if hf.Name == "authorization" {
					p.mu.Lock()
					p.auth[hf.Value]++
					p.mu.Unlock()
				}
			}
		}
	}
}

func (p *tlsProxy) authorizations() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]int, len(p.auth))
	for k, v := range p.auth {
		out[k] = v
	}
	return out
}
