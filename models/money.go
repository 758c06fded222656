package models

import (
	"errors"
	"math"
	"strconv"
)

// Cents is a sum of money in whole cents (minor units of the one currency
// a deployment works in): what normalized arguments, totals, grants and
// pages count in. Floating-point dollars appear only where a number comes
// in (JSON arguments, a form) or goes out to a policy's CEL, converted
// once by CentsOf and Dollars.
type Cents int64

// CentsOf is an amount in dollars as whole cents, rounded half away from
// zero (-0.005 is -1 cent, as 0.005 is 1): the one rounding every page,
// policy and tool uses.
func CentsOf(dollars float64) Cents { return Cents(math.Round(dollars * 100)) }

// Dollars is the amount as the nearest float64 number of dollars, for a
// policy's CEL and for JSON.
func (c Cents) Dollars() float64 { return float64(c) / 100 }

// String renders the amount as people read it: 90000 -> "$900.00", with
// thousands separators; negative amounts lead with a minus ("-$0.05").
func (c Cents) String() string {
	var b [32]byte
	out := b[:0]
	if c < 0 {
		out = append(out, '-')
		c = -c
	}
	out = append(out, '$')
	digits := strconv.AppendInt(nil, int64(c/100), 10)
	for i, d := range digits {
		if i > 0 && (len(digits)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, d)
	}
	out = append(out, '.', byte('0'+c%100/10), byte('0'+c%10))
	return string(out)
}

// MaxDollars is the largest sum CentsFrom takes: far past any payment, and
// well inside what int64 cents hold.
const MaxDollars = 1e13

// ErrNotMoney: a number that is not a sum of money (not finite, or past
// MaxDollars either way).
var ErrNotMoney = errors.New("not a sum of money")

// CentsFrom is CentsOf for a number that came from outside (a form, JSON,
// a tool's arguments): one that is not finite or is past MaxDollars is
// refused rather than turned into whatever an overflowing conversion gives.
func CentsFrom(dollars float64) (Cents, error) {
	if math.IsNaN(dollars) || math.IsInf(dollars, 0) || math.Abs(dollars) > MaxDollars {
		return 0, ErrNotMoney
	}
	return CentsOf(dollars), nil
}
