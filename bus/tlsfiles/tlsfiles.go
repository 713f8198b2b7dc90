// Package tlsfiles reads the PEM files that --tls-cert, --tls-key and
// --tls-ca name, for serve and for every client command alike, so that each
// way a file can be unusable is one line naming the flag and the fix, said
// before a server starts or a client dials (nats-server and nats.go would
// report most of them as "error parsing X509 certificate/key pair").
package tlsfiles

import (
	"crypto"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// CheckPair refuses a certificate without its key and a key without its
// certificate: a flag combination, so callers exit 2 on it.
func CheckPair(certFile, keyFile string) error {
	switch {
	case certFile != "" && keyFile == "":
		return fmt.Errorf("--tls-cert %s needs --tls-key: pass the certificate's private key too", certFile)
	case certFile == "" && keyFile != "":
		return fmt.Errorf("--tls-key %s needs --tls-cert: pass the certificate it is the key of too", keyFile)
	}
	return nil
}

// KeyPair reads a certificate (the first PEM CERTIFICATE block is the
// leaf, any after it its chain) and its private key, and checks that the
// key is the certificate's and that the certificate is valid now.
func KeyPair(certFile, keyFile string) (tls.Certificate, error) {
	if err := CheckPair(certFile, keyFile); err != nil {
		return tls.Certificate{}, err
	}
	certPEM, err := read("--tls-cert", certFile, "PEM certificate")
	if err != nil {
		return tls.Certificate{}, err
	}
	chain, err := certificates(certPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-cert %s %v: give the certificate in PEM (-----BEGIN CERTIFICATE-----)", certFile, err)
	}
	leaf := chain[0]
	keyPEM, err := read("--tls-key", keyFile, "PEM private key")
	if err != nil {
		return tls.Certificate{}, err
	}
	key, err := privateKey(keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("--tls-key %s %v", keyFile, err)
	}
	pub, ok := key.Public().(interface{ Equal(crypto.PublicKey) bool })
	if !ok || !pub.Equal(leaf.PublicKey) {
		return tls.Certificate{}, fmt.Errorf("--tls-key %s is not the private key of --tls-cert %s: give the key the certificate was made for", keyFile, certFile)
	}
	now := time.Now()
	if now.After(leaf.NotAfter) {
		return tls.Certificate{}, fmt.Errorf("--tls-cert %s expired on %s: renew it", certFile, leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if now.Before(leaf.NotBefore) {
		return tls.Certificate{}, fmt.Errorf("--tls-cert %s is not valid before %s: check this machine's clock or the certificate's dates", certFile, leaf.NotBefore.UTC().Format(time.RFC3339))
	}
	out := tls.Certificate{PrivateKey: key, Leaf: leaf}
	for _, c := range chain {
		out.Certificate = append(out.Certificate, c.Raw)
	}
	return out, nil
}

// CAPool reads the CA certificates in caFile, the ones a peer's
// certificate must be signed by.
func CAPool(caFile string) (*x509.CertPool, error) {
	b, err := read("--tls-ca", caFile, "PEM CA certificate")
	if err != nil {
		return nil, err
	}
	certs, err := certificates(b)
	if err != nil {
		return nil, fmt.Errorf("--tls-ca %s %v: give the CA's certificate in PEM (-----BEGIN CERTIFICATE-----)", caFile, err)
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// certificates parses every CERTIFICATE block of a PEM file; an error
// completes a sentence that starts with the flag and the file name.
func certificates(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("holds a certificate that does not parse (%v)", err)
		}
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("holds no PEM certificate")
	}
	return out, nil
}

// privateKey parses the first private-key block in the forms openssl and
// Go write (PKCS #8, SEC 1 EC, PKCS #1 RSA); an error completes a sentence
// that starts with the flag and the file name.
func privateKey(b []byte) (crypto.Signer, error) {
	for {
		var block *pem.Block
		block, b = pem.Decode(b)
		if block == nil {
			return nil, errors.New("holds no PEM private key: give the certificate's key in PEM (-----BEGIN PRIVATE KEY-----, EC PRIVATE KEY or RSA PRIVATE KEY)")
		}
		if !strings.HasSuffix(block.Type, "PRIVATE KEY") {
			continue
		}
		if strings.Contains(block.Type, "ENCRYPTED") || block.Headers["Proc-Type"] != "" {
			return nil, errors.New("is encrypted: give the key decrypted (openssl pkey -in KEY -out KEY.plain), in a file only this user can read")
		}
		if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
			if s, ok := k.(crypto.Signer); ok {
				return s, nil
			}
		}
		if k, err := x509.ParseECPrivateKey(block.Bytes); err == nil {
			return k, nil
		}
		if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
			return k, nil
		}
		return nil, fmt.Errorf("holds a %s block that does not parse as a private key: give the certificate's key in PEM", block.Type)
	}
}

// read reads the file a flag names; the error names the flag and what the
// file should be, without the "open FILE:" the flag already shows.
func read(flag, path, what string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s %s: %v (give a readable %s file)", flag, path, err, what)
	}
	return b, nil
}
