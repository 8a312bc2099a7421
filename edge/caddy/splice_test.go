package stupaedge

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// kubo is a stand-in for a Kubo gateway on loopback: it answers by path, keeps the last
// request's fields and counts the connections it was given.
type kubo struct {
	srv   *httptest.Server
	conns atomic.Int32
	mu    sync.Mutex
	seen  http.Header
}

func newKubo(t *testing.T, answer func(w http.ResponseWriter, r *http.Request)) *kubo {
	t.Helper()
	k := &kubo{}
	k.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.seen = r.Header.Clone()
		k.mu.Unlock()
		answer(w, r)
	}))
	k.srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		if state == http.StateNew {
			k.conns.Add(1)
		}
	}
	k.srv.Start()
	t.Cleanup(k.srv.Close)
	return k
}

func (k *kubo) addr() string { return k.srv.Listener.Addr().String() }

func (k *kubo) lastRequest() http.Header {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.seen
}

// A gateway's answers: a file of known length, a range of it, 404, a CAR without a length, a redirect.
func gateway(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/ipfs/bafyfile/a.txt":
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("X-Ipfs-Path", "/ipfs/bafyfile/a.txt")
		w.Header().Set("Set-Cookie", "kubo=1")
		w.Header().Set("Proxy-Authenticate", "Basic")
		if r.Header.Get("Range") == "bytes=0-3" {
			w.Header().Set("Content-Range", "bytes 0-3/15")
			w.Header().Set("Content-Length", "4")
			w.WriteHeader(http.StatusPartialContent)
			_, _ = w.Write([]byte("from"))
			return
		}
		w.Header().Set("Content-Length", "15")
		_, _ = w.Write([]byte("from the kubo 1"))
	case "/ipfs/bafycar":
		w.Header().Set("Content-Type", "application/vnd.ipld.car")
		w.(http.Flusher).Flush() // no length: chunked
		_, _ = w.Write([]byte("car bytes"))
	case "/ipfs/bafydir":
		http.Redirect(w, r, "/ipfs/bafydir/", http.StatusMovedPermanently)
	default:
		http.NotFound(w, r)
	}
}

type nextHandler struct{ calls atomic.Int32 }

func (n *nextHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	n.calls.Add(1)
	w.WriteHeader(http.StatusTeapot)
	return nil
}

func provisioned(t *testing.T, s *Splice) *Splice {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := s.Provision(ctx); err != nil {
		t.Fatalf("provision: %v", err)
	}
	t.Cleanup(func() { _ = s.Cleanup() })
	return s
}

func TestSpliceProvision(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	if err := new(Splice).Provision(ctx); err == nil || !strings.Contains(err.Error(), "needs Kubo's gateways") {
		t.Errorf("no gateways: %v", err)
	}
	s := provisioned(t, &Splice{To: []string{"127.0.0.1:1", "127.0.0.1:2"}})
	if len(s.pools) != 2 || s.pools[0].addr != "127.0.0.1:1" || s.pools[1].addr != "127.0.0.1:2" {
		t.Errorf("pools: %+v", s.pools)
	}
}

func TestSpliceRelaysKubosAnswer(t *testing.T) {
	k := newKubo(t, gateway)
	s := provisioned(t, &Splice{To: []string{k.addr()}, DropUp: []string{"X-Stupa-*"}, DropDown: []string{"set-cookie"}, PrefixHeader: "X-Stupa-Prefix"})
	next := &nextHandler{}
	for i := range 3 {
		r := httptest.NewRequest(http.MethodGet, "http://gw.example/ipfs/bafyfile/a.txt", nil)
		r.Header.Set("X-Stupa-Prefix", "/ipfs/bafyroot/dir")
		r.Header.Set("X-Stupa-Edge-Secret", "never for kubo")
		r.Header.Set("Accept", "text/plain")
		w := httptest.NewRecorder()
		if err := s.ServeHTTP(w, r, next); err != nil {
			t.Fatal(err)
		}
		h := w.Header()
		if w.Code != 200 || w.Body.String() != "from the kubo 1" || h.Get("Content-Length") != "15" || h.Get("Content-Type") != "text/plain" {
			t.Fatalf("read %d: %d %q %v", i, w.Code, w.Body, h)
		}
		if h.Get("Via") != "1.1 Caddy" || h.Get("X-Ipfs-Path") != "/ipfs/bafyroot/dir/a.txt" {
			t.Errorf("Via %q, X-Ipfs-Path %q", h.Get("Via"), h.Get("X-Ipfs-Path"))
		}
		if h.Get("Set-Cookie") != "" || h.Get("Proxy-Authenticate") != "" {
			t.Errorf("a dropped or hop-by-hop field reached the reader: %v", h)
		}
		seen := k.lastRequest()
		if seen.Get("Accept") != "text/plain" || seen.Get("X-Stupa-Edge-Secret") != "" || seen.Get("X-Stupa-Prefix") != "" {
			t.Errorf("kubo was given %v", seen)
		}
	}
	if next.calls.Load() != 0 {
		t.Errorf("the next handler ran %d times", next.calls.Load())
	}
	// Every read on the one connection the relay keeps.
	if n := k.conns.Load(); n != 1 {
		t.Errorf("kubo got %d connections for 3 reads, want 1", n)
	}

	r := httptest.NewRequest(http.MethodGet, "http://gw.example/ipfs/bafyfile/a.txt", nil)
	r.Header.Set("Range", "bytes=0-3")
	w := httptest.NewRecorder()
	if err := s.ServeHTTP(w, r, next); err != nil || w.Code != 206 || w.Body.String() != "from" || w.Header().Get("Content-Range") != "bytes 0-3/15" {
		t.Errorf("a range: %v %d %q %v", err, w.Code, w.Body, w.Header())
	}
}

func TestSpliceAsksTheNextGatewayAfterA404(t *testing.T) {
	first := newKubo(t, func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) })
	second := newKubo(t, gateway)
	s := provisioned(t, &Splice{To: []string{first.addr(), second.addr()}})
	next := &nextHandler{}
	r := httptest.NewRequest(http.MethodGet, "http://gw.example/ipfs/bafyfile/a.txt", nil)
	w := httptest.NewRecorder()
	if err := s.ServeHTTP(w, r, next); err != nil || w.Code != 200 || w.Body.String() != "from the kubo 1" {
		t.Fatalf("%v %d %q", err, w.Code, w.Body)
	}
	if first.conns.Load() != 1 || next.calls.Load() != 0 {
		t.Errorf("first gateway: %d connections; next handler: %d", first.conns.Load(), next.calls.Load())
	}
}

// What the relay does not answer passes to the next handler (the proxy, which asks again).
func TestSpliceFallsThrough(t *testing.T) {
	k := newKubo(t, gateway)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	unreachable := closed.Addr().String()
	closed.Close()
	for _, tc := range []struct {
		name    string
		to      []string
		method  string
		path    string
		body    string
		askKubo bool
	}{
		{"a POST", []string{k.addr()}, http.MethodPost, "/ipfs/bafyfile/a.txt", "", false},
		{"a HEAD", []string{k.addr()}, http.MethodHead, "/ipfs/bafyfile/a.txt", "", false},
		{"a GET with a body", []string{k.addr()}, http.MethodGet, "/ipfs/bafyfile/a.txt", "body", false},
		{"404 from every gateway", []string{k.addr(), k.addr()}, http.MethodGet, "/ipfs/bafynone", "", true},
		{"an answer without a length", []string{k.addr()}, http.MethodGet, "/ipfs/bafycar", "", true},
		{"a redirect", []string{k.addr()}, http.MethodGet, "/ipfs/bafydir", "", true},
		{"a gateway unreachable", []string{unreachable, k.addr()}, http.MethodGet, "/ipfs/bafyfile/a.txt", "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := provisioned(t, &Splice{To: tc.to})
			next := &nextHandler{}
			before := k.conns.Load()
			var r *http.Request
			if tc.body != "" {
				r = httptest.NewRequest(tc.method, "http://gw.example"+tc.path, strings.NewReader(tc.body))
			} else {
				r = httptest.NewRequest(tc.method, "http://gw.example"+tc.path, nil)
			}
			w := httptest.NewRecorder()
			if err := s.ServeHTTP(w, r, next); err != nil {
				t.Fatal(err)
			}
			if next.calls.Load() != 1 || w.Code != http.StatusTeapot {
				t.Fatalf("next handler ran %d times; answered %d %q", next.calls.Load(), w.Code, w.Body)
			}
			if asked := k.conns.Load() > before; asked != tc.askKubo {
				t.Errorf("kubo asked: %v, want %v", asked, tc.askKubo)
			}
		})
	}
}

func TestSpliceMatches(t *testing.T) {
	names := []string{"X-Stupa-*", "cookie"}
	for name, want := range map[string]bool{
		"X-Stupa-Secret": true, "x-stupa-path": true, "X-Stupa": false, "Cookie": true, "Cookies": false, "Accept": false,
	} {
		if got := matches(names, name); got != want {
			t.Errorf("matches(%v, %q) = %v", names, name, got)
		}
	}
}

var _ caddyhttp.Handler = (*nextHandler)(nil)
