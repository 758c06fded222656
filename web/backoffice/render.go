package backoffice

import "github.com/countersign/countersign/web/doorkit"

// render is doorkit.Render.
var render = doorkit.Render
