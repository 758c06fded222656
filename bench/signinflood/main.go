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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(*bin, "serve", "--demo", "--trust-proxy", "--addr", addr, "--db", filepath.Join(dir, "cs.db"))
	cmd.Stdout, cmd.Stderr = nil, nil
	if err := cmd.Start(); err != nil {
		panic(err)
	}
	defer cmd.Process.Kill()
	base := "http://" + addr
	for i := 0; ; i++ {
		if res, err := http.Get(base + "/healthz"); err == nil {
			res.Body.Close()
			break
		}
		if i > 200 {
			panic("the server did not start")
		}
		time.Sleep(50 * time.Millisecond)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	rss := func() float64 {
		select {
		case <-exited:
			panic("the server is gone")
		default:
		}
		f, _ := os.Open(fmt.Sprintf("/proc/%d/status", cmd.Process.Pid))
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
	flood := func(name string, n int, email func(i int) string, from func(i int) string) {
		before := rss()
		start := time.Now()
		var wg sync.WaitGroup
		jobs := make(chan int)
		codes := sync.Map{}
		for w := 0; w < 8; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range jobs {
					req, _ := http.NewRequest("POST", base+"/login", strings.NewReader(url.Values{"email": {email(i)}, "password": {"wrong"}}.Encode()))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					req.Header.Set("X-Forwarded-For", from(i))
					res, err := http.DefaultClient.Do(req)
					if err != nil {
						continue
					}
					res.Body.Close()
					v, _ := codes.LoadOrStore(res.StatusCode, new(int))
					*v.(*int)++ // counts are indicative only
				}
			}()
		}
		for i := 0; i < n; i++ {
			jobs <- i
		}
		close(jobs)
		wg.Wait()
		fmt.Printf("%-58s %6d posts in %5.1f s  RSS %6.1f -> %6.1f MB\n", name, n, time.Since(start).Seconds(), before, rss())
	}
	long := strings.Repeat("x", 60000)
	flood("60 KB emails, one address", *n, func(i int) string { return fmt.Sprintf("%d%s@x.test", i, long) }, func(int) string { return "198.51.100.1" })
	pad := strings.Repeat("y", 230)
	// Forwarded addresses are only header text (the documentation prefix
	// 2001:db8::/32); every request goes to the server on loopback.
	flood("250-byte emails, a new address each", *m, func(i int) string { return fmt.Sprintf("%d%s@x.test", i, pad) },
		func(i int) string { return fmt.Sprintf("2001:db8::1:%x", i) })
	flood("250-byte emails, a new address each, again", *m, func(i int) string { return fmt.Sprintf("b%d%s@x.test", i, pad) },
		func(i int) string { return fmt.Sprintf("2001:db8::2:%x", i) })
}
