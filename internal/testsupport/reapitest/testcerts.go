package reapitest

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
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// TestCerts is a throw-away PKI for tests: a self-signed CA, a server
// certificate for 127.0.0.1, ::1 and "localhost", and a client certificate
// for mTLS, all signed by the CA. All fields are PEM encoded. The keys are
// generated fresh and are only fit for tests.
type TestCerts struct {
	CACert     []byte
	ServerCert []byte
	ServerKey  []byte
	ClientCert []byte
	ClientKey  []byte
}

// TestCertFiles are the paths written by TestCerts.WriteFiles.
type TestCertFiles struct {
	CACert, ServerCert, ServerKey, ClientCert, ClientKey string
}

// NewTestCerts generates a fresh CA, server and client certificate (ECDSA
// P-256, valid from one hour ago for 24 hours).
func NewTestCerts() (*TestCerts, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "reapitest fake CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	leaf := func(serial int64, cn string, usage x509.ExtKeyUsage, server bool) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if server {
			tmpl.DNSNames = []string{"localhost"}
			tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, err
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}), nil
	}
	c := &TestCerts{CACert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})}
	if c.ServerCert, c.ServerKey, err = leaf(2, "reapitest fake server", x509.ExtKeyUsageServerAuth, true); err != nil {
		return nil, err
	}
	if c.ClientCert, c.ClientKey, err = leaf(3, "reapitest fake client", x509.ExtKeyUsageClientAuth, false); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *TestCerts) pool() (*x509.CertPool, error) {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(c.CACert) {
		return nil, errors.New("reapitest: bad CA PEM")
	}
	return p, nil
}

// ServerTLSConfig returns a config for Options.TLS. With requireClientCert
// the server demands a client certificate signed by the CA (mTLS).
func (c *TestCerts) ServerTLSConfig(requireClientCert bool) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(c.ServerCert, c.ServerKey)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if requireClientCert {
		p, err := c.pool()
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = p
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// ClientTLSConfig returns a client config trusting the CA, presenting the
// client certificate if withClientCert.
func (c *TestCerts) ClientTLSConfig(withClientCert bool) (*tls.Config, error) {
	p, err := c.pool()
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{RootCAs: p, MinVersion: tls.VersionTLS12}
	if withClientCert {
		cert, err := tls.X509KeyPair(c.ClientCert, c.ClientKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// WriteFiles writes the PEM files into dir (ca.pem, server.pem,
// server.key, client.pem, client.key; keys mode 0600) for code that takes
// certificate paths, such as command-line flags.
func (c *TestCerts) WriteFiles(dir string) (TestCertFiles, error) {
	f := TestCertFiles{
		CACert:     filepath.Join(dir, "ca.pem"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server.key"),
		ClientCert: filepath.Join(dir, "client.pem"),
		ClientKey:  filepath.Join(dir, "client.key"),
	}
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{f.CACert, c.CACert, 0o644},
		{f.ServerCert, c.ServerCert, 0o644},
		{f.ServerKey, c.ServerKey, 0o600},
		{f.ClientCert, c.ClientCert, 0o644},
		{f.ClientKey, c.ClientKey, 0o600},
	} {
		if err := os.WriteFile(w.path, w.data, w.mode); err != nil {
			return TestCertFiles{}, fmt.Errorf("reapitest: %w", err)
		}
	}
	return f, nil
}
