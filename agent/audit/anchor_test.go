package audit

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"crypto/ed25519"

	"github.com/countersign/countersign/models"
)

// Every chain's head is included in an anchor of any number of chains, as
// transparency-dev/merkle's verifier checks it; a head that moved, another
// chain's place or another root are refused.
func TestEveryHeadIsIncludedInTheAnchorAndNothingElse(t *testing.T) {
	for n := 1; n <= 9; n++ {
		heads := make([]models.ChainHead, n)
		for i := range heads {
			heads[i] = models.ChainHead{Chain: int64(i), Seq: int64(10 * (i + 1)), Hash: fmt.Sprintf("%064x", i+1)}
		}
		root, err := MerkleRoot(heads)
		if err != nil {
			t.Fatal(err)
		}
		for i := range heads {
			in, err := Include(heads, i)
			if err != nil {
				t.Fatal(err)
			}
			if err := in.Verify(root); err != nil {
				t.Fatalf("%d chains, head %d: %v", n, i, err)
			}
			moved := *in
			moved.Head.Seq--
			if moved.Verify(root) == nil {
				t.Fatalf("%d chains: a rewound head %d is included", n, i)
			}
			if n > 1 {
				other := *in
				other.Index = uint64((i + 1) % n)
				if other.Verify(root) == nil {
					t.Fatalf("%d chains: head %d is included in another place", n, i)
				}
			}
		}
		fewer, _ := MerkleRoot(heads[:max(n-1, 1)])
		if in, _ := Include(heads, n-1); n > 1 && in.Verify(fewer) == nil {
			t.Fatalf("%d chains: the last head is included in the root of the others", n)
		}
	}
}

// An anchor is signed over its root; its heads must give that root, so a
// chain dropped from the list fails as surely as a changed signature. A
// database with chain 0 alone still gets a version 1 checkpoint.
func TestAnAnchorSignsItsRoot(t *testing.T) {
	pub, priv, _ := ed25519.GenerateKey(nil)
	heads := []models.ChainHead{{Chain: 0, Seq: 5, Hash: strings.Repeat("a", 64)}, {Chain: 1, Seq: 7, Hash: strings.Repeat("b", 64)}}
	c, err := SignHeads(priv, heads, time.Now())
	if err != nil || c.Version != 2 || !c.Valid(pub) || c.Events() != 12 {
		t.Fatalf("an anchor of two chains: %+v %v", c, err)
	}
	dropped := c
	dropped.Heads = heads[:1]
	if dropped.Valid(pub) {
		t.Fatal("an anchor with a chain dropped from its heads is valid")
	}
	one, err := SignHeads(priv, heads[:1], time.Now())
	if err != nil || one.Version != 1 || one.Seq != 5 || !one.Valid(pub) {
		t.Fatalf("a checkpoint of chain 0 alone: %+v %v", one, err)
	}
}
