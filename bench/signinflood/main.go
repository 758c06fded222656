// Command signinflood measures what a flood of sign-in attempts costs the
// server's memory: it starts `countersign serve` as its own process, sends
// sign-in posts with a new email each time (huge ones, then ones within the
// length limit from many forwarded addresses), and reads the server's
// resident memory from /proc before and after.
//
//	go build -o /tmp/countersign ./cmd/countersign && go run ./bench/signinflood -bin /tmp/countersign
package main

import (
	"bufio"
	"flag"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

func main() {
	bin := flag.String("bin", "/tmp/countersign", "the countersign binary")
	n := flag.Int("n", 16000, "sign-in posts with huge emails")
	m := flag.Int("m", 3000, "sign-in posts in each phase that reaches password hashing")
	flag.Parse()
	dir, err := os.MkdirTemp("", "signinflood")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	srv := start(*bin, dir)
	defer srv.cmd.Process.Kill()
	long := strings.Repeat("x", 60000)
	srv.flood("60 KB emails, one address", *n, func(i int) string { return fmt.Sprintf("%d%s@x.test", i, long) }, func(int) string { return "198.51.100.1" })
	pad := strings.Repeat("y", 230)
	// Forwarded addresses are only header text (the documentation prefix
	// 2001:db8::/32); every request goes to the server on loopback.
	srv.flood("250-byte emails, a new address each", *m, func(i int) string { return fmt.Sprintf("%d%s@x.test", i, pad) },
		func(i int) string { return fmt.Sprintf("2001:db8::1:%x", i) })
	srv.flood("250-byte emails, a new address each, again", *m, func(i int) string { return fmt.Sprintf("b%d%s@x.test", i, pad) },
		func(i int) string { return fmt.Sprintf("2001:db8::2:%x", i) })
}

// server is the countersign process under the flood.
type server struct {
	cmd    *exec.Cmd
	base   string
	exited chan struct{}
}

// start runs `countersign serve --demo` on a free port and waits until it answers.
func start(bin, dir string) *server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "serve", "--demo", "--trust-proxy", "--addr", addr, "--db", filepath.Join(dir, "cs.db"))
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	s := &server{cmd: cmd, base: "http://" + addr, exited: make(chan struct{})}
	for i := 0; ; i++ {
		if res, err := http.Get(s.base + "/healthz"); err == nil {
			res.Body.Close()
			break
		}
		if i > 200 {
			panic("the server did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	go func() { _ = cmd.Wait(); close(s.exited) }()
	return s
}

// rss is the server's resident memory in MB.
func (s *server) rss() float64 {
	select {
	case <-s.exited:
		panic("the server is gone")
	default:
	}
	f, _ := os.Open(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(v), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}

// flood posts n wrong sign-ins from eight workers, and says how long they
// took and what they did to the server's memory.
func (s *server) flood(name string, n int, email func(i int) string, from func(i int) string) {
	before := s.rss()
	start := time.Now()
	var wg sync.WaitGroup
	jobs := make(chan int)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				req, _ := http.NewRequest("POST", s.base+"/login", strings.NewReader(url.Values{"email": {email(i)}, "password": {"wrong"}}.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				req.Header.Set("X-Forwarded-For", from(i))
				if res, err := http.DefaultClient.Do(req); err == nil {
					res.Body.Close()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	fmt.Printf("%-58s %6d posts in %5.1f s  RSS %6.1f -> %6.1f MB\n", name, n, time.Since(start).Seconds(), before, s.rss())
}
