package stupaedge

import (
	"bufio"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// serveWrapped runs Go's HTTP server on a loopback listener wrapped by e, with a handler that
// answers every request it gets with a text error of its own; it gives the listener's address.
func serveWrapped(t *testing.T, e ErrorAnswers, xmlHere bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if xmlHere {
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		e.XMLPorts = append(e.XMLPorts, port)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "the handler's own answer", http.StatusBadRequest)
		}),
		MaxHeaderBytes: 1 << 10,
		ReadTimeout:    5 * time.Second,
	}
	go func() { _ = srv.Serve(e.WrapListener(ln)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

func exchange(t *testing.T, addr, request string) (*http.Response, string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, request); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer's body (its length %d): %v", resp.ContentLength, err)
	}
	return resp, string(body)
}

// Requests net/http answers itself, before any handler: each answer in the service's JSON shape.
func TestErrorAnswersRewriteGosOwnAnswers(t *testing.T) {
	addr := serveWrapped(t, ErrorAnswers{XMLPorts: []string{"1"}}, false)
	for _, tc := range []struct {
		name, request string
		status        int
		reason        string
		details       string
	}{
		{"a header line without a colon", "GET / HTTP/1.1\r\nHost: edge\r\nno colon here\r\n\r\n", 400, "MALFORMED_REQUEST",
			"the HTTP request could not be parsed"},
		{"no Host", "GET / HTTP/1.1\r\n\r\n", 400, "MALFORMED_REQUEST",
			"the HTTP request could not be parsed (missing required Host header)"},
		{"a Host that is no host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400, "MALFORMED_REQUEST",
			"the HTTP request could not be parsed (malformed Host header)"},
		{"an unknown transfer coding", "POST / HTTP/1.1\r\nHost: edge\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "MALFORMED_REQUEST",
			"the HTTP request could not be parsed (Unsupported transfer encoding)"},
		{"headers over the limit", "GET / HTTP/1.1\r\nHost: edge\r\nX-Big: " + strings.Repeat("b", 16<<10) + "\r\n\r\n", 431, "HEADERS_TOO_LARGE",
			"the HTTP request could not be parsed (its headers are too large)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := exchange(t, addr, tc.request)
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
				t.Fatalf("answered %s (%s): %s", resp.Status, resp.Header.Get("Content-Type"), body)
			}
			if resp.ContentLength != int64(len(body)) || !resp.Close {
				t.Errorf("Content-Length %d for %d bytes, Connection close %v", resp.ContentLength, len(body), resp.Close)
			}
			var shape struct {
				Error struct{ Reason, Details string } `json:"error"`
			}
			if err := json.Unmarshal([]byte(body), &shape); err != nil {
				t.Fatalf("%v: %s", err, body)
			}
			if shape.Error.Reason != tc.reason || shape.Error.Details != tc.details {
				t.Errorf("answered %+v, want %s: %s", shape.Error, tc.reason, tc.details)
			}
		})
	}
}

func TestErrorAnswersXMLOnS3sPort(t *testing.T) {
	addr := serveWrapped(t, ErrorAnswers{}, true)
	resp, body := exchange(t, addr, "GET / HTTP/1.1\r\n\r\n")
	if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/xml" {
		t.Fatalf("answered %s (%s): %s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	var shape struct {
		XMLName  xml.Name `xml:"Error"`
		Code     string
		Message  string
		Resource string
	}
	if err := xml.Unmarshal([]byte(body), &shape); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if shape.Code != "InvalidRequest" || shape.Message != "the HTTP request could not be parsed (missing required Host header)" || shape.Resource != "/" {
		t.Errorf("answered %+v", shape)
	}
}

// A handler's own answer, even a 400 in text, passes untouched: it has a Date and another field.
func TestErrorAnswersLeaveHandlersAnswers(t *testing.T) {
	addr := serveWrapped(t, ErrorAnswers{}, false)
	resp, body := exchange(t, addr, "GET / HTTP/1.1\r\nHost: edge\r\n\r\n")
	if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" || body != "the handler's own answer\n" {
		t.Fatalf("answered %s (%s): %q", resp.Status, resp.Header.Get("Content-Type"), body)
	}
}

type failingBody struct{ err error }

func (b failingBody) Read([]byte) (int, error) { return 0, b.err }
func (failingBody) Close() error               { return nil }

// What the proxy makes of a body it could not read: its own error (a 502 from the upstream).
var proxying = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
	if _, err := io.ReadAll(r.Body); err != nil {
		return caddyhttp.Error(http.StatusBadGateway, fmt.Errorf("reading from the client: %w", err))
	}
	return caddyhttp.Error(http.StatusBadGateway, errors.New("the upstream went away"))
})

func TestBodyErrorsMakeAnUnreadableBodyTheReaders(t *testing.T) {
	statusOf := func(body io.ReadCloser) (int, error) {
		r := httptest.NewRequest(http.MethodPut, "http://edge/bucket/key", nil)
		r.Body = body
		err := BodyErrors{}.ServeHTTP(httptest.NewRecorder(), r, proxying)
		var he caddyhttp.HandlerError
		if !errors.As(err, &he) {
			return 0, err
		}
		return he.StatusCode, err
	}
	cut := errors.New("unexpected EOF in a chunk")
	if status, err := statusOf(failingBody{cut}); status != 400 || !errors.Is(err, cut) {
		t.Errorf("an unreadable body: %d %v, want 400 with the read's error", status, err)
	}
	// The upstream's own failure stays its own: the body read to its end, or read after the
	// proxy closed it.
	if status, err := statusOf(io.NopCloser(strings.NewReader("whole"))); status != 502 {
		t.Errorf("a readable body: %d %v, want the proxy's 502", status, err)
	}
	if status, err := statusOf(failingBody{http.ErrBodyReadAfterClose}); status != 502 {
		t.Errorf("a read after close: %d %v, want the proxy's 502", status, err)
	}
	// No body: the next handler's answer as it is.
	r := httptest.NewRequest(http.MethodGet, "http://edge/", nil)
	if err := (BodyErrors{}).ServeHTTP(httptest.NewRecorder(), r, proxying); err == nil || !strings.Contains(err.Error(), "the upstream went away") {
		t.Errorf("no body: %v", err)
	}
}
