package embedetcd

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Certs is a certificate authority made for one test run, with a server
// certificate for 127.0.0.1 and a client certificate it signed, as PEM files.
// Nothing is checked in: [NewCerts] makes fresh keys every time.
type Certs struct {
	CA                    string // CA certificate file
	ServerCert, ServerKey string
	ClientCert, ClientKey string
}

// NewCerts writes a fresh CA, server and client certificate (ECDSA P-256,
// valid for a day) under dir.
func NewCerts(dir string) (*Certs, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := template("fencelock test CA")
	caTmpl.IsCA, caTmpl.BasicConstraintsValid = true, true
	caTmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	c := &Certs{CA: filepath.Join(dir, "ca.pem")}
	if err := writePEM(c.CA, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	srv := template("127.0.0.1")
	srv.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
	srv.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	if c.ServerCert, c.ServerKey, err = issue(dir, "server", srv, ca, caKey); err != nil {
		return nil, err
	}
	cli := template("fencelock test client")
	cli.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	if c.ClientCert, c.ClientKey, err = issue(dir, "client", cli, ca, caKey); err != nil {
		return nil, err
	}
	return c, nil
}

// ClientConfig returns a TLS configuration that trusts the CA and, when
// withCert is set, presents the client certificate.
func (c *Certs) ClientConfig(withCert bool) (*tls.Config, error) {
	pem, err := os.ReadFile(c.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("embedetcd: no certificate in %s", c.CA)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if withCert {
		pair, err := tls.LoadX509KeyPair(c.ClientCert, c.ClientKey)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func template(cn string) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)) // never fails: crypto/rand panics instead
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
}

// issue signs tmpl with the CA and writes its certificate and key under dir.
func issue(dir, name string, tmpl, ca *x509.Certificate, caKey *ecdsa.PrivateKey) (string, string, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+"-key.pem")
	if err := writePEM(certFile, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	return certFile, keyFile, writePEM(keyFile, "EC PRIVATE KEY", keyDER)
}

func writePEM(file, typ string, der []byte) error {
	return os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
