// Package static embeds Countersign's CSS, scripts and vendored front-end
// files, so the binary serves them with no files beside it.
package static

import "embed"

// Files is the embedded static tree.
//
//go:embed *.css *.js vendor
var Files embed.FS
