package oauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"

	"github.com/countersign/countersign/models"
)

// Client ID Metadata Documents: a client may name itself by the https URL
// of a JSON document about it (its client_id is that URL) instead of
// registering. Countersign fetches the document (at most 5 KiB, within 5
// seconds, no redirects, never from a private or loopback address: the
// URL is the client's to choose), checks it names itself, keeps it, and
// fetches it again when it is over an hour old. The consent page then
// shows the document's host, which the client cannot fake.

// fetching bounds the documents fetched at once by this process.
var fetching = make(chan struct{}, 4)

// documentRefresh is how long a fetched document is trusted.
const documentRefresh = time.Hour

// isDocumentID says whether a client_id is a metadata document's URL.
func isDocumentID(id string) bool { return strings.HasPrefix(id, "https://") }

// publicOnly refuses a connection to an address that is not public, after
// name resolution (so a name that resolves to one is refused too).
func publicOnly(_, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return err
	}
	if !isPublic(host) {
		return fmt.Errorf("%s is not a public address", host)
	}
	return nil
}

// notPublic are the special-purpose ranges (RFC 6890 and its successors)
// besides loopback, private, link-local, multicast and unspecified, which
// net/netip names: this network, shared address space (carrier NAT),
// IETF protocol assignments, benchmarking, reserved and broadcast; IPv4
// embedded in IPv6 by NAT64, 6to4 and the deprecated site-local and
// IPv4-compatible forms, whose IPv4 part is checked as well.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("2001::/32"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("fec0::/10"),
	netip.MustParsePrefix("fc00::/7"),
	netip.MustParsePrefix("::/96"),
	netip.MustParsePrefix("100::/64"),
}

// isPublic says whether an address is one a client's document may be
// fetched from.
func isPublic(host string) bool {
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.WithZone("")
	if ip.Is4In6() {
		ip = ip.Unmap()
	}
	if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() ||
		ip.IsMulticast() || ip.IsInterfaceLocalMulticast() {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(ip) {
			return false
		}
	}
	return true
}

// DocumentClient is how metadata documents are fetched by default: public
// addresses only, no redirects, 5 seconds.
func DocumentClient() *http.Client {
	dialer := &net.Dialer{Timeout: 5 * time.Second, Control: publicOnly}
	return &http.Client{Timeout: 5 * time.Second,
		Transport:     &http.Transport{DialContext: dialer.DialContext, TLSHandshakeTimeout: 5 * time.Second, Proxy: nil},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// documentClient reads (fetching when needed) the client a metadata
// document's URL names.
func (s *opStorage) documentClient(ctx context.Context, id string) (*models.OAuthClient, error) {
	c, err := s.store.OAuthClientByID(ctx, id)
	if err == nil && (c.RevokedAt != nil || s.store.Now().Sub(c.CreatedAt) < documentRefresh) {
		return c, nil
	}
	fetched, ferr := s.fetchDocument(ctx, id)
	if ferr != nil {
		return nil, ferr
	}
	if err := s.store.SaveOAuthClientDocument(ctx, fetched); err != nil {
		return nil, err
	}
	return s.store.OAuthClientByID(ctx, id)
}

func (s *opStorage) fetchDocument(ctx context.Context, id string) (*models.OAuthClient, error) {
	u, err := url.Parse(id)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Path == "" || u.Path == "/" || u.Fragment != "" || u.User != nil ||
		len(id) > 500 {
		return nil, errors.New("a client id URL is https, with a path, without a fragment or credentials, at most 500 characters")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	select {
	case fetching <- struct{}{}:
		defer func() { <-fetching }()
	case <-ctx.Done():
		return nil, errors.New("too many client metadata documents are being fetched; try again")
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	req.Header.Set("Accept", "application/json")
	res, err := s.documents.Do(req)
	if err != nil {
		return nil, fmt.Errorf("the client's metadata document could not be fetched: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the client's metadata document answered %d", res.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(res.Body, 5<<10+1))
	if err != nil || len(body) > 5<<10 {
		return nil, errors.New("the client's metadata document is over 5 KiB or could not be read")
	}
	var doc struct {
		ClientID string `json:"client_id"`
		registration
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, errors.New("the client's metadata document is not a JSON object")
	}
	if doc.ClientID != id {
		return nil, errors.New("the client's metadata document names another client_id")
	}
	if problem := doc.check(); problem != "" {
		return nil, errors.New("the client's metadata document: " + problem)
	}
	uris, _ := json.Marshal(doc.RedirectURIs)
	return &models.OAuthClient{ID: id, Name: doc.ClientName, RedirectURIs: string(uris), ClientURI: doc.ClientURI}, nil
}
