package views

import "strconv"

// itoa64 is a number as every page writes it.
func itoa64(n int64) string {
	return strconv.FormatInt(n, 10)
}
