package main

import (
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// certFiles serves a certificate from files given with --tls-cert and
// --tls-key, and picks up a renewed pair (certbot, cert-manager) without a
// restart: the files are looked at again at most once a minute, and a pair
// that does not load keeps the previous one in service.
type certFiles struct {
	certPath, keyPath string

	mu      sync.Mutex
	cert    *tls.Certificate
	modTime time.Time
	checked time.Time
}

func loadCertFiles(certPath, keyPath string) (*certFiles, error) {
	if certPath == "" || keyPath == "" {
		return nil, errors.New("--tls-cert and --tls-key go together")
	}
	c := &certFiles{certPath: certPath, keyPath: keyPath}
	if err := c.reload(time.Now()); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certFiles) reload(now time.Time) error {
	cert, err := tls.LoadX509KeyPair(c.certPath, c.keyPath)
	if err != nil {
		return fmt.Errorf("TLS certificate %s with key %s: %w", c.certPath, c.keyPath, err)
	}
	c.cert, c.modTime, c.checked = &cert, c.newest(), now
	return nil
}

// newest is the later modification time of the two files.
func (c *certFiles) newest() time.Time {
	var t time.Time
	for _, p := range []string{c.certPath, c.keyPath} {
		if fi, err := os.Stat(p); err == nil && fi.ModTime().After(t) {
			t = fi.ModTime()
		}
	}
	return t
}

func (c *certFiles) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if now.Sub(c.checked) >= time.Minute {
		c.checked = now
		if c.newest().After(c.modTime) {
			_ = c.reload(now) // a half-written renewal: keep serving the old pair, try again later
		}
	}
	return c.cert, nil
}

func (c *certFiles) tlsConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get}
}
