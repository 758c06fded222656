package main

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/countersign/countersign"

// goPackage is what go list says of one of our packages.
type goPackage struct {
	ImportPath string
	Imports    []string // direct
	Deps       []string // transitive
}

// The floor plan (ARCHITECTURE.md) as go list sees it: a package that
// imports one it must not fails here, naming both. Tests and the bench
// programs that seed databases directly are not held to it.
func TestLayersImportOnlyWhatTheyMay(t *testing.T) {
	t.Parallel()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,Deps", module+"/...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var pkgs []goPackage
	for dec := json.NewDecoder(strings.NewReader(string(out))); ; {
		var p goPackage
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	if len(pkgs) < 20 {
		t.Fatalf("go list found %d packages", len(pkgs))
	}
	for _, p := range pkgs {
		for _, v := range layerViolations(p) {
			t.Error(v)
		}
	}
}

// ours says whether path is one of our packages under dir.
func ours(path string, dirs ...string) bool {
	for _, d := range dirs {
		if path == module+"/"+d || strings.HasPrefix(path, module+"/"+d+"/") {
			return true
		}
	}
	return false
}

// databaseDriver says whether path is gorm, a database driver or the
// migration tool: the store's business alone.
func databaseDriver(path string) bool {
	for _, prefix := range []string{"gorm.io/", "github.com/jackc/pgx", "github.com/mattn/go-sqlite3", "github.com/pressly/goose"} {
		if strings.HasPrefix(path, prefix) {
			return true
		}
	}
	return false
}

func layerViolations(p goPackage) []string {
	var bad []string
	refuse := func(imports []string, why string, forbidden func(string) bool) {
		for _, imp := range imports {
			if forbidden(imp) {
				bad = append(bad, p.ImportPath+" imports "+imp+": "+why)
			}
		}
	}
	path := p.ImportPath
	switch {
	case ours(path, "bench"):
		return nil // seeding programs write SQL directly, on purpose
	case ours(path, "models/storage"):
		refuse(p.Imports, "the store sits under everything of ours but the words", func(imp string) bool {
			return ours(imp, "agent", "tools", "web", "views", "cmd", "demo")
		})
		return bad
	case ours(path, "models"):
		refuse(p.Deps, "the words import no store and nothing above them", func(imp string) bool {
			return databaseDriver(imp) || ours(imp, "models/storage", "agent", "tools", "web", "views", "cmd", "demo")
		})
		return bad
	}
	refuse(p.Imports, "only models/storage speaks to the database", databaseDriver)
	switch {
	case ours(path, "views"):
		refuse(p.Deps, "views render words: templ and models only", func(imp string) bool {
			return (strings.HasPrefix(imp, module+"/") && !ours(imp, "models")) || ours(imp, "models/storage") ||
				(strings.Contains(strings.Split(imp, "/")[0], ".") && !strings.HasPrefix(imp, module+"/") && !strings.HasPrefix(imp, "github.com/a-h/templ"))
		})
	case ours(path, "demo"):
		// The demo is a business like any other: it gives tools, facts,
		// a model, a policy and a prompt, and keeps its tables through the
		// store's units of work (storage.Schema).
		refuse(p.Imports, "the demo reaches Countersign only through what any business uses", func(imp string) bool {
			return strings.HasPrefix(imp, module+"/") && !ours(imp, "demo", "models", "tools", "agent/llm", "agent/business")
		})
	case ours(path, "agent/business"):
		// What a business brings is said in the words, tools and models.
		refuse(p.Imports, "a business's parts are words, tools and a model", func(imp string) bool {
			return strings.HasPrefix(imp, module+"/") && !ours(imp, "models", "tools", "agent/llm")
		})
	case ours(path, "tools"):
		refuse(p.Deps, "tools sit under the agent and the web and need only the words", func(imp string) bool {
			return ours(imp, "agent", "web", "views", "cmd", "models/storage", "demo")
		})
	case ours(path, "agent"):
		refuse(p.Deps, "the core knows no HTTP server, page or process, and no business", func(imp string) bool {
			return ours(imp, "web", "views", "cmd", "demo") || strings.HasPrefix(imp, "github.com/labstack/echo") || strings.HasPrefix(imp, "github.com/a-h/templ")
		})
	case ours(path, "web"):
		refuse(p.Deps, "the web layer is under the process and knows no business", func(imp string) bool { return ours(imp, "cmd", "demo") })
	case ours(path, "channels"):
		// A channel is a room of its own beside the web: it knows the
		// outbox and the words, not the pages, the process or another
		// channel.
		refuse(p.Deps, "a channel reaches people through the outbox alone", func(imp string) bool {
			return ours(imp, "web", "views", "cmd", "demo") || (ours(imp, "channels") && !ours(imp, strings.TrimPrefix(path, module+"/")))
		})
	}
	// A channel's service is spoken to by that channel alone.
	for sdk, channel := range channelSDKs {
		if !ours(path, channel) {
			refuse(p.Imports, "only "+channel+" speaks to its service", func(imp string) bool { return strings.HasPrefix(imp, sdk) })
		}
	}
	return bad
}

// channelSDKs are the SDKs of channels' services, each the one channel's.
var channelSDKs = map[string]string{
	"github.com/slack-go/slack":   "channels/slack",
	"github.com/emersion/go-smtp": "channels/email",
	"github.com/emersion/go-sasl": "channels/email",
}

// The rules catch what they are for: a made-up package of each kind that
// breaks one is refused.
func TestLayerRulesRefuseWhatTheyMust(t *testing.T) {
	t.Parallel()
	for _, p := range []goPackage{
		{ImportPath: module + "/models", Deps: []string{"gorm.io/gorm"}},
		{ImportPath: module + "/tools", Deps: []string{module + "/models/storage"}},
		{ImportPath: module + "/agent/gate", Deps: []string{"github.com/labstack/echo/v4"}},
		{ImportPath: module + "/agent/gate", Deps: []string{module + "/web"}},
		{ImportPath: module + "/views", Deps: []string{module + "/agent/gate"}},
		{ImportPath: module + "/views", Deps: []string{"github.com/labstack/echo/v4"}},
		{ImportPath: module + "/web", Imports: []string{"gorm.io/gorm"}},
		{ImportPath: module + "/agent/gate", Imports: []string{"github.com/mattn/go-sqlite3"}},
		{ImportPath: module + "/models/storage", Imports: []string{module + "/agent/gate"}},
		{ImportPath: module + "/models/storage", Imports: []string{module + "/demo/shop"}},
		{ImportPath: module + "/agent/gate", Deps: []string{module + "/demo/shop"}},
		{ImportPath: module + "/web", Deps: []string{module + "/demo/offline"}},
		{ImportPath: module + "/demo/shop", Imports: []string{module + "/agent/gate"}},
		{ImportPath: module + "/demo/offline", Imports: []string{module + "/agent/runloop"}},
		{ImportPath: module + "/demo/shop", Imports: []string{"gorm.io/gorm"}},
		{ImportPath: module + "/web", Imports: []string{"github.com/slack-go/slack"}},
		{ImportPath: module + "/agent/business", Imports: []string{module + "/demo/shop"}},
		{ImportPath: module + "/agent/agenttest", Deps: []string{module + "/demo"}},
		{ImportPath: module + "/models/storage/storetest", Imports: []string{module + "/demo/shop"}},
		{ImportPath: module + "/agent/business", Imports: []string{module + "/agent/gate"}},
		{ImportPath: module + "/agent/outbox", Imports: []string{"github.com/emersion/go-smtp"}},
		{ImportPath: module + "/channels/slack", Deps: []string{module + "/channels/webhook"}},
		{ImportPath: module + "/channels/email", Deps: []string{module + "/web"}},
	} {
		if len(layerViolations(p)) == 0 {
			t.Errorf("%s with %v passed", p.ImportPath, slices.Concat(p.Imports, p.Deps))
		}
	}
	if v := layerViolations(goPackage{ImportPath: module + "/views", Deps: []string{module + "/models", "github.com/a-h/templ", "fmt"}}); len(v) != 0 {
		t.Errorf("a view of words: %v", v)
	}
}
