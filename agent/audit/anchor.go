package audit

import (
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/transparency-dev/merkle/rfc6962"

	"github.com/countersign/countersign/models"
)

// An anchor (a checkpoint of version 2) names the heads of all chains at
// once by the root of a Merkle tree (RFC 6962, transparency-dev/merkle)
// whose leaves are the heads in chain order. Removing, rewinding or
// reordering a whole chain changes the root; an evidence bundle carries
// only its own chain's head and the path from it to the signed root.

// leaf is a chain head as a leaf of the anchor's tree.
func leaf(h models.ChainHead) []byte {
	return []byte("countersign audit chain head v1\nchain=" + strconv.FormatInt(h.Chain, 10) +
		"\nseq=" + strconv.FormatInt(h.Seq, 10) + "\nhash=" + h.Hash + "\n")
}

var hasher = rfc6962.DefaultHasher

// leafHashes are the tree's leaves, hashed.
func leafHashes(heads []models.ChainHead) [][]byte {
	out := make([][]byte, len(heads))
	for i, h := range heads {
		out[i] = hasher.HashLeaf(leaf(h))
	}
	return out
}

// subtreeRoot is the root of the leaves from begin to end: the whole tree
// (begin 0), or one of its perfect subtrees.
func subtreeRoot(leaves [][]byte, begin, end uint64) ([]byte, error) {
	f := compact.RangeFactory{Hash: hasher.HashChildren}
	r := f.NewEmptyRange(begin)
	for _, l := range leaves[begin:end] {
		if err := r.Append(l, nil); err != nil {
			return nil, err
		}
	}
	if begin == 0 {
		return r.GetRootHash(nil)
	}
	if h := r.Hashes(); len(h) == 1 {
		return h[0], nil
	}
	return nil, fmt.Errorf("leaves %d to %d are not a perfect subtree", begin, end)
}

// MerkleRoot is the root (hex) of the tree over the heads, in the order
// given (chain order).
func MerkleRoot(heads []models.ChainHead) (string, error) {
	if len(heads) == 0 {
		return "", errors.New("an anchor names at least one chain")
	}
	root, err := subtreeRoot(leafHashes(heads), 0, uint64(len(heads)))
	return hex.EncodeToString(root), err
}

// Inclusion proves that one chain's head is among those an anchor signed:
// the head, its place among the anchor's leaves and the path of hashes
// from it to the anchor's root.
type Inclusion struct {
	Head  models.ChainHead `json:"head"`
	Index uint64           `json:"index"`
	Size  uint64           `json:"size"`
	Path  []string         `json:"path"`
}

// Include makes the inclusion of heads[i] in the tree of heads.
func Include(heads []models.ChainHead, i int) (*Inclusion, error) {
	size := uint64(len(heads))
	nodes, err := proof.Inclusion(uint64(i), size)
	if err != nil {
		return nil, err
	}
	leaves := leafHashes(heads)
	hashes := make([][]byte, len(nodes.IDs))
	for k, id := range nodes.IDs {
		begin, end := id.Coverage()
		if hashes[k], err = subtreeRoot(leaves, begin, min(end, size)); err != nil {
			return nil, err
		}
	}
	path, err := nodes.Rehash(hashes, hasher.HashChildren)
	if err != nil {
		return nil, err
	}
	in := &Inclusion{Head: heads[i], Index: uint64(i), Size: size, Path: make([]string, len(path))}
	for k, p := range path {
		in.Path[k] = hex.EncodeToString(p)
	}
	return in, nil
}

// Verify checks that the inclusion leads to root (hex).
func (in *Inclusion) Verify(root string) error {
	want, err := hex.DecodeString(root)
	if err != nil {
		return fmt.Errorf("the anchor's root is not hex: %w", err)
	}
	path := make([][]byte, len(in.Path))
	for k, p := range in.Path {
		if path[k], err = hex.DecodeString(p); err != nil {
			return fmt.Errorf("the inclusion path is not hex: %w", err)
		}
	}
	return proof.VerifyInclusion(hasher, in.Index, in.Size, hasher.HashLeaf(leaf(in.Head)), path, want)
}
