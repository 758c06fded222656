package measure

import (
	"os"
	"strconv"
	"strings"
)

// CPU is the machine's processor time so far (Linux /proc/stat, all
// cores): what was busy and the total, in clock ticks. Two readings say how
// busy the machine was between them: a fleet that stops scaling on a
// machine whose cores are all busy is bound by the machine, not by waiting.
type CPU struct{ Busy, Total uint64 }

// ReadCPU reads /proc/stat's first line (zero where there is none).
func ReadCPU() CPU {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPU{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		return CPU{}
	}
	var c CPU
	for i, f := range fields[1:] {
		n, _ := strconv.ParseUint(f, 10, 64)
		c.Total += n
		if i != 3 && i != 4 { // idle, iowait
			c.Busy += n
		}
	}
	return c
}

// BusySince is the share of the machine's processor time that was busy
// from an earlier reading to this one (0 to 1).
func (c CPU) BusySince(earlier CPU) float64 {
	if c.Total <= earlier.Total {
		return 0
	}
	return float64(c.Busy-earlier.Busy) / float64(c.Total-earlier.Total)
}
