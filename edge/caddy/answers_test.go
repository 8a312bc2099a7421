package stupaedge

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

// freshMemory gives the test an empty memory of answers (one per process, shared by the
// handler and the purge listener).
func freshMemory(t *testing.T) {
	t.Helper()
	old := answers
	answers = &memory{entries: map[string]*kept{}, byAccount: map[string]map[string]struct{}{}}
	t.Cleanup(func() { answers = old })
}

// api stands for the service's answer behind stupa_answers: it counts the requests that reach it.
type api struct {
	calls   int
	status  int
	account string // the X-Stupa-Keep mark; none when empty
	body    string
	during  func() // runs while the decision is under way
}

func (u *api) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	u.calls++
	if u.during != nil {
		u.during()
	}
	if u.account != "" {
		w.Header().Set("X-Stupa-Keep", u.account)
	}
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", strconv.Itoa(len(u.body)))
	w.Header().Set("Date", "Mon, 01 Jan 2024 00:00:00 GMT")
	w.WriteHeader(u.status)
	_, err := w.Write([]byte(u.body))
	return err
}

func keeper() *Answers {
	return &Answers{TTL: caddy.Duration(time.Minute), MaxAnswer: 64, MaxTotal: 1 << 10, KeepHeader: "X-Stupa-Keep"}
}

func read(t *testing.T, a *Answers, up *api, r *http.Request) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	if err := a.ServeHTTP(w, r, up); err != nil {
		t.Fatalf("ServeHTTP: %v", err)
	}
	if w.Header().Get("X-Stupa-Keep") != "" {
		t.Errorf("the keep mark reached the reader: %v", w.Header())
	}
	return w
}

func gatewayRead() *http.Request {
	r := httptest.NewRequest(http.MethodGet, "http://bafy.ipfs.example/a.txt?token=t1", nil)
	r.RemoteAddr = "192.0.2.7:40000"
	r.Header.Set("Accept", "*/*")
	return r
}

func TestAnswersProvision(t *testing.T) {
	if err := keeper().Provision(caddy.Context{}); err != nil {
		t.Errorf("complete: %v", err)
	}
	for name, a := range map[string]*Answers{
		"no ttl":         {MaxAnswer: 1, MaxTotal: 1, KeepHeader: "K"},
		"no max_answer":  {TTL: 1, MaxTotal: 1, KeepHeader: "K"},
		"no max_total":   {TTL: 1, MaxAnswer: 1, KeepHeader: "K"},
		"no keep_header": {TTL: 1, MaxAnswer: 1, MaxTotal: 1},
	} {
		if err := a.Provision(caddy.Context{}); err == nil {
			t.Errorf("%s: provisioned", name)
		}
	}
	if err := (&AnswersPurge{Secret: "s"}).Provision(caddy.Context{}); err == nil {
		t.Error("a purge without secret_header: provisioned")
	}
	if err := (&AnswersPurge{Secret: "s", SecretHeader: "H"}).Provision(caddy.Context{}); err != nil {
		t.Errorf("a complete purge: %v", err)
	}
}

func TestAnswersKeepsAMarkedAnswerAndAnswersAgain(t *testing.T) {
	freshMemory(t)
	a, up := keeper(), &api{status: 200, account: "acct-1", body: "small file"}
	first := read(t, a, up, gatewayRead())
	if first.Code != 200 || first.Body.String() != "small file" || first.Header().Get("Cache-Status") != "" {
		t.Fatalf("first read: %d %q %v", first.Code, first.Body, first.Header())
	}
	// The same read again, from another port of the same address: the edge answers it itself.
	again := gatewayRead()
	again.RemoteAddr = "192.0.2.7:40001"
	second := read(t, a, up, again)
	if up.calls != 1 {
		t.Fatalf("the API was asked %d times, want once", up.calls)
	}
	if second.Code != 200 || second.Body.String() != "small file" || second.Header().Get("Cache-Status") != "stupa-edge; hit" {
		t.Fatalf("second read: %d %q %v", second.Code, second.Body, second.Header())
	}
	if second.Header().Get("Content-Type") != "text/plain" || second.Header().Get("Content-Length") != "10" {
		t.Errorf("the kept answer's fields: %v", second.Header())
	}
	if second.Header().Get("Date") != "" {
		t.Errorf("a kept Date was answered again: %v", second.Header())
	}
}

// Everything the access decision reads is part of the key: a read that differs in any of them
// is asked again.
func TestAnswersKeyHoldsWhatTheDecisionReads(t *testing.T) {
	for name, change := range map[string]func(r *http.Request){
		"host":             func(r *http.Request) { r.Host = "bafz.ipfs.example" },
		"token in the URI": func(r *http.Request) { r.URL.RawQuery = "token=t2"; r.RequestURI = "" },
		"path":             func(r *http.Request) { r.URL.Path = "/b.txt" },
		"reader address":   func(r *http.Request) { r.RemoteAddr = "192.0.2.8:40000" },
		"token header":     func(r *http.Request) { r.Header.Set("X-Gateway-Token", "t") },
		"origin":           func(r *http.Request) { r.Header.Set("Origin", "https://app.example") },
		"accept":           func(r *http.Request) { r.Header.Set("Accept", "application/vnd.ipld.raw") },
	} {
		t.Run(name, func(t *testing.T) {
			freshMemory(t)
			a, up := keeper(), &api{status: 200, account: "acct-1", body: "small file"}
			read(t, a, up, gatewayRead())
			other := gatewayRead()
			change(other)
			if w := read(t, a, up, other); w.Header().Get("Cache-Status") != "" || up.calls != 2 {
				t.Fatalf("answered from memory (%d calls to the API): %v", up.calls, w.Header())
			}
		})
	}
}

// What is never kept: each read is asked twice and both reach the API.
func TestAnswersForgetsWhatItMustNotKeep(t *testing.T) {
	for _, tc := range []struct {
		name  string
		up    api
		setup func(r *http.Request)
	}{
		{"no keep mark", api{status: 200, body: "x"}, nil},
		{"not a 200", api{status: 404, account: "acct-1", body: "x"}, nil},
		{"a 206", api{status: 206, account: "acct-1", body: "x"}, nil},
		{"larger than max_answer", api{status: 200, account: "acct-1", body: strings.Repeat("x", 65)}, nil},
		{"a HEAD", api{status: 200, account: "acct-1", body: "x"}, func(r *http.Request) { r.Method = http.MethodHead }},
		{"a range", api{status: 200, account: "acct-1", body: "x"}, func(r *http.Request) { r.Header.Set("Range", "bytes=0-0") }},
		{"a condition", api{status: 200, account: "acct-1", body: "x"}, func(r *http.Request) { r.Header.Set("If-None-Match", `"e"`) }},
		{"the reader's no-cache", api{status: 200, account: "acct-1", body: "x"}, func(r *http.Request) { r.Header.Set("Cache-Control", "no-cache") }},
		{"a key field twice", api{status: 200, account: "acct-1", body: "x"}, func(r *http.Request) { r.Header.Add("Accept", "text/html") }},
		{"a purge while the API decided", api{status: 200, account: "acct-1", body: "x", during: func() { answers.purge(nil) }}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			freshMemory(t)
			a, up := keeper(), tc.up
			for range 2 {
				r := gatewayRead()
				if tc.setup != nil {
					tc.setup(r)
				}
				w := read(t, a, &up, r)
				if w.Code != up.status || w.Header().Get("Cache-Status") != "" {
					t.Fatalf("answered %d %v", w.Code, w.Header())
				}
			}
			if up.calls != 2 {
				t.Fatalf("the API was asked %d times, want 2", up.calls)
			}
		})
	}
}

func TestAnswersPurgeForgetsAnAccountsAnswers(t *testing.T) {
	freshMemory(t)
	a := keeper()
	mine, theirs := &api{status: 200, account: "acct-1", body: "mine"}, &api{status: 200, account: "acct-2", body: "theirs"}
	other := func() *http.Request { r := gatewayRead(); r.URL.Path = "/theirs"; return r }
	read(t, a, mine, gatewayRead())
	read(t, a, theirs, other())

	p := &AnswersPurge{Secret: "s3cret", SecretHeader: "X-Stupa-Edge-Secret"}
	purge := func(method, secret, body string) (int, error) {
		r := httptest.NewRequest(method, "http://edge/purge", strings.NewReader(body))
		if secret != "" {
			r.Header.Set("X-Stupa-Edge-Secret", secret)
		}
		w := httptest.NewRecorder()
		err := p.ServeHTTP(w, r, nil)
		return w.Code, err
	}
	var refused caddyhttp.HandlerError
	if _, err := purge(http.MethodPost, "wrong", "acct-1"); !errors.As(err, &refused) || refused.StatusCode != 403 {
		t.Errorf("a wrong secret: %v, want 403", err)
	}
	if _, err := purge(http.MethodPost, "", "acct-1"); !errors.As(err, &refused) || refused.StatusCode != 403 {
		t.Errorf("no secret: %v, want 403", err)
	}
	if _, err := purge(http.MethodGet, "s3cret", ""); !errors.As(err, &refused) || refused.StatusCode != 405 {
		t.Errorf("a GET: %v, want 405", err)
	}
	if got := read(t, a, mine, gatewayRead()); got.Header().Get("Cache-Status") == "" {
		t.Fatal("a refused purge forgot the answer")
	}
	if code, err := purge(http.MethodPost, "s3cret", "acct-0\nacct-1\n"); err != nil || code != 204 {
		t.Fatalf("purge: %d %v, want 204", code, err)
	}
	if got := read(t, a, mine, gatewayRead()); got.Header().Get("Cache-Status") != "" || mine.calls != 2 {
		t.Errorf("a purged account's answer was answered again (%d calls)", mine.calls)
	}
	if got := read(t, a, theirs, other()); got.Header().Get("Cache-Status") == "" || theirs.calls != 1 {
		t.Errorf("another account's answer was forgotten (%d calls)", theirs.calls)
	}
}

func TestMemoryExpiresAndMakesRoom(t *testing.T) {
	m := &memory{entries: map[string]*kept{}, byAccount: map[string]map[string]struct{}{}}
	now := time.Now()
	entry := func(at time.Time, size int) *kept {
		return &kept{account: "a", body: make([]byte, size), expires: at.Add(time.Second)}
	}
	m.put("k1", entry(now, 4), 0, 10, now)
	if m.get("k1", now.Add(999*time.Millisecond)) == nil {
		t.Fatal("forgotten before its time to live")
	}
	if m.get("k1", now.Add(time.Second)) != nil {
		t.Fatal("answered after its time to live")
	}
	// Full: the oldest goes first.
	m.put("k1", entry(now, 4), 0, 10, now)
	m.put("k2", entry(now, 4), 0, 10, now)
	m.put("k3", entry(now, 4), 0, 10, now)
	if m.get("k1", now) != nil || m.get("k2", now) == nil || m.get("k3", now) == nil || m.bytes != 8 {
		t.Fatalf("after a third answer in 10 bytes: k1 %v k2 %v k3 %v, %d bytes", m.get("k1", now) != nil, m.get("k2", now) != nil, m.get("k3", now) != nil, m.bytes)
	}
	// Kept again: one copy, counted once.
	m.put("k3", entry(now, 2), 0, 10, now)
	if m.bytes != 6 || len(m.byAccount["a"]) != 2 {
		t.Fatalf("after keeping k3 again: %d bytes, %d keys", m.bytes, len(m.byAccount["a"]))
	}
	// A decision that began before a purge is not kept.
	since := m.generation()
	m.purge([]string{"b"})
	m.put("k4", entry(now, 1), since, 10, now)
	if m.get("k4", now) != nil {
		t.Fatal("kept an answer decided across a purge")
	}
}
