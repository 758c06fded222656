package insights

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/countersign/countersign/models/storage"
)

// Vouched is a pair of accounts that co-signed while one of them was added
// to the staff, raised, enabled or reset on the other's proposal: their two
// signatures rest partly on one person's word. A second admin approved
// that change, so it is allowed; it is shown so someone looks.
type Vouched struct {
	ProposerID   string   `json:"proposer_id"`
	ProposerName string   `json:"proposer"`
	ProposedID   string   `json:"proposed_id"`
	ProposedName string   `json:"proposed"`
	Together     int      `json:"together"` // things both signed in the period
	Examples     []string `json:"examples"` // call ids, or "policy version N"
}

// VouchedPairs finds the pairs in the period.
func VouchedPairs(ctx context.Context, store *storage.Store, since time.Time) ([]Vouched, error) {
	proposers, err := store.StaffProposers(ctx)
	if err != nil {
		return nil, err
	}
	if len(proposers) == 0 {
		return []Vouched{}, nil
	}
	cos, err := store.CoSignings(ctx, since)
	if err != nil {
		return nil, err
	}
	pairs := map[[2]string]*Vouched{}
	for _, c := range cos {
		for _, who := range c.Signers {
			for _, by := range proposers[who] {
				if by == who || !contains(c.Signers, by) {
					continue
				}
				k := [2]string{by, who}
				p := pairs[k]
				if p == nil {
					p = &Vouched{ProposerID: by, ProposedID: who, Examples: []string{}}
					pairs[k] = p
				}
				p.Together++
				if len(p.Examples) < 5 {
					p.Examples = append(p.Examples, c.Subject)
				}
			}
		}
	}
	names, err := store.StaffNames(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Vouched, 0, len(pairs))
	for _, p := range pairs {
		p.ProposerName, p.ProposedName = names[p.ProposerID], names[p.ProposedID]
		out = append(out, *p)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Together != out[j].Together {
			return out[i].Together > out[j].Together
		}
		return out[i].ProposerName+out[i].ProposedName < out[j].ProposerName+out[j].ProposedName
	})
	return out, nil
}

func contains(list []string, s string) bool { return slices.Contains(list, s) }
