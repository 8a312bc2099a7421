package stupaedge

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// refuse answers 403 at once without reading the body, as an API process refuses an unsigned
// PUT before its body came.
var refuse = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
	w.WriteHeader(http.StatusForbidden)
	return nil
})

// firstAnswer sends a PUT's head asking for 100 Continue, without its body, and reads the first
// status line the server sends; then the body, and the final status line.
func firstAnswer(t *testing.T, handler http.Handler, head string) (first, final string) {
	t.Helper()
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	first, err = br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the first answer: %v", err)
	}
	if !strings.HasPrefix(first, "HTTP/1.1 100 ") {
		return strings.TrimSpace(first), ""
	}
	if line, _ := br.ReadString('\n'); line != "\r\n" {
		t.Fatalf("the interim answer ends with %q", line)
	}
	_, _ = io.WriteString(conn, "hello")
	final, err = br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading the final answer: %v", err)
	}
	return strings.TrimSpace(first), strings.TrimSpace(final)
}

const expectingPut = "PUT /bucket/key HTTP/1.1\r\nHost: edge\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"

func TestContinueSendsTheInterimAnswerFirst(t *testing.T) {
	withContinue := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = Continue{}.ServeHTTP(w, r, refuse)
	})
	first, final := firstAnswer(t, withContinue, expectingPut)
	if first != "HTTP/1.1 100 Continue" || final != "HTTP/1.1 403 Forbidden" {
		t.Fatalf("answers %q then %q, want 100 Continue then 403", first, final)
	}

	// Without it, Go's server never sends the 100 once the handler answered: the client that
	// waits for it before sending the body is answered without it (here at once; behind
	// Caddy's proxy, which reads the body in a goroutine of its own, not at all).
	without := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _ = refuse(w, r) })
	if first, _ := firstAnswer(t, without, expectingPut); first != "HTTP/1.1 403 Forbidden" {
		t.Fatalf("without the handler the first answer is %q", first)
	}
}

func TestContinueOnlyWhenAsked(t *testing.T) {
	var reached atomic.Int32
	next := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		reached.Add(1)
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		_, err = w.Write(body)
		return err
	})
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _ = Continue{}.ServeHTTP(w, r, next) })
	// No Expect, or no body: the final answer comes first, and the request reaches the next handler.
	for _, head := range []string{
		"PUT /k HTTP/1.1\r\nHost: edge\r\nContent-Length: 5\r\n\r\nhello",
		"PUT /k HTTP/1.1\r\nHost: edge\r\nContent-Length: 0\r\nExpect: 100-continue\r\n\r\n",
		"GET /k HTTP/1.1\r\nHost: edge\r\n\r\n",
	} {
		if first, _ := firstAnswer(t, handler, head); first != "HTTP/1.1 200 OK" {
			t.Errorf("%q: first answer %q", head, first)
		}
	}
	if n := reached.Load(); n != 3 {
		t.Errorf("the next handler ran %d times, want 3", n)
	}
}
