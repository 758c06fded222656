package models

import (
	"encoding/json"
	"time"
)

// Review is what one person was shown about an action when they opened
// it: the facts the tool's review looked up (what to know before deciding),
// as they were then. A decision that names its review keeps those facts
// (Approval.Seen), so the decided action shows what the decision was made
// on, not what a lookup says today.
type Review struct {
	ID         string `gorm:"primaryKey;size:40"`
	ToolCallID string `gorm:"size:40;index"`
	StaffID    string `gorm:"size:64"`
	Facts      string `gorm:"type:text"` // JSON: []ReviewFact
	CreatedAt  time.Time
}

// ReviewFact is one line of what an approver was shown.
type ReviewFact struct {
	Label string `json:"label"`
	Value string `json:"value"`
}

// MaxReviewFacts bounds what one review keeps.
const MaxReviewFacts = 50

// EncodeFacts is facts as a Review or an Approval keeps them ("" for none).
func EncodeFacts(facts []ReviewFact) string {
	if len(facts) == 0 {
		return ""
	}
	b, _ := json.Marshal(facts[:min(len(facts), MaxReviewFacts)])
	return string(b)
}

// DecodeFacts reads what EncodeFacts wrote; nothing for "" or for text that
// is not a list of facts.
func DecodeFacts(s string) []ReviewFact {
	var facts []ReviewFact
	if s != "" && json.Unmarshal([]byte(s), &facts) != nil {
		return nil
	}
	return facts
}
