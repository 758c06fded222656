# Countersign's everyday commands. `make test` is what CI runs.

# The SQLite driver has FTS5 (the audit search's index) only with this tag;
# every go command below, and those the tests run, take it from GOFLAGS.
export GOFLAGS := $(strip $(GOFLAGS) -tags=sqlite_fts5)
.PHONY: run test generate check bench fuzz npm openapi mcp-servers llm-servers oidc-provider conformance

run:
	go run ./cmd/countersign serve --demo

generate:
	go tool templ generate

# Generated files must be fresh, go.mod tidy, code formatted, vetted and
# checked by staticcheck (pinned here), then every test.
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2

check:
	go tool templ generate
	git diff --exit-code -- '*_templ.go'
	go mod tidy -diff
	test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	go vet ./...
	go run $(STATICCHECK) ./...

# The suite on SQLite; then, when COUNTERSIGN_TEST_POSTGRES holds a
# PostgreSQL URL (.ci/run sets it), again with every store on PostgreSQL.
# (Both passes at once took as long on two cores: BENCHMARKS.md, "CI time".)
test: check npm openapi
	env -u COUNTERSIGN_TEST_POSTGRES go test -race -count=1 -timeout 30m ./...
	@if [ -n "$$COUNTERSIGN_TEST_POSTGRES" ]; then echo "== the suite again on PostgreSQL"; \
		go test -race -count=1 -timeout 30m ./models/... ./agent/... ./web/... ./cmd/...; fi
	cd bench/opa && go mod tidy -diff && go vet ./... && go test -count=1 ./...
	# The stdio bridge fed arbitrary lines for a minute.
	go test -count=1 -run XXX -fuzz FuzzBridgeLines -fuzztime 60s ./cmd/countersign/internal/stdiolines

# The npm packages the tests run, each folder pinned by its lockfile and
# installed again only when that changes (.ci/run installs them first, with
# retries): real MCP servers and clients the gateway's tests put around it
# (.ci/mcp), an independent OpenAI-compatible server the model adapter's
# tests talk to (.ci/llm), a real OpenID Provider the single sign-on tests
# sign in through (.ci/oidc), the MCP project's conformance suite and its
# reference server with Node 22 (.ci/conformance, run direct and through
# Countersign by cmd/countersign's TestConformanceThroughCountersign), and
# Redocly's CLI (.ci/openapi).
NPM_DIRS = mcp llm oidc conformance openapi
NPM_STAMPS = $(foreach d,$(NPM_DIRS),.ci/$(d)/node_modules/.package-lock.json)

npm: $(NPM_STAMPS)

.ci/%/node_modules/.package-lock.json: .ci/%/package-lock.json
	cd .ci/$* && npm ci --no-audit --no-fund --silent
	touch $@

mcp-servers: .ci/mcp/node_modules/.package-lock.json
llm-servers: .ci/llm/node_modules/.package-lock.json
oidc-provider: .ci/oidc/node_modules/.package-lock.json
conformance: .ci/conformance/node_modules/.package-lock.json

# The API's OpenAPI document, linted by Redocly's CLI (pinned in .ci/openapi).
openapi: .ci/openapi/node_modules/.package-lock.json
	cd .ci/openapi && npx redocly lint --config redocly.yaml ../../web/openapi.json

bench:
	go test -run XXX -bench . -benchtime 3s ./agent/...
	cd bench/opa && go test -run XXX -bench . -benchtime 2s .
	cd bench/ts-gate && npm ci --silent && node gate.bench.mjs && ARTICLE_LOG=1 node gate.bench.mjs >/dev/null

fuzz:
	go test ./tools -run XXX -fuzz FuzzNormalize -fuzztime 60s
	go test ./cmd/countersign/internal/stdiolines -run XXX -fuzz FuzzBridgeLines -fuzztime 60s
