package web_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

func (c *chatClient) identify(customerToken string) string {
	c.t.Helper()
	req, _ := http.NewRequest("POST", c.base+"/chat/identity", strings.NewReader(url.Values{"customer_token": {customerToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("HX-Request", "true")
	res, err := c.client.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	return readAll(res)
}

func (c *chatClient) status(path string) int {
	c.t.Helper()
	res, err := c.client.Get(c.base + path)
	if err != nil {
		c.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

var grantRe = regexp.MustCompile(`sse-connect="(/chat/events\?g=[^"]+)"`)

// A browser that held Alice's conversation shows it only to Alice: the
// frame shows nothing stored until it knows who is signed in, a guest or
// Bob starts afresh, and the live stream needs the grant only Alice's
// identity earns.
func TestStoredChatIsShownOnlyToItsCustomer(t *testing.T) {
	a, _, _ := widgetApp(t)
	c := newChatClient(t, a.srv.URL)
	alice := token(t, secret, "cus_alice", "Alice", time.Hour)
	bob := token(t, secret, "cus_bob", "Bob", time.Hour)
	if code, body := c.send("where is A1002?", alice, true); code != 200 || !strings.Contains(body, "Espresso machine") {
		t.Fatalf("alice: %d %.300s", code, body)
	}
	res, err := c.client.Get(a.srv.URL + "/chat")
	if err != nil {
		t.Fatal(err)
	}
	if page := readAll(res); strings.Contains(page, "Espresso machine") || strings.Contains(page, "A1002") {
		t.Fatal("the frame showed the stored conversation before knowing who is signed in")
	}
	if code := c.status("/chat/events"); code != http.StatusNotFound {
		t.Fatalf("the stream without a grant: %d", code)
	}
	// Alice again: her conversation, with a stream that works.
	body := c.identify(alice)
	m := grantRe.FindStringSubmatch(body)
	if !strings.Contains(body, "Espresso machine") || m == nil {
		t.Fatalf("Alice's identity did not bring her conversation back: %.500s", body)
	}
	// A guest in the same browser: nothing of Alice's, and the browser
	// forgets her conversation.
	if body := c.identify(""); strings.Contains(body, "Espresso machine") || grantRe.MatchString(body) {
		t.Fatalf("a guest sees: %.500s", body)
	}
	if body := c.identify(alice); strings.Contains(body, "Espresso machine") {
		t.Fatal("the conversation should be forgotten once someone else used the frame")
	}
	// Bob, after a new conversation of Alice's.
	c.send("where is A1002?", alice, true)
	if body := c.identify(bob); strings.Contains(body, "Espresso machine") || strings.Contains(body, "A1002") {
		t.Fatalf("Bob sees: %.500s", body)
	}
	// A grant names its run and customer: Alice's old one opens nothing now.
	if code := c.status(m[1]); code != http.StatusNotFound {
		t.Fatalf("an old grant after the conversation was forgotten: %d", code)
	}
}
