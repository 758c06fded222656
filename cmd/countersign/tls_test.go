package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/countersign/countersign/models/storage/storetest"
)

// serveApp starts an App on a free port and stops it when the test ends.
func serveApp(t *testing.T, cfg config, stdout io.Writer) *App {
	t.Helper()
	return serveAppLogging(t, cfg, stdout, io.Discard)
}

// serveAppLogging is serveApp with the JSON log written to log.
func serveAppLogging(t *testing.T, cfg config, stdout, log io.Writer) *App {
	t.Helper()
	app, _ := startServing(t, cfg, stdout, log)
	return app
}

// startServing starts serve's App on cfg and returns it with what stops it
// (also called after the test; stopping twice is stopping once).
func startServing(t *testing.T, cfg config, stdout, log io.Writer) (*App, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	app, err := NewApp(ctx, cfg, stdout, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := app.Listen(); err != nil {
		cancel()
		app.Close()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx) }()
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done; app.Close() }) }
	t.Cleanup(stop)
	return app, stop
}

// lockedBuffer is an io.Writer the app's goroutines and the test may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t *testing.T, dir, name string) (certPath, keyPath string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPath, keyPath = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	return certPath, keyPath
}

// serve --tls-cert/--tls-key serves HTTPS, with the Secure, partitioned
// chat cookie the widget needs inside a shop's page.
func TestServeOverTLS(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := writeCert(t, dir, "first")
	out := &lockedBuffer{}
	app := serveApp(t, config{Addr: "127.0.0.1:0", DB: storetest.DSN(t), TLSCert: certPath, TLSKey: keyPath}, out)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	base := "https://" + app.Addr()
	res, err := client.Get(base + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 || res.TLS == nil || res.TLS.PeerCertificates[0].Subject.CommonName != "first" {
		t.Fatalf("healthz over TLS: %d %+v", res.StatusCode, res.TLS)
	}
	req, _ := http.NewRequest("POST", base+"/chat/messages", strings.NewReader("text=hello"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	res, err = client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var chat *http.Cookie
	for _, ck := range res.Cookies() {
		if ck.Path == "/chat" {
			chat = ck
		}
	}
	if res.StatusCode != 200 || chat == nil || !chat.Secure || chat.SameSite != http.SameSiteNoneMode || !chat.Partitioned {
		t.Fatalf("chat over TLS: %d, cookie %+v", res.StatusCode, chat)
	}
	if !strings.Contains(out.String(), "running at https://") {
		t.Fatalf("startup line: %q", out.String())
	}
}

// A renewed certificate is served without a restart; a broken renewal
// keeps the old one in service.
func TestCertificateRenewalIsPickedUp(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := writeCert(t, dir, "first")
	certs, err := loadCertFiles(certPath, keyPath)
	if err != nil {
		t.Fatal(err)
	}
	name := func() string {
		c, err := certs.get(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(c.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf.Subject.CommonName
	}
	writeCert(t, dir, "second")
	later := time.Now().Add(time.Hour)
	os.Chtimes(certPath, later, later)
	certs.checked = time.Time{} // as if a minute had passed
	if got := name(); got != "second" {
		t.Fatalf("after renewal: %s", got)
	}
	os.WriteFile(keyPath, []byte("half a key"), 0o600)
	later = later.Add(time.Hour)
	os.Chtimes(keyPath, later, later)
	certs.checked = time.Time{}
	if got := name(); got != "second" {
		t.Fatalf("after a broken renewal: %s", got)
	}
	if _, err := loadCertFiles(certPath, ""); err == nil || !strings.Contains(err.Error(), "go together") {
		t.Fatalf("cert without key: %v", err)
	}
	if _, err := loadCertFiles(certPath, keyPath); err == nil || !strings.Contains(err.Error(), "TLS certificate") {
		t.Fatalf("broken key at start: %v", err)
	}
}
