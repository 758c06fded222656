package web_test

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
)

// apiDoc is the API's OpenAPI document, as served, for checking answers.
var apiDoc = sync.OnceValues(func() (validator.Validator, error) {
	spec, err := os.ReadFile("openapi.json")
	if err != nil {
		return nil, err
	}
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		return nil, err
	}
	v, errs := validator.NewValidator(doc)
	if len(errs) > 0 {
		return nil, errs[0]
	}
	return v, nil
})

// checkAgainstOpenAPI holds one API exchange to the OpenAPI document: the
// request as sent and the answer as received.
func checkAgainstOpenAPI(t *testing.T, method, path, body string, header http.Header, res *http.Response, raw []byte) {
	t.Helper()
	if !strings.HasPrefix(path, "/api/v1/") || strings.HasSuffix(strings.SplitN(path, "?", 2)[0], "/events") {
		return
	}
	v, err := apiDoc()
	if err != nil {
		t.Fatalf("the OpenAPI document does not load: %v", err)
	}
	req, _ := http.NewRequest(method, "http://countersign.test"+path, strings.NewReader(body))
	req.Header = header.Clone()
	res.Body = io.NopCloser(bytes.NewReader(raw))
	if ok, errs := v.ValidateHttpResponse(req, res); !ok {
		if res.StatusCode == http.StatusNotFound && len(errs) == 1 && strings.Contains(errs[0].Message, "not found") {
			return // a path the API does not have: 404 is the right answer
		}
		var msgs []string
		for _, e := range errs {
			msg := e.Message + ": " + e.Reason
			for _, se := range e.SchemaValidationErrors {
				msg += " [" + se.FieldPath + ": " + se.Reason + "]"
			}
			msgs = append(msgs, msg)
		}
		t.Errorf("%s %s answered %d, not as the OpenAPI document says:\n%s\n%s", method, path, res.StatusCode, strings.Join(msgs, "\n"), raw)
	}
}

func TestOpenAPIDocumentIsValidAndServed(t *testing.T) {
	v, err := apiDoc()
	if err != nil {
		t.Fatal(err)
	}
	if ok, errs := v.ValidateDocument(); !ok {
		t.Fatalf("the document is not valid OpenAPI 3.1: %v", errs[0])
	}
	a := newApp(t)
	r := a.do("GET", "/api/v1/openapi.json", "", "")
	if r.Status != 200 || r.Body["openapi"] != "3.1.0" {
		t.Fatalf("%d %s", r.Status, r.Raw[:min(len(r.Raw), 200)])
	}
}
