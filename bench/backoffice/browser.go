package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/countersign/countersign/bench/internal/measure"
)

// decisionReady measures, in headless Chromium, how long an approver waits
// on an action page: from its first byte to the decision controls being
// usable (the document parsed and app.js, which binds the keys, run: the
// navigation's domContentLoadedEventEnd), and the server's time to that
// first byte beside it. n views after two warm-ups, at 1440×900.
func decisionReady(chromium, base, email, pw, actionID string, n int) error {
	if _, err := os.Stat(chromium); err != nil {
		fmt.Printf("  skipped: no Chromium at %s (-chromium)\n", chromium)
		return nil
	}
	dir, err := os.MkdirTemp("", "cs-bench-chromium-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.Headless, chromedp.NoSandbox,
		chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.UserDataDir(dir), chromedp.WindowSize(1440, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancelT := context.WithTimeout(ctx, 5*time.Minute)
	defer cancelT()
	err = chromedp.Do(ctx, chromedp.Navigate(base+"/login"),
		chromedp.SendKeys(chromedp.CSS("input[name=email]"), email), chromedp.SendKeys(chromedp.CSS("input[name=password]"), pw),
		chromedp.Submit(chromedp.CSS("input[name=password]")), chromedp.WaitVisible(chromedp.CSS("[data-testid=who]")))
	if err != nil {
		return fmt.Errorf("sign in with Chromium: %w", err)
	}
	var ready, server []time.Duration
	for i := 0; i < n+2; i++ {
		if err := chromedp.Do(ctx, chromedp.Navigate(base+"/actions/"+actionID), chromedp.WaitVisible(chromedp.CSS("[data-testid=approve]"))); err != nil {
			return err
		}
		t, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`(() => { const n = performance.getEntriesByType('navigation')[0];
			return [n.requestStart, n.responseStart, n.domContentLoadedEventEnd]; })()`))
		if err != nil || len(t) != 3 {
			return fmt.Errorf("navigation timings: %v", err)
		}
		if i >= 2 {
			server = append(server, ms(t[1]-t[0]))
			ready = append(ready, ms(t[2]-t[1]))
		}
	}
	for _, d := range [][]time.Duration{ready, server} {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	}
	fmt.Printf("  first byte to decision controls usable: p50 %.1f ms   p90 %.1f ms\n", measure.MS(ready[len(ready)/2]), measure.MS(ready[len(ready)*9/10]))
	fmt.Printf("  request to first byte (server):         p50 %.1f ms   p90 %.1f ms\n", measure.MS(server[len(server)/2]), measure.MS(server[len(server)*9/10]))
	return nil
}

func ms(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
