// The edge's memory of small answers (#29): a handler of this package, built into the edge's
// Caddy (doc.go).
//
// A gateway read of a small immutable file is answered by the API from its own memory
// (api/answers.ts), but only after the edge asked it for the access decision: every such read
// still crossed to Node and paid the account's reads there, and 4 KiB reads through the edge ran
// at 0.67 of Kubo's gateway read directly (npm run bench -- --edge). Here the edge keeps what the
// API marked as keepable (X-Stupa-Keep: the account to meter) for EDGE_ANSWER_TTL_MS, keyed on
// everything the decision reads from the request (the host, the URI with any token, the reader's
// address, its token header, Origin and Accept), and answers the same request again itself.
//
// Why our own handler rather than a cache module (caddyserver/cache-handler, Souin): none is
// served by this machine's module proxy (403), and what is kept here is an access decision as
// much as bytes, which an HTTP cache keys and expires by the answer's own headers (the content
// is immutable, the reader's right to it is not).
//
// Bounds on what a kept answer may outlive:
//   - an access rule or token the account changes: the API purges the account's answers before
//     it confirms the change (stupa_answers_purge; core/gateway-access.ts), and an answer
//     whose decision was under way during a purge is not kept;
//   - everything else the decision knows (a hold released, the plan's bandwidth used up): the
//     time to live, one second, as long as the API itself remembers a hold.
//
// A hit is metered as the API's reads through the edge are: the access log's `account` field.

package stupaedge

import (
	"bytes"
	"crypto/subtle"
	"fmt"
	"io"
	"net"
	"net/http"
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
	caddy.RegisterModule(Answers{})
	caddy.RegisterModule(AnswersPurge{})
	httpcaddyfile.RegisterHandlerDirective("stupa_answers", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		a := new(Answers)
		return a, a.UnmarshalCaddyfile(h.Dispenser)
	})
	httpcaddyfile.RegisterHandlerDirective("stupa_answers_purge", func(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
		p := new(AnswersPurge)
		return p, p.UnmarshalCaddyfile(h.Dispenser)
	})
}

// The request headers the access decision and Kubo's answer depend on (beside the host, the URI
// and the reader's address): part of the key, and a read carrying one twice is not kept.
var keyHeaders = []string{"X-Gateway-Token", "Origin", "Accept"}

// A read with one of these is passed to the API, which answers it from its own memory: a range
// or a condition is a different answer, and a reader's no-cache asks for a fresh decision.
var passHeaders = []string{"Range", "If-Range", "If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since", "Cache-Control", "Pragma"}

type kept struct {
	account string
	header  http.Header
	body    []byte
	expires time.Time
}

// One memory per edge process, shared by the handler and the purge listener (each a module
// instance of its own).
type memory struct {
	mu        sync.Mutex
	entries   map[string]*kept
	byAccount map[string]map[string]struct{}
	// Every answer kept, oldest first: all live as long, so the oldest is also the first to
	// expire, and what goes when the memory is full. An answer kept again (or dropped) leaves
	// its old place here, skipped when it reaches the front.
	order []queued
	bytes int
	// Counts purges: an answer whose decision began before one is not kept.
	purges uint64
}

type queued struct {
	key string
	e   *kept
}

var answers = &memory{entries: map[string]*kept{}, byAccount: map[string]map[string]struct{}{}}

func (m *memory) drop(key string) {
	e := m.entries[key]
	if e == nil {
		return
	}
	delete(m.entries, key)
	m.bytes -= len(e.body)
	if keys := m.byAccount[e.account]; keys != nil {
		delete(keys, key)
		if len(keys) == 0 {
			delete(m.byAccount, e.account)
		}
	}
}

func (m *memory) get(key string, now time.Time) *kept {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[key]
	if e != nil && !now.Before(e.expires) {
		m.drop(key)
		return nil
	}
	return e
}

func (m *memory) generation() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.purges
}

// put keeps e unless a purge came after `since`. The front of the queue goes while it is expired
// or no longer kept, and further while the memory would hold more than maxTotal.
func (m *memory) put(key string, e *kept, since uint64, maxTotal int, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.purges != since {
		return
	}
	m.drop(key)
	for len(m.order) > 0 {
		front := m.order[0]
		current := m.entries[front.key] == front.e
		if current && now.Before(front.e.expires) && m.bytes+len(e.body) <= maxTotal {
			break
		}
		if current {
			m.drop(front.key)
		}
		m.order[0] = queued{}
		m.order = m.order[1:]
	}
	m.entries[key] = e
	m.order = append(m.order, queued{key, e})
	m.bytes += len(e.body)
	if m.byAccount[e.account] == nil {
		m.byAccount[e.account] = map[string]struct{}{}
	}
	m.byAccount[e.account][key] = struct{}{}
}

func (m *memory) purge(accounts []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.purges++
	for _, account := range accounts {
		for key := range m.byAccount[account] {
			m.drop(key)
		}
	}
}

// Answers keeps the answers the upstream marks with KeepHeader and answers the same read again.
type Answers struct {
	TTL caddy.Duration `json:"ttl,omitempty"`
	// The largest answer kept, and all of them together, in bytes.
	MaxAnswer int `json:"max_answer,omitempty"`
	MaxTotal  int `json:"max_total,omitempty"`
	// The upstream's mark: its value is the account the answer's bytes are metered against.
	KeepHeader string `json:"keep_header,omitempty"`
}

func (Answers) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.stupa_answers", New: func() caddy.Module { return new(Answers) }}
}

func (a *Answers) Provision(caddy.Context) error {
	if a.TTL <= 0 || a.MaxAnswer <= 0 || a.MaxTotal <= 0 || a.KeepHeader == "" {
		return fmt.Errorf("stupa_answers needs ttl, max_answer, max_total and keep_header")
	}
	return nil
}

func keyOf(r *http.Request) (string, bool) {
	if r.Method != http.MethodGet {
		return "", false
	}
	for _, h := range passHeaders {
		if _, ok := r.Header[http.CanonicalHeaderKey(h)]; ok {
			return "", false
		}
	}
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	var b strings.Builder
	for _, part := range []string{r.Host, r.URL.RequestURI(), ip} {
		b.WriteString(part)
		b.WriteByte(0)
	}
	for _, h := range keyHeaders {
		values := r.Header.Values(h)
		if len(values) > 1 {
			return "", false
		}
		if len(values) == 1 {
			b.WriteString(values[0])
		}
		b.WriteByte(0)
	}
	return b.String(), true
}

func (a *Answers) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	key, ok := keyOf(r)
	if !ok {
		// Not kept here, but the upstream may have marked its answer all the same (the API's own
		// rules keep a read with a condition or no-cache): the mark never reaches the reader. The
		// answer streams through (the recorder keeps ReadFrom, for splice.go).
		return next.ServeHTTP(caddyhttp.NewResponseRecorder(w, nil, func(_ int, header http.Header) bool {
			header.Del(a.KeepHeader)
			return false
		}), r)
	}
	now := time.Now()
	if e := answers.get(key, now); e != nil {
		header := w.Header()
		for name, values := range e.header {
			header[name] = values
		}
		header.Set("Cache-Status", "stupa-edge; hit")
		if extra, ok := r.Context().Value(caddyhttp.ExtraLogFieldsCtxKey).(*caddyhttp.ExtraLogFields); ok {
			extra.Add(zap.String("account", e.account))
		}
		w.WriteHeader(http.StatusOK)
		_, err := w.Write(e.body)
		return err
	}
	since := answers.generation()
	account := ""
	buf := new(bytes.Buffer)
	rec := caddyhttp.NewResponseRecorder(w, buf, func(status int, header http.Header) bool {
		// The mark never reaches the reader.
		account = header.Get(a.KeepHeader)
		header.Del(a.KeepHeader)
		length, err := strconv.Atoi(header.Get("Content-Length"))
		return account != "" && status == http.StatusOK && err == nil && length <= a.MaxAnswer
	})
	if err := next.ServeHTTP(rec, r); err != nil || !rec.Buffered() {
		return err
	}
	body := buf.Bytes()
	if strconv.Itoa(len(body)) == rec.Header().Get("Content-Length") {
		header := rec.Header().Clone()
		// Written fresh for every answer.
		header.Del("Date")
		e := &kept{account: account, header: header, body: append([]byte(nil), body...), expires: now.Add(time.Duration(a.TTL))}
		answers.put(key, e, since, a.MaxTotal, now)
	}
	return rec.WriteResponse()
}

func (a *Answers) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return eachOption(d, func(option, value string) error {
		switch option {
		case "ttl":
			ttl, err := caddy.ParseDuration(value)
			if err != nil {
				return d.Errf("ttl: %v", err)
			}
			a.TTL = caddy.Duration(ttl)
		case "max_answer", "max_total":
			n, err := strconv.Atoi(value)
			if err != nil {
				return d.Errf("%s: %v", option, err)
			}
			if option == "max_answer" {
				a.MaxAnswer = n
			} else {
				a.MaxTotal = n
			}
		case "keep_header":
			a.KeepHeader = value
		default:
			return d.Errf("unknown option %s", option)
		}
		return nil
	})
}

// eachOption calls set with each `name value` line of the directive's block.
func eachOption(d *caddyfile.Dispenser, set func(option, value string) error) error {
	d.Next()
	for d.NextBlock(0) {
		option := d.Val()
		if !d.NextArg() {
			return d.ArgErr()
		}
		if err := set(option, d.Val()); err != nil {
			return err
		}
	}
	return nil
}

// AnswersPurge forgets the kept answers of the accounts a POST names (one per line), for the
// service's processes only (SecretHeader carries the edge's secret). 204 once they are gone.
type AnswersPurge struct {
	Secret       string `json:"secret,omitempty"`
	SecretHeader string `json:"secret_header,omitempty"`
}

func (AnswersPurge) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "http.handlers.stupa_answers_purge", New: func() caddy.Module { return new(AnswersPurge) }}
}

func (p *AnswersPurge) Provision(caddy.Context) error {
	if p.Secret == "" || p.SecretHeader == "" {
		return fmt.Errorf("stupa_answers_purge needs secret and secret_header")
	}
	return nil
}

func (p *AnswersPurge) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	given := r.Header.Get(p.SecretHeader)
	if subtle.ConstantTimeCompare([]byte(given), []byte(p.Secret)) != 1 {
		return caddyhttp.Error(http.StatusForbidden, fmt.Errorf("no edge secret"))
	}
	if r.Method != http.MethodPost {
		return caddyhttp.Error(http.StatusMethodNotAllowed, fmt.Errorf("purges are POSTs"))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return caddyhttp.Error(http.StatusBadRequest, err)
	}
	answers.purge(strings.Fields(string(body)))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (p *AnswersPurge) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return eachOption(d, func(option, value string) error {
		switch option {
		case "secret":
			p.Secret = value
		case "secret_header":
			p.SecretHeader = value
		default:
			return d.Errf("unknown option %s", option)
		}
		return nil
	})
}

var (
	_ caddy.Provisioner           = (*Answers)(nil)
	_ caddyhttp.MiddlewareHandler = (*Answers)(nil)
	_ caddyfile.Unmarshaler       = (*Answers)(nil)
	_ caddy.Provisioner           = (*AnswersPurge)(nil)
	_ caddyhttp.MiddlewareHandler = (*AnswersPurge)(nil)
	_ caddyfile.Unmarshaler       = (*AnswersPurge)(nil)
)
