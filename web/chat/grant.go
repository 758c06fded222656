package chat

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// A stored conversation is shown only to the customer the shop vouches for
// now. The chat cookie alone proves only that this browser held the
// conversation once (a shared computer, another shopper signed in since), so
// the frame shows nothing until it has said who is signed in
// (/chat/identity); when that matches the conversation's customer, it gets
// the conversation and a grant, bound to the run and the customer, that its
// live stream must present.

// ChatGrantLifetime is how long an open chat frame may follow its
// conversation before it must say again who is signed in.
const ChatGrantLifetime = 12 * time.Hour

func newGrantKey(seed []byte) []byte {
	if len(seed) > 0 {
		sum := sha256.Sum256(append([]byte("countersign/chat-grant/"), seed...))
		return sum[:]
	}
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return k
}

func (d *Door) chatGrant(runID, customerID string, now time.Time) string {
	exp := strconv.FormatInt(now.Add(ChatGrantLifetime).Unix(), 10)
	return exp + "." + d.grantMAC(runID, customerID, exp)
}

func (d *Door) grantMAC(runID, customerID, exp string) string {
	m := hmac.New(sha256.New, d.grantKey)
	m.Write([]byte(runID + "\x00" + customerID + "\x00" + exp))
	return hex.EncodeToString(m.Sum(nil))
}

func (d *Door) validChatGrant(grant, runID, customerID string, now time.Time) bool {
	exp, mac, ok := strings.Cut(grant, ".")
	if !ok {
		return false
	}
	unix, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.Unix() > unix {
		return false
	}
	return hmac.Equal([]byte(mac), []byte(d.grantMAC(runID, customerID, exp)))
}
