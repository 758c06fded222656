package web

import (
	"github.com/labstack/echo/v4"

	"github.com/countersign/countersign/models"
	"github.com/countersign/countersign/web/doorkit"
)

// The gate API is a door of its own (web/gateapi) over the agent doors'
// kit (web/doorkit); what the other doors share of it is named here.

// withAgent is c with the agent that asks.
func withAgent(c echo.Context, ag *models.Agent) echo.Context { return doorkit.WithAgent(c, ag) }

func currentAgent(c echo.Context) *models.Agent { return doorkit.Agent(c) }
