package temporal

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
)

// Security says how a connection to Temporal is secured: TLS with the
// system's roots or a CA of its own, a client certificate (mTLS, as a
// self-hosted cluster or Temporal Cloud's certificate auth asks), and an
// API key (Temporal Cloud's other auth). The zero value is plain gRPC, as a
// development server wants.
type Security struct {
	// TLS encrypts the connection and checks the server's certificate.
	// Every other field implies it; see Enabled.
	TLS bool
	// CAFile is a PEM file of the certificates that may sign the server's;
	// the system's roots when empty.
	CAFile string
	// CertFile and KeyFile are the client's PEM certificate and key (mTLS);
	// both or neither.
	CertFile, KeyFile string
	// ServerName is the name the server's certificate must have, when it
	// is not the address's host (a cluster reached through an IP or a
	// tunnel).
	ServerName string
	// APIKey is sent as a bearer token with every call. It needs TLS, so it
	// enables it.
	APIKey string
}

// Enabled reports whether the connection uses TLS: asked for, or implied
// by a CA, a client certificate, a server name or an API key (none of
// which mean anything over plain gRPC, and an API key must never travel in
// the clear).
func (s Security) Enabled() bool {
	return s.TLS || s.CAFile != "" || s.CertFile != "" || s.KeyFile != "" || s.ServerName != "" || s.APIKey != ""
}

// over is how a message names the connection's security: nothing for
// plain gRPC (the message users know), else " over TLS" and what it
// carries. It never includes the API key.
func (s Security) over() string {
	if !s.Enabled() {
		return ""
	}
	var with []string
	if s.CertFile != "" {
		with = append(with, "client certificate")
	}
	if s.APIKey != "" {
		with = append(with, "API key")
	}
	if len(with) == 0 {
		return " over TLS"
	}
	return " over TLS with " + strings.Join(with, " and ")
}

// connection builds the SDK's options for s. Every file is read here, so
// a missing or damaged one fails the command before it dials, with the
// file named.
func (s Security) connection() (client.ConnectionOptions, client.Credentials, error) {
	var conn client.ConnectionOptions
	if !s.Enabled() {
		return conn, nil, nil
	}
	if (s.CertFile == "") != (s.KeyFile == "") {
		return conn, nil, errors.New("a client certificate needs both -temporal-tls-cert and -temporal-tls-key")
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: s.ServerName}
	if s.CAFile != "" {
		pem, err := os.ReadFile(s.CAFile)
		if err != nil {
			return conn, nil, fmt.Errorf("read the Temporal CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return conn, nil, fmt.Errorf("the Temporal CA file %s holds no PEM certificate", s.CAFile)
		}
		cfg.RootCAs = pool
	}
	if s.CertFile != "" {
		pair, err := tls.LoadX509KeyPair(s.CertFile, s.KeyFile)
		if err != nil {
			return conn, nil, fmt.Errorf("load the Temporal client certificate %s and key %s: %w", s.CertFile, s.KeyFile, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	conn.TLS = cfg
	var creds client.Credentials
	if s.APIKey != "" {
		creds = client.NewAPIKeyStaticCredentials(s.APIKey)
	}
	return conn, creds, nil
}

// explain adds to a failed dial's message what to change, where the TLS
// error alone does not say which setting is wrong.
func (s Security) explain(msg string) string {
	if !s.Enabled() {
		return msg
	}
	switch {
	case strings.Contains(msg, "certificate signed by unknown authority"):
		if s.CAFile != "" {
			return msg + " (is -temporal-tls-ca the CA that signed the server's certificate?)"
		}
		return msg + " (pass the CA that signed it with -temporal-tls-ca)"
	case strings.Contains(msg, "doesn't contain any IP SANs"), strings.Contains(msg, "certificate is valid for"):
		return msg + " (pass the name on the server's certificate with -temporal-tls-server-name)"
	case s.CertFile == "" && droppedConnection(msg):
		// A server that wants a client certificate checks it after the
		// handshake the client saw succeed (TLS 1.3), and hangs up: the
		// client sees only its next write fail.
		return msg + "; the server ended the connection; if it wants a client certificate, pass -temporal-tls-cert and -temporal-tls-key"
	}
	return msg
}

func droppedConnection(msg string) bool {
	for _, m := range []string{"broken pipe", "connection reset by peer", "EOF", "certificate required", "bad certificate"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}
