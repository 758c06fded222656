package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// served runs Countersign as it runs for a user: `countersign serve` from
// the binary bin, a process of its own with its own heap (in-process, the
// bench's clients' garbage is Countersign's collector's too), over the
// tools file given, with a database and an agent key of its own whose
// limits are lifted. It returns the server's URL and the key.
func served(bin, dir, toolsYAML string) (url, key string, stop func(), err error) {
	tools, db := filepath.Join(dir, "served-tools.yaml"), filepath.Join(dir, "served.db")
	if err := os.WriteFile(tools, []byte(toolsYAML), 0o600); err != nil {
		return "", "", nil, err
	}
	port, err := freePort()
	if err != nil {
		return "", "", nil, err
	}
	url = fmt.Sprintf("http://127.0.0.1:%d", port)
	srv := exec.Command(bin, "serve", "--addr", strings.TrimPrefix(url, "http://"), "--db", db, "--tools", tools, "--log-level", "error")
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return "", "", nil, err
	}
	stop = func() { srv.Process.Signal(os.Interrupt); srv.Wait() }
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if r, err := http.Get(url + "/readyz"); err == nil {
			r.Body.Close()
			if r.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", "", nil, fmt.Errorf("countersign serve did not get ready at %s", url)
		}
	}
	// The key is added beside the running server, as an operator would.
	var out, errOut bytes.Buffer
	add := exec.Command(bin, "agent", "add", "--name", "bench", "--calls-per-second", "100000", "--call-burst", "100000", "--db", db)
	add.Stdout, add.Stderr = &out, &errOut
	if err := add.Run(); err != nil {
		stop()
		return "", "", nil, fmt.Errorf("countersign agent add: %w: %s", err, errOut.Bytes())
	}
	key = strings.TrimSpace(out.String())
	return url, key, stop, nil
}
