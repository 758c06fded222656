package insights

import (
	"context"
	"slices"
	"sort"
	"time"

	"github.com/countersign/countersign/models/storage"
)

// Vouched is a pair of accounts that co-signed while one of them was added
// to the staff, raised, enabled or reset on the other's proposal, or on the
// proposal of an account that one proposed, however many steps down (A made
// a.alt, a.alt made y, A and y co-sign): their two signatures rest partly
// on one person's word. A second admin approved each change, so it is
// allowed; it is shown so someone looks.
type Vouched struct {
	ProposerID   string `json:"proposer_id"`
	ProposerName string `json:"proposer"`
	ProposedID   string `json:"proposed_id"`
	ProposedName string `json:"proposed"`
	// Via are the accounts between them, in order from the proposer's
	// (empty: the proposer proposed them directly).
	Via      []string `json:"via"`
	Together int      `json:"together"` // things both signed in the period
	Examples []string `json:"examples"` // call ids, or "policy version N"
}

// ancestry is, for one account, every account that made it able to sign,
// directly or through others, with the accounts between (nearest first).
type ancestry map[string][]string

// ancestors walks the proposers of who, breadth first: each ancestor with
// the shortest chain of accounts between it and who.
func ancestors(proposers map[string][]string, who string) ancestry {
	out := ancestry{}
	type step struct {
		id  string
		via []string // from who's proposer up, not counting id
	}
	queue := []step{{id: who}}
	seen := map[string]bool{who: true}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, by := range proposers[cur.id] {
			if seen[by] {
				continue
			}
			seen[by] = true
			via := cur.via
			if cur.id != who {
				via = append(slices.Clone(cur.via), cur.id)
			}
			out[by] = via
			queue = append(queue, step{id: by, via: via})
		}
	}
	return out
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
	lines := map[string]ancestry{}
	pairs := map[[2]string]*Vouched{}
	for _, c := range cos {
		for _, who := range c.Signers {
			line, ok := lines[who]
			if !ok {
				line = ancestors(proposers, who)
				lines[who] = line
			}
			for by, via := range line {
				if by == who || !contains(c.Signers, by) {
					continue
				}
				k := [2]string{by, who}
				p := pairs[k]
				if p == nil {
					// via runs from who's proposer up: the proposer's side first.
					p = &Vouched{ProposerID: by, ProposedID: who, Via: reversed(via), Examples: []string{}}
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
		for i, id := range p.Via {
			p.Via[i] = names[id]
		}
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

func reversed(s []string) []string {
	out := make([]string, len(s))
	for i, v := range s {
		out[len(s)-1-i] = v
	}
	return out
}
