package models

import (
	"time"
)

// ToolPin is the definition of an upstream MCP tool that was accepted: by
// an admin on /tools, by the tools file (a server it trusts), or as the
// server first listed it. A definition that differs from its pin is held
// at high_write until an admin accepts it (agent.Gate).
type ToolPin struct {
	Name     string `gorm:"primaryKey;size:200"` // the name Countersign offers
	Upstream string `gorm:"size:64;index"`       // the tools file's name for the server
	Hash     string `gorm:"size:64"`             // SHA-256 (hex) of Definition
	// Definition is the tool as the server listed it (MCP's Tool, JSON).
	Definition string
	AcceptedBy string `gorm:"size:200"`
	AcceptedAt time.Time
}
