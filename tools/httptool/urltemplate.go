package httptool

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/countersign/countersign/tools"
)

// urlTemplate is an HTTP tool's URL. A {field} may stand only where an
// argument can be nothing but data: inside a path segment or as a query
// value. The origin (scheme, host, port), query names and the fragment are
// the operator's, fixed at load, so no argument can send a call elsewhere
// or add a parameter the backend did not expect.
type urlTemplate struct {
	origin   string   // scheme://host[:port], as written
	path     string   // with {field}
	query    []string // "name=value" pairs, the value with {field}
	fragment string
}

// parseURLTemplate checks where the {field}s of a URL (its ${NAME}s already
// filled) stand.
func parseURLTemplate(s string) (*urlTemplate, error) {
	scheme, rest, ok := strings.Cut(s, "://")
	if !ok {
		return nil, errors.New("the url must be an absolute http or https URL")
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	t := &urlTemplate{origin: scheme + "://" + rest[:end]}
	if argRef.MatchString(t.origin) {
		return nil, errors.New("a {field} may stand only in the path or as a query value, never in the scheme, host or port")
	}
	rest = rest[end:]
	rest, t.fragment, _ = strings.Cut(rest, "#")
	if argRef.MatchString(t.fragment) {
		return nil, errors.New("a {field} may stand only in the path or as a query value, never in the fragment")
	}
	path, query, hasQuery := strings.Cut(rest, "?")
	t.path = path
	if hasQuery {
		for _, pair := range strings.Split(query, "&") {
			name, _, _ := strings.Cut(pair, "=")
			if argRef.MatchString(name) {
				return nil, errors.New("a {field} may stand only as a query value, never as a query parameter's name")
			}
			t.query = append(t.query, pair)
		}
	}
	u, err := url.Parse(t.origin + argRef.ReplaceAllString(rest, "x"))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("the url must be an absolute http or https URL")
	}
	return t, nil
}

// fill is the URL of one call: each path argument escaped into its segment,
// each query argument into its value. A segment that comes out "." or ".."
// is refused: it would climb the backend's paths.
func (t *urlTemplate) fill(args map[string]any) (string, error) {
	path := fill(t.path, args, url.PathEscape)
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return "", fmt.Errorf("an argument makes the path segment %q, which Countersign never sends", seg)
		}
	}
	var b strings.Builder
	b.WriteString(t.origin)
	b.WriteString(path)
	for i, pair := range t.query {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		name, value, hasValue := strings.Cut(pair, "=")
		b.WriteString(name)
		if hasValue {
			b.WriteByte('=')
			b.WriteString(fill(value, args, url.QueryEscape))
		}
	}
	if t.fragment != "" {
		b.WriteString("#" + t.fragment)
	}
	return b.String(), nil
}

// noRedirectClient is c (nil: a new client) following redirects on its own
// origin only.
func noRedirectClient(c *http.Client) *http.Client {
	out := &http.Client{}
	if c != nil {
		*out = *c
	}
	out.CheckRedirect = tools.SameOriginOnly
	return out
}

// redirected is the outcome of an answer that redirected the call where
// Countersign does not follow. A read changed nothing, nor did a 307 or 308
// (they ask to send the same request elsewhere); a write redirected
// otherwise (a 303 "see other" after a POST) may have been done.
func (e *executor) redirected(resp *http.Response) error {
	where := "another address"
	if loc, err := resp.Location(); err == nil {
		where = loc.Scheme + "://" + loc.Host
		if loc.Host == resp.Request.URL.Host && loc.Scheme == resp.Request.URL.Scheme {
			where = "itself more than " + fmt.Sprint(tools.MaxRedirects) + " times"
		}
	}
	what := fmt.Sprintf("the %s service redirected the call to %s (%s); Countersign follows redirects only on the tool's own host and sent nothing there", e.tool, where, resp.Status)
	if e.method == http.MethodGet || resp.StatusCode == http.StatusTemporaryRedirect || resp.StatusCode == http.StatusPermanentRedirect {
		return tools.Refuse("%s; nothing was done", what)
	}
	return &tools.UnknownError{Message: what + "; it may have acted on the call, a team member will check what happened"}
}
