package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/models/storage"
	"github.com/countersign/countersign/models/storage/storetest"
)

// payments is a business backend that counts what it is asked: requests
// per call, and payments made (once per idempotency key).
type payments struct {
	mu       sync.Mutex
	requests map[string]int // X-Countersign-Call -> requests
	paid     map[string]int // Idempotency-Key -> payments made (0 or 1)
	delay    time.Duration
}

func (p *payments) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	time.Sleep(p.delay)
	p.mu.Lock()
	p.requests[r.Header.Get("X-Countersign-Call")]++
	key := r.Header.Get("Idempotency-Key")
	if p.paid[key] == 0 {
		p.paid[key] = 1
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"paid":true}`)
}

func (p *payments) counts(call, key string) (requests, paid int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests[call], p.paid[key]
}

// instance is a `countersign serve` process.
type instance struct {
	cmd *exec.Cmd
	url string
}

// buildCountersign builds this command once per test, as a user would run it.
func buildCountersign(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "countersign")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build countersign: %v\n%s", err, out)
	}
	return bin
}

func startInstance(t *testing.T, bin string, args ...string) *instance {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	stdout, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if _, rest, ok := strings.Cut(lines.Text(), "Countersign is running at "); ok {
			go io.Copy(io.Discard, stdout)
			return &instance{cmd: cmd, url: strings.Fields(rest)[0]}
		}
	}
	t.Fatal("the instance never said where it runs")
	return nil
}

// post sends a JSON request; a connection that fails is an error, not fatal
// (an instance may be killed under it).
func post(url, bearer, body string) (int, map[string]any, error) {
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+bearer)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer res.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(raw, &out)
	return res.StatusCode, out, nil
}

// Two `serve` processes on one PostgreSQL database, driven only through
// their APIs and commands: thirty approvals of one action split across both
// run it once; a two-person action approved on each at the same moment runs
// once; an instance killed with SIGKILL during a burst of approvals leaves
// nothing lost and nothing run twice, and the audit chain verifies.
func TestTwoInstancesOnOneDatabase(t *testing.T) {
	if !storetest.Postgres() {
		t.Skip("several instances need PostgreSQL (" + storetest.Env + "; make test sets it in CI)")
	}
	bin := buildCountersign(t)
	dsn := storetest.DSN(t)
	backend := &payments{requests: map[string]int{}, paid: map[string]int{}, delay: 150 * time.Millisecond}
	srv := httptest.NewServer(backend)
	defer srv.Close()
	dir := t.TempDir()
	toolsFile, policyFile := filepath.Join(dir, "tools.yaml"), filepath.Join(dir, "policy.yaml")
	os.WriteFile(toolsFile, []byte(`tools:
  - name: pay
    risk: high_write
    idempotent: true
    input_schema: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}
    http: {method: POST, url: "`+srv.URL+`/pay", timeout: 10s}
  - name: big_pay
    risk: high_write
    idempotent: true
    input_schema: {type: object, properties: {n: {type: integer}}, required: [n], additionalProperties: false}
    http: {method: POST, url: "`+srv.URL+`/pay", timeout: 10s}
`), 0o600)
	os.WriteFile(policyFile, []byte(`rules:
  - name: big-pay-two-people
    tool: big_pay
    decision: needs_approval
    reason: two people, one a supervisor
    approvals: 2
    role: supervisor
tests:
  - name: big payments need two people
    tool: big_pay
    args: {n: 1}
    expect: needs_approval
`), 0o600)
	cli := func(stdin string, args ...string) string {
		t.Helper()
		out, code := runCmdIn(t, stdin, append(args, "--db", dsn)...)
		if code != 0 {
			t.Fatalf("%v: %s", args, out)
		}
		return strings.TrimSpace(out)
	}
	serveArgs := []string{"--db", dsn, "--tools", toolsFile, "--policy", policyFile}
	a := startInstance(t, bin, serveArgs...)
	b := startInstance(t, bin, serveArgs...)
	agentKey := cli("", "agent", "add", "--name", "bot")
	cli("a long enough password\n", "user", "add", "--email", "ann@x.test", "--name", "Ann", "--role", "approver")
	cli("a long enough password\n", "user", "add", "--email", "sam@x.test", "--name", "Sam", "--role", "supervisor")
	ann, sam := cli("", "token", "create", "--email", "ann@x.test"), cli("", "token", "create", "--email", "sam@x.test")
	store, err := storage.Open(dsn, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	pending := func(inst *instance, tool string, n int) *models.ToolCall {
		t.Helper()
		code, out, err := post(inst.url+"/api/v1/calls", agentKey, fmt.Sprintf(`{"tool":%q,"args":{"n":%d},"session":"s%d"}`, tool, n, n))
		call, _ := out["call"].(map[string]any)
		if err != nil || code != 201 || call["status"] != "pending" {
			t.Fatalf("call %s %d: %d %v %v", tool, n, code, out, err)
		}
		c, err := store.ToolCall(ctx, call["id"].(string))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	waitFor := func(id string, within time.Duration, want ...models.CallStatus) *models.ToolCall {
		t.Helper()
		deadline := time.Now().Add(within)
		for {
			c, err := store.ToolCall(ctx, id)
			if err == nil {
				for _, w := range want {
					if c.Status == w {
						return c
					}
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("call %s is %s, want %v", id, c.Status, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// Ann's queue page is open on B; the action becomes pending through A.
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	if res, err := browser.PostForm(b.url+"/login", url.Values{"email": {"ann@x.test"}, "password": {"a long enough password"}}); err != nil || res.StatusCode != 200 {
		t.Fatalf("sign in on B: %v %v", res, err)
	}
	streamCtx, stopStream := context.WithCancel(ctx)
	defer stopStream()
	req, _ := http.NewRequestWithContext(streamCtx, "GET", b.url+"/queue/events", nil)
	stream, err := browser.Do(req)
	if err != nil || stream.StatusCode != 200 {
		t.Fatalf("queue stream on B: %v %v", stream, err)
	}
	defer stream.Body.Close()
	seen := make(chan string, 1000)
	go func() {
		sc := bufio.NewScanner(stream.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			seen <- sc.Text()
		}
	}()

	// Thirty approvals of one action, at once, half on each instance.
	one := pending(a, "pay", 1)
	for deadline := time.After(10 * time.Second); ; {
		var line string
		select {
		case line = <-seen:
		case <-deadline:
			t.Fatal("the queue page open on B never showed the action made pending through A")
		}
		if strings.Contains(line, one.ID) {
			break
		}
	}
	stopStream()
	var wg sync.WaitGroup
	for i := range 30 {
		inst := a
		if i%2 == 1 {
			inst = b
		}
		wg.Add(1)
		go func() { defer wg.Done(); post(inst.url+"/api/v1/actions/"+one.ID+"/approve", ann, `{}`) }()
	}
	wg.Wait()
	waitFor(one.ID, 20*time.Second, models.CallSucceeded)
	if req, paid := backend.counts(one.ID, one.IdempotencyKey); req != 1 || paid != 1 {
		t.Fatalf("thirty approvals: the backend was asked %d times", req)
	}

	// A two-person action: the approver on A, the supervisor on B, at once.
	two := pending(b, "big_pay", 2)
	start := make(chan struct{})
	for _, p := range []struct {
		inst  *instance
		token string
	}{{a, ann}, {b, sam}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			if code, out, err := post(p.inst.url+"/api/v1/actions/"+two.ID+"/approve", p.token, `{}`); err != nil || code != 200 {
				t.Errorf("approval on %s: %d %v %v", p.inst.url, code, out, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	waitFor(two.ID, 20*time.Second, models.CallSucceeded)
	if req, _ := backend.counts(two.ID, two.IdempotencyKey); req != 1 {
		t.Fatalf("the two-person action: the backend was asked %d times", req)
	}

	// A burst of approvals split across both, and A killed in the middle.
	var burst []*models.ToolCall
	for n := 10; n < 22; n++ {
		burst = append(burst, pending(a, "pay", n))
	}
	var mu sync.Mutex
	var retry []*models.ToolCall
	for i, c := range burst {
		inst := a
		if i%2 == 1 {
			inst = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 20 * time.Millisecond)
			if code, _, err := post(inst.url+"/api/v1/actions/"+c.ID+"/approve", ann, `{}`); err != nil || code >= 500 {
				mu.Lock()
				retry = append(retry, c) // the approver clicks again, on the instance still up
				mu.Unlock()
			}
		}()
	}
	time.Sleep(150 * time.Millisecond)
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for _, c := range retry {
		if code, out, err := post(b.url+"/api/v1/actions/"+c.ID+"/approve", ann, `{}`); err != nil || (code != 200 && code != 409) {
			t.Fatalf("approving again on B: %d %v %v", code, out, err)
		}
	}
	// What A was running is taken over once its beat goes stale.
	rerun := 0
	for _, c := range burst {
		waitFor(c.ID, models.InstanceAlive+40*time.Second, models.CallSucceeded)
		req, paid := backend.counts(c.ID, c.IdempotencyKey)
		if paid != 1 || req > 2 {
			t.Fatalf("call %s: asked %d times, paid %d", c.ID, req, paid)
		}
		if req == 2 {
			rerun++
		}
	}
	t.Logf("after the kill: %d approvals made again on B, %d calls A was running sent again by B (same idempotency key)", len(retry), rerun)
	if out, code := runCmd(t, "audit", "verify", "--db", dsn); code != 0 || !strings.Contains(out, "intact") {
		t.Fatalf("audit verify after the kill: %d %s", code, out)
	}
	// What A ended and did not sign before the kill, B signs (its sweep
	// looks at every call once it took over A's): every final call has one
	// receipt, and each checks out.
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(time.Second) {
		out, code := runCmd(t, "audit", "verify", "--db", dsn)
		if code == 0 && strings.Contains(out, "every final call signed") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("receipts after the kill: %d %s", code, out)
		}
	}
}
