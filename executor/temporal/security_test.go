package temporal

import (
	"strings"
	"testing"
)

func TestSecurityEnabledAndNamed(t *testing.T) {
	tests := []struct {
		sec  Security
		tls  bool
		over string
	}{
		{Security{}, false, ""},
		{Security{TLS: true}, true, " over TLS"},
		{Security{CAFile: "ca.pem"}, true, " over TLS"},
		{Security{ServerName: "t.example"}, true, " over TLS"},
		{Security{CertFile: "c.pem", KeyFile: "k.pem"}, true, " over TLS with client certificate"},
		{Security{APIKey: "s3cret"}, true, " over TLS with API key"},
		{Security{CertFile: "c.pem", KeyFile: "k.pem", APIKey: "s3cret"}, true, " over TLS with client certificate and API key"},
	}
	for _, tt := range tests {
		if got := tt.sec.Enabled(); got != tt.tls {
			t.Errorf("%+v: Enabled = %v, want %v", tt.sec, got, tt.tls)
		}
		if got := tt.sec.over(); got != tt.over {
			t.Errorf("%+v: over = %q, want %q", tt.sec, got, tt.over)
		}
		conn, creds, err := tt.sec.connection()
		if tt.sec.CertFile != "" {
			// The files do not exist: the error names them.
			if err == nil || !strings.Contains(err.Error(), "c.pem") {
				t.Errorf("%+v: connection error = %v, want one naming c.pem", tt.sec, err)
			}
			continue
		}
		if tt.sec.CAFile != "" {
			if err == nil || !strings.Contains(err.Error(), "ca.pem") {
				t.Errorf("%+v: connection error = %v, want one naming ca.pem", tt.sec, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%+v: %v", tt.sec, err)
		}
		if (conn.TLS != nil) != tt.tls {
			t.Errorf("%+v: TLS config %v, want TLS %v", tt.sec, conn.TLS, tt.tls)
		}
		if (creds != nil) != (tt.sec.APIKey != "") {
			t.Errorf("%+v: credentials %v", tt.sec, creds)
		}
		if conn.TLS != nil && conn.TLS.ServerName != tt.sec.ServerName {
			t.Errorf("%+v: ServerName %q", tt.sec, conn.TLS.ServerName)
		}
	}
}

func TestSecurityExplain(t *testing.T) {
	const unknownCA = "tls: failed to verify certificate: x509: certificate signed by unknown authority"
	tests := []struct {
		sec  Security
		msg  string
		hint string
	}{
		{Security{}, "write: broken pipe", ""},
		{Security{TLS: true}, unknownCA, " (pass the CA that signed it with -temporal-tls-ca)"},
		{Security{CAFile: "ca.pem"}, unknownCA, " (is -temporal-tls-ca the CA that signed the server's certificate?)"},
		{Security{TLS: true}, "x509: certificate is valid for a.example, not b.example", " (pass the name on the server's certificate with -temporal-tls-server-name)"},
		{Security{TLS: true}, "write: broken pipe", "; the server ended the connection; if it wants a client certificate, pass -temporal-tls-cert and -temporal-tls-key"},
		{Security{CertFile: "c.pem", KeyFile: "k.pem"}, "write: broken pipe", ""},
		{Security{TLS: true}, "connection refused", ""},
	}
	for _, tt := range tests {
		if got, want := tt.sec.explain(tt.msg), tt.msg+tt.hint; got != want {
			t.Errorf("%+v: explain(%q) = %q, want %q", tt.sec, tt.msg, got, want)
		}
	}
}
