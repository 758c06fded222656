// Package measure holds the small helpers the benchmark programs share.
package measure

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// MS is a duration in milliseconds, for printing.
func MS(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// RSSMB is this process's resident memory in MB, from /proc.
func RSSMB() float64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			var kb float64
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "VmRSS:")), "%f", &kb)
			return kb / 1024
		}
	}
	return 0
}

// Percentile is the q-th quantile (0..1) of durations, nearest rank below;
// l is not changed.
func Percentile(l []time.Duration, q float64) time.Duration {
	s := append([]time.Duration(nil), l...)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*q)]
}
