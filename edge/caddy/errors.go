// The edge's answers to requests Go's HTTP server cannot parse, in the service's error shape
// (a listener wrapper of this package, and a handler, like answers.go).
//
// Why: net/http answers an unparsable request itself, before any Caddy handler runs (a header
// line without a colon, headers over the limit, an unknown HTTP version, no Host, a URI that
// does not parse), by writing a text/plain answer straight to the connection. Behind the edge
// every error is the surface's own JSON (S3's XML), as the API processes answer the same
// requests (api/listen.ts). No Caddy option changes those answers, so this listener wrapper
// rewrites them as they are written: net/http writes each in one Write, with exactly the
// headers matched below and no Date, which none of Caddy's own answers lacks. Every other write
// passes through untouched (one prefix comparison).
//
// Placed before TLS: on an HTTPS listener it sees only ciphertext and changes nothing (a wrapper
// after TLS would hide the *tls.Conn that net/http needs for HTTP/2), so there Go's own answers
// stay text (docs/limits.md).

package stupaedge

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(ErrorAnswers{})
	caddy.RegisterModule(BodyErrors{})
	httpcaddyfile.RegisterHandlerDirective("stupa_body_errors", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		h.Next()
		if h.NextArg() {
			return nil, h.ArgErr()
		}
		return BodyErrors{}, nil
	})
}

// ErrorAnswers wraps a listener's connections so net/http's own error answers come in the
// surface's shape: XML on the listed ports (S3), JSON on every other.
type ErrorAnswers struct {
	XMLPorts []string `json:"xml_ports,omitempty"`
}

func (ErrorAnswers) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "caddy.listeners.stupa_errors", New: func() caddy.Module { return new(ErrorAnswers) }}
}

// UnmarshalCaddyfile reads `stupa_errors { xml <port>... }`.
func (e *ErrorAnswers) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	for d.NextBlock(0) {
		switch d.Val() {
		case "xml":
			e.XMLPorts = append(e.XMLPorts, d.RemainingArgs()...)
		default:
			return d.Errf("unknown option %q", d.Val())
		}
	}
	return nil
}

func (e ErrorAnswers) WrapListener(ln net.Listener) net.Listener {
	xmlShape := false
	if _, port, err := net.SplitHostPort(ln.Addr().String()); err == nil {
		for _, p := range e.XMLPorts {
			xmlShape = xmlShape || p == port
		}
	}
	return &errorListener{Listener: ln, xml: xmlShape}
}

type errorListener struct {
	net.Listener
	xml bool
}

func (l *errorListener) Accept() (net.Conn, error) {
	conn, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &errorConn{Conn: conn, xml: l.xml}, nil
}

type errorConn struct {
	net.Conn
	xml bool
}

// net/http's own answers (server.go, conn.serve): the status line, these headers, the text.
var (
	ownAnswer    = regexp.MustCompile(`^HTTP/1\.1 ([45]\d\d) [^\r\n]*\r\nContent-Type: text/plain; charset=utf-8\r\nConnection: close\r\n\r\n([^\r\n]*)$`)
	statusPrefix = []byte("HTTP/1.1 ")
	statusWords  = regexp.MustCompile(`^\d{3} [^:]*(: |$)`)
)

func (c *errorConn) Write(p []byte) (int, error) {
	if len(p) > len(statusPrefix) && bytes.HasPrefix(p, statusPrefix) && (p[9] == '4' || p[9] == '5') {
		if m := ownAnswer.FindSubmatch(p); m != nil {
			if _, err := c.Conn.Write(answer(string(m[1]), string(m[2]), c.xml)); err != nil {
				return 0, err
			}
			return len(p), nil
		}
	}
	return c.Conn.Write(p)
}

// What net/http's server looks for on its connection: kept through the wrapper.
func (c *errorConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}

func (c *errorConn) ReadFrom(r io.Reader) (int64, error) {
	if rf, ok := c.Conn.(io.ReaderFrom); ok {
		return rf.ReadFrom(r)
	}
	return io.Copy(struct{ io.Writer }{c.Conn}, r)
}

// answer is the API processes' answer to the same request (api/listen.ts): 431 for headers over
// the limit, 400 for anything else that does not parse.
func answer(status, text string, xmlShape bool) []byte {
	code, reason, statusText := 400, "MALFORMED_REQUEST", "Bad Request"
	if status == "431" {
		code, reason, statusText = 431, "HEADERS_TOO_LARGE", "Request Header Fields Too Large"
	}
	// net/http's text: "400 Bad Request", "400 Bad Request: missing required Host header",
	// "Unsupported transfer encoding": what follows the status, if anything, says why.
	why := statusWords.ReplaceAllString(text, "")
	if code == 431 {
		why = "its headers are too large"
	}
	details := "the HTTP request could not be parsed"
	if why != "" {
		details += " (" + why + ")"
	}
	var contentType string
	var body []byte
	if xmlShape {
		contentType = "application/xml"
		var escaped bytes.Buffer
		_ = xml.EscapeText(&escaped, []byte(details))
		body = []byte(`<?xml version="1.0" encoding="UTF-8"?>` + "\n" + `<Error><Code>InvalidRequest</Code><Message>` +
			escaped.String() + `</Message><Resource>/</Resource><RequestId>0</RequestId></Error>`)
	} else {
		contentType = "application/json; charset=utf-8"
		type shape struct {
			Reason  string `json:"reason"`
			Details string `json:"details"`
		}
		body, _ = json.Marshal(map[string]shape{"error": {reason, details}})
	}
	head := "HTTP/1.1 " + strconv.Itoa(code) + " " + statusText + "\r\nContent-Type: " + contentType +
		"\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\nConnection: close\r\n\r\n"
	return append([]byte(head), body...)
}

// BodyErrors makes a request whose body could not be read (a malformed chunk, a body cut short)
// the reader's error, 400, where the proxy would report it as the upstream's (502, which the
// edge answers as the service being away: 503). The Caddyfile's handle_errors words it.
type BodyErrors struct{}

func (BodyErrors) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.stupa_body_errors", New: func() caddy.Module { return new(BodyErrors) }}
}

func (BodyErrors) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.Body == nil || r.Body == http.NoBody {
		return next.ServeHTTP(w, r)
	}
	body := &watchedBody{ReadCloser: r.Body}
	r.Body = body
	err := next.ServeHTTP(w, r)
	if err != nil {
		if failed := body.failure(); failed != nil {
			return caddyhttp.Error(http.StatusBadRequest, fmt.Errorf("the request's body could not be read: %w", failed))
		}
	}
	return err
}

// watchedBody keeps the first error reading the reader's body gave, other than its end. A read
// after the proxy closed the body (the upstream failed first) is not the reader's doing.
type watchedBody struct {
	io.ReadCloser
	mu     sync.Mutex
	failed error
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF && !errors.Is(err, http.ErrBodyReadAfterClose) {
		b.mu.Lock()
		if b.failed == nil {
			b.failed = err
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *watchedBody) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.failed
}

var (
	_ caddyhttp.MiddlewareHandler = BodyErrors{}
	_ caddy.ListenerWrapper       = ErrorAnswers{}
	_ caddyfile.Unmarshaler       = (*ErrorAnswers)(nil)
)
