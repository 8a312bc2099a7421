// The edge's relay of Kubo's answers to allowed reads (#29): a handler of this package, like
// answers.go.
//
// Caddy's reverse_proxy copies an answer's body through the edge's memory: a read of every
// piece from Kubo and a write of it to the reader, 82% of the edge's time in those two system
// calls (a CPU profile of a 1 GiB read), 0.48-0.55 CPU s a GiB, and 0.72-0.76 of Kubo's own
// gateway read directly on two shared cores. Here the edge asks Kubo itself, on connections it
// keeps, and hands the body of an answer of known length to the reader's connection as one
// *io.LimitedReader over Kubo's *net.TCPConn: Go's net/http passes that to the reader's TCP
// connection's ReadFrom, which moves the bytes with splice(2), kernel to kernel.
//
// What this handler answers itself: a GET whose answer from a Kubo gateway is a 200 or 206 with
// a length. The gateways are asked in order, the next when one answers 404 (with Gateway.NoFetch,
// a peer that does not hold the content). Everything else (a gateway unreachable or failing, 404
// from every one, a redirect, an answer without a length such as a CAR or a directory listing, a
// 304) passes to the next handler, the reverse_proxy with every rule for those, which asks again. Over TLS or HTTP/2
// net/http copies instead of splicing, as the proxy did.
//
// Why not HAProxy, which splices (splice-auto): it has no access-decision hook without a Lua
// script of our own, and the edge's decision, memory, reports and TLS are Caddy's (docs/architecture/edge.md).

package stupaedge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

func init() {
	caddy.RegisterModule(Splice{})
	httpcaddyfile.RegisterHandlerDirective("stupa_splice", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		s := new(Splice)
		return s, s.UnmarshalCaddyfile(h.Dispenser)
	})
}

const (
	spliceDialTimeout = 3 * time.Second
	// Kept as Caddy's proxy keeps them to Kubo (keepalive 60s, keepalive_idle_conns 128).
	spliceIdleFor   = 60 * time.Second
	spliceIdleConns = 128
)

// Fields that describe one connection, never passed across the relay (RFC 9110, 7.6.1).
var hopByHop = []string{"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate", "Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// What the proxy rewrites in X-Ipfs-Path and Location: Kubo's /ipfs/<cid> becomes the reader's prefix.
var ipfsPrefix = regexp.MustCompile(`^/ipfs/[^/?]+`)

// Splice relays Kubo's answer to a GET as described above.
type Splice struct {
	// Kubo's gateways, host:port, in the order they are asked.
	To []string `json:"to"`
	// Request fields Kubo is never given, and answer fields the reader never gets; a name
	// ending in * is a prefix.
	DropUp   []string `json:"drop_up,omitempty"`
	DropDown []string `json:"drop_down,omitempty"`
	// The request field whose value replaces /ipfs/<cid> in the answer's X-Ipfs-Path.
	PrefixHeader string `json:"prefix_header,omitempty"`

	pools  []*kuboConns
	logger *zap.Logger
}

func (Splice) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.stupa_splice", New: func() caddy.Module { return new(Splice) }}
}

func (s *Splice) Provision(ctx caddy.Context) error {
	if len(s.To) == 0 {
		return fmt.Errorf("stupa_splice needs Kubo's gateways")
	}
	for _, to := range s.To {
		s.pools = append(s.pools, &kuboConns{addr: to})
	}
	s.logger = ctx.Logger()
	return nil
}

func (s *Splice) Cleanup() error {
	for _, p := range s.pools {
		p.closeAll()
	}
	return nil
}

func (s *Splice) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if r.Method != http.MethodGet || r.ContentLength != 0 {
		return next.ServeHTTP(w, r)
	}
	var c *kuboConn
	var resp *http.Response
	var pool *kuboConns
	for i, p := range s.pools {
		var err error
		c, resp, err = p.ask(r, s)
		if err != nil {
			if c := s.logger.Check(zap.DebugLevel, "kubo not asked directly"); c != nil {
				c.Write(zap.String("gateway", p.addr), zap.Error(err))
			}
			return next.ServeHTTP(w, r)
		}
		if resp.StatusCode != http.StatusNotFound || i == len(s.pools)-1 {
			pool = p
			break
		}
		c.close()
	}
	if (resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent) || resp.ContentLength < 0 || len(resp.TransferEncoding) > 0 {
		c.close()
		return next.ServeHTTP(w, r)
	}
	s.copyHeader(w.Header(), resp, r)
	w.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	w.WriteHeader(resp.StatusCode)

	// The part of the body read with the answer's head, then the rest from the socket itself.
	remaining := resp.ContentLength
	if n := int64(c.br.Buffered()); n > 0 {
		if n > remaining {
			n = remaining
		}
		head, _ := c.br.Peek(int(n))
		if _, err := w.Write(head); err != nil {
			c.close()
			return nil
		}
		_, _ = c.br.Discard(int(n))
		remaining -= n
	}
	stop := context.AfterFunc(r.Context(), func() { _ = c.conn.SetReadDeadline(time.Unix(1, 0)) })
	// io.Copy hands the *io.LimitedReader to the writer's ReadFrom (the LimitedReader has no WriteTo).
	copied, err := io.Copy(w, &io.LimitedReader{R: c.conn, N: remaining})
	// Kept only when the answer ended where it said and nothing followed it.
	if stop() && err == nil && copied == remaining && !resp.Close && c.br.Buffered() == 0 {
		pool.put(c)
		return nil
	}
	c.close()
	// The answer's head is out: a reader that went away or a Kubo that stopped short leaves a
	// short body, and net/http closes the reader's connection. There is nothing to answer.
	if err != nil {
		if c := s.logger.Check(zap.DebugLevel, "relay ended early"); c != nil {
			c.Write(zap.Int64("copied", copied), zap.Int64("expected", remaining), zap.Error(err))
		}
	}
	return nil
}

// ask sends r to Kubo on a kept connection (a second time on a new one when a kept connection
// turns out closed: a GET may be asked again) and reads the answer's head.
func (p *kuboConns) ask(r *http.Request, s *Splice) (*kuboConn, *http.Response, error) {
	for attempt := 0; ; attempt++ {
		c, reused := p.get()
		if c == nil {
			conn, err := (&net.Dialer{Timeout: spliceDialTimeout}).DialContext(r.Context(), "tcp", p.addr)
			if err != nil {
				return nil, nil, err
			}
			c = &kuboConn{conn: conn, br: bufio.NewReaderSize(conn, 16<<10)}
		}
		resp, err := c.roundTrip(r, p.addr, s)
		if err == nil {
			return c, resp, nil
		}
		c.close()
		if !reused || attempt > 0 || r.Context().Err() != nil {
			return nil, nil, err
		}
	}
}

func (c *kuboConn) roundTrip(r *http.Request, host string, s *Splice) (*http.Response, error) {
	stop := context.AfterFunc(r.Context(), func() { _ = c.conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	bw := bufio.NewWriterSize(c.conn, 4<<10)
	fmt.Fprintf(bw, "GET %s HTTP/1.1\r\nHost: %s\r\n", r.URL.RequestURI(), host)
	for name, values := range r.Header {
		if name == "Host" || name == "Content-Length" || name == "Expect" || matches(hopByHop, name) || matches(s.DropUp, name) {
			continue
		}
		for _, v := range values {
			// net/http's server took no CR or LF in a value, so each is one line.
			fmt.Fprintf(bw, "%s: %s\r\n", name, v)
		}
	}
	bw.WriteString("\r\n")
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(c.br, r)
	if err != nil {
		return nil, err
	}
	if !stop() {
		return nil, r.Context().Err()
	}
	return resp, nil
}

func (s *Splice) copyHeader(to http.Header, resp *http.Response, r *http.Request) {
	for name, values := range resp.Header {
		if name == "Content-Length" || matches(hopByHop, name) || matches(s.DropDown, name) {
			continue
		}
		for _, v := range values {
			to.Add(name, v)
		}
	}
	// As Caddy's proxy marks the answers it relays.
	to.Add("Via", fmt.Sprintf("%d.%d Caddy", resp.ProtoMajor, resp.ProtoMinor))
	if s.PrefixHeader != "" {
		if path := to.Get("X-Ipfs-Path"); path != "" {
			to.Set("X-Ipfs-Path", ipfsPrefix.ReplaceAllLiteralString(path, r.Header.Get(s.PrefixHeader)))
		}
	}
}

// matches tells whether name is one of names (case-insensitive), a name ending in * matching
// every name it begins.
func matches(names []string, name string) bool {
	for _, n := range names {
		if prefix, ok := strings.CutSuffix(n, "*"); ok {
			if len(name) >= len(prefix) && strings.EqualFold(name[:len(prefix)], prefix) {
				return true
			}
		} else if strings.EqualFold(n, name) {
			return true
		}
	}
	return false
}

type kuboConn struct {
	conn  net.Conn
	br    *bufio.Reader
	since time.Time
}

func (c *kuboConn) close() { _ = c.conn.Close() }

// kuboConns keeps idle connections to one Kubo gateway, the newest first out.
type kuboConns struct {
	addr   string
	mu     sync.Mutex
	idle   []*kuboConn
	closed bool
}

func (p *kuboConns) get() (*kuboConn, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if time.Since(c.since) < spliceIdleFor {
			return c, true
		}
		c.close()
	}
	return nil, false
}

func (p *kuboConns) put(c *kuboConn) {
	_ = c.conn.SetDeadline(time.Time{})
	c.since = time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || len(p.idle) >= spliceIdleConns {
		c.close()
		return
	}
	// The oldest go first when they have outlived spliceIdleFor.
	for len(p.idle) > 0 && time.Since(p.idle[0].since) >= spliceIdleFor {
		p.idle[0].close()
		p.idle = p.idle[1:]
	}
	p.idle = append(p.idle, c)
}

func (p *kuboConns) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, c := range p.idle {
		c.close()
	}
	p.idle = nil
}

func (s *Splice) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	s.To = d.RemainingArgs()
	for d.NextBlock(0) {
		option := d.Val()
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.ArgErr()
		}
		switch option {
		case "drop_up":
			s.DropUp = append(s.DropUp, args...)
		case "drop_down":
			s.DropDown = append(s.DropDown, args...)
		case "prefix_header":
			s.PrefixHeader = args[0]
		default:
			return d.Errf("unknown option %s", option)
		}
	}
	if len(s.To) == 0 {
		return errors.New("stupa_splice needs Kubo's gateways as its arguments")
	}
	return nil
}

var (
	_ caddy.Provisioner           = (*Splice)(nil)
	_ caddy.CleanerUpper          = (*Splice)(nil)
	_ caddyhttp.MiddlewareHandler = (*Splice)(nil)
	_ caddyfile.Unmarshaler       = (*Splice)(nil)
)
