// The edge answers `Expect: 100-continue` itself, before it proxies the request (a handler of
// this package, like answers.go).
//
// Why: Go's HTTP server sends the interim 100 only when a handler first reads the body, and
// never once the handler has begun its final answer. Caddy's proxy reads the body in a goroutine
// of its own while the upstream may already answer: when an API process refused a request at
// once (an unsigned S3 PUT, a wrong API key), Caddy wrote the refusal, its body reader then
// waited for a body the client would not send without the 100, and the server, finishing the
// answer, waited for that reader's lock to drain the body. Neither side sent anything; the
// client gave up after its own timeout. Measured through `npm start`'s edge: 7-12 of 300
// unsigned PUTs of 256 KiB answered nothing in 10 s, and 5-6 more were 503 (goroutines of
// net/http's expectContinueReader and chunkWriter.writeHeader, dumped from Caddy with SIGABRT).
// Reading no bytes first makes the server send the 100 at once, so the body always comes.

package stupaedge

import (
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	caddy.RegisterModule(Continue{})
	httpcaddyfile.RegisterHandlerDirective("stupa_continue", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		h.Next()
		if h.NextArg() {
			return nil, h.ArgErr()
		}
		return Continue{}, nil
	})
}

// Continue sends the interim 100 Continue a request asks for before the next handler runs.
type Continue struct{}

func (Continue) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.stupa_continue", New: func() caddy.Module { return new(Continue) }}
}

func (Continue) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.Body != nil && r.ContentLength != 0 && r.ProtoAtLeast(1, 1) && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// A read of no bytes: net/http writes the 100 and returns at once.
		_, _ = r.Body.Read(nil)
	}
	return next.ServeHTTP(w, r)
}

var _ caddyhttp.MiddlewareHandler = Continue{}
