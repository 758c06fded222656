package chat

import (
	"net/http"
	"time"

	"github.com/countersign/countersign/models/fault"
	"github.com/countersign/countersign/static"
	"github.com/countersign/countersign/views"
	"github.com/countersign/countersign/web/doorkit"
	"github.com/labstack/echo/v4"
)

// demoPage plays a shop's site: it signs a demo customer's token on the
// server, as a shop's backend would, and embeds the widget.
//
// It exists only with --demo, signs with a secret of its own (never the
// shop's), and only for the demo customers; with a shop's customer secret
// set it is off unless the operator turns it on with --demo-page.
func (d *Door) demoPage(c echo.Context) error {
	if d.opts.DemoSecret == "" {
		return fault.Errorf(fault.NotFound, "there is no demo shop on this server")
	}
	as := c.QueryParam("as")
	v := views.DemoView{As: as}
	for _, cu := range d.opts.DemoCustomers {
		v.Customers = append(v.Customers, views.DemoCustomer{ID: cu.ID, Name: cu.Name, Orders: cu.About})
		if cu.ID == as {
			tok, err := SignCustomerToken(d.opts.DemoSecret, cu.ID, cu.Name, 2*time.Hour)
			if err != nil {
				return err
			}
			v.Token = tok
		}
	}
	return doorkit.Render(c, http.StatusOK, views.Demo(v))
}

// widgetJS serves the embed script, which shops load from their own pages.
func (d *Door) widgetJS(c echo.Context) error {
	b, err := static.Files.ReadFile("widget.js")
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "public, max-age=300")
	h.Set("Cross-Origin-Resource-Policy", "cross-origin")
	return c.Blob(http.StatusOK, "text/javascript; charset=utf-8", b)
}
