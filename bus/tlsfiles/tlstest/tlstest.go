// Package tlstest writes the certificates the TLS tests use, made fresh in
// each test's temp dir: a CA, a server certificate for 127.0.0.1 and
// localhost signed by it (usable as a route's client certificate too, as a
// cluster node's must be), a client certificate signed by it, and a second
// CA that signed neither.
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Files are the paths of the PEM files New writes.
type Files struct {
	Dir                   string
	CA                    string // the CA that signed ServerCert and ClientCert
	ServerCert, ServerKey string // for 127.0.0.1, ::1 and localhost; serverAuth and clientAuth
	ClientCert, ClientKey string // clientAuth only
	OtherCA               string // a CA that signed nothing here
	// OtherCert and OtherKey are a client certificate signed by OtherCA.
	OtherCert, OtherKey string
}

// New writes a CA, a server and a client certificate signed by it, and an
// unrelated CA with a client certificate of its own, into a temp dir.
func New(t testing.TB) Files {
	t.Helper()
	dir := t.TempDir()
	f := Files{Dir: dir}
	ca, caKey := authority(t, "sessionbus test CA")
	f.CA = writeCert(t, dir, "ca.pem", ca)
	writeKey(t, dir, "ca-key.pem", caKey) // for Leaf
	srv, srvKey := leaf(t, "127.0.0.1", ca, caKey, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
	f.ServerCert, f.ServerKey = writeCert(t, dir, "server.pem", srv), writeKey(t, dir, "server-key.pem", srvKey)
	cl, clKey := leaf(t, "test client", ca, caKey, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	f.ClientCert, f.ClientKey = writeCert(t, dir, "client.pem", cl), writeKey(t, dir, "client-key.pem", clKey)
	other, otherKey := authority(t, "another CA")
	f.OtherCA = writeCert(t, dir, "other-ca.pem", other)
	oc, ocKey := leaf(t, "stranger", other, otherKey, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	f.OtherCert, f.OtherKey = writeCert(t, dir, "other.pem", oc), writeKey(t, dir, "other-key.pem", ocKey)
	return f
}

// Leaf writes one more certificate signed by the CA in f, for the
// localhost names, with the given extended key usages, valid from
// notBefore to notAfter; it returns the certificate's and the key's paths.
func (f Files) Leaf(t testing.TB, name string, usages []x509.ExtKeyUsage, notBefore, notAfter time.Time) (string, string) {
	t.Helper()
	ca, key := readCA(t, f)
	c, k := sign(t, template(name, notBefore, notAfter, usages), ca, key)
	return writeCert(t, f.Dir, name+".pem", c), writeKey(t, f.Dir, name+"-key.pem", k)
}

func authority(t testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	tpl := template(name, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), nil)
	tpl.IsCA, tpl.BasicConstraintsValid = true, true
	tpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature
	tpl.DNSNames, tpl.IPAddresses = nil, nil
	return sign(t, tpl, nil, nil)
}

func leaf(t testing.TB, name string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, usages []x509.ExtKeyUsage) (*x509.Certificate, *ecdsa.PrivateKey) {
	return sign(t, template(name, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour), usages), ca, caKey)
}

func template(name string, notBefore, notAfter time.Time, usages []x509.ExtKeyUsage) *x509.Certificate {
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    notBefore, NotAfter: notAfter,
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: usages,
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
}

// sign makes a key and a certificate for tpl, signed by parent (nil:
// self-signed).
func sign(t testing.TB, tpl, parent *x509.Certificate, parentKey *ecdsa.PrivateKey) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	if parent == nil {
		parent, parentKey = tpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return c, key
}

func readCA(t testing.TB, f Files) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	b, err := os.ReadFile(f.CA)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(b)
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := os.ReadFile(filepath.Join(f.Dir, "ca-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	kblock, _ := pem.Decode(kb)
	k, err := x509.ParseECPrivateKey(kblock.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c, k
}

func writeCert(t testing.TB, dir, name string, c *x509.Certificate) string {
	t.Helper()
	return write(t, filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

func writeKey(t testing.TB, dir, name string, k *ecdsa.PrivateKey) string {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return write(t, filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
}

func write(t testing.TB, path string, b []byte) string {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
