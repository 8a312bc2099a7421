package stupaedge

import (
	"encoding/json"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// The modules the package registers, as `caddy list-modules` shows them.
var moduleIDs = []string{
	"caddy.listeners.stupa_errors",
	"http.handlers.stupa_answers",
	"http.handlers.stupa_answers_purge",
	"http.handlers.stupa_body_errors",
	"http.handlers.stupa_continue",
	"http.handlers.stupa_splice",
}

func TestModulesRegistered(t *testing.T) {
	for _, id := range moduleIDs {
		info, err := caddy.GetModule(id)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		if got := string(info.New().CaddyModule().ID); got != id {
			t.Errorf("%s: its New gives a module of ID %s", id, got)
		}
	}
}

// Every directive of ours as edge/caddyfile.ts writes them: the order options, a listener
// wrapper in the global options, handlers in a site and in routes.
const edgeCaddyfile = `{
	admin off
	auto_https off
	order stupa_continue first
	order stupa_body_errors after stupa_continue
	servers {
		listener_wrappers {
			stupa_errors {
				xml 9000 9001
			}
		}
		protocols h1
	}
}

http://:8080 {
	stupa_continue
	stupa_body_errors
	route {
		stupa_answers {
			ttl 1000ms
			max_answer 65536
			max_total 67108864
			keep_header X-Stupa-Keep
		}
		stupa_splice 127.0.0.1:18081 127.0.0.1:18082 {
			drop_up X-Stupa-* Cookie
			drop_down Set-Cookie
			prefix_header X-Stupa-Prefix
		}
		respond 404
	}
}

http://:8090 {
	route {
		stupa_answers_purge {
			secret "s3 cret"
			secret_header X-Stupa-Edge-Secret
		}
	}
}
`

func adapt(t *testing.T, caddyfile string) ([]byte, error) {
	t.Helper()
	adapted, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), map[string]any{"filename": "Caddyfile"})
	for _, w := range warnings {
		t.Logf("adapt warning: %s", w.String())
	}
	return adapted, err
}

// ours collects, depth first and in order, the objects of the adapted JSON that are ours: a
// handler or listener wrapper named stupa_*.
func ours(v any, found *[]map[string]any) {
	switch v := v.(type) {
	case map[string]any:
		for _, key := range []string{"handler", "wrapper"} {
			if name, ok := v[key].(string); ok && strings.HasPrefix(name, "stupa_") {
				*found = append(*found, v)
			}
		}
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			ours(v[k], found)
		}
	case []any:
		for _, item := range v {
			ours(item, found)
		}
	}
}

func TestCaddyfileAdaptsAndProvisions(t *testing.T) {
	adapted, err := adapt(t, edgeCaddyfile)
	if err != nil {
		t.Fatalf("adapt: %v", err)
	}
	var config any
	if err := json.Unmarshal(adapted, &config); err != nil {
		t.Fatal(err)
	}
	var found []map[string]any
	ours(config, &found)
	var names []string
	byName := map[string]map[string]any{}
	for _, o := range found {
		name, _ := o["handler"].(string)
		if name == "" {
			name = o["wrapper"].(string)
		}
		names = append(names, name)
		byName[name] = o
	}
	// Per server (srv0 is :8080, srv1 :8090): the wrapper, then the handlers as they run.
	want := []string{
		"stupa_errors", "stupa_continue", "stupa_body_errors", "stupa_answers", "stupa_splice",
		"stupa_errors", "stupa_answers_purge",
	}
	if !slices.Equal(names, want) {
		t.Fatalf("our modules in the adapted config, in order: %v, want %v\n%s", names, want, adapted)
	}
	wantFields := map[string]map[string]any{
		"stupa_errors":   {"wrapper": "stupa_errors", "xml_ports": []any{"9000", "9001"}},
		"stupa_continue": {"handler": "stupa_continue"},
		"stupa_answers": {
			"handler": "stupa_answers", "ttl": float64(1e9), "max_answer": float64(65536),
			"max_total": float64(67108864), "keep_header": "X-Stupa-Keep",
		},
		"stupa_splice": {
			"handler": "stupa_splice", "to": []any{"127.0.0.1:18081", "127.0.0.1:18082"},
			"drop_up": []any{"X-Stupa-*", "Cookie"}, "drop_down": []any{"Set-Cookie"}, "prefix_header": "X-Stupa-Prefix",
		},
		"stupa_answers_purge": {"handler": "stupa_answers_purge", "secret": "s3 cret", "secret_header": "X-Stupa-Edge-Secret"},
		"stupa_body_errors":   {"handler": "stupa_body_errors"},
	}
	for name, fields := range wantFields {
		if !reflect.DeepEqual(byName[name], fields) {
			t.Errorf("%s adapted to %v, want %v", name, byName[name], fields)
		}
	}

	// Loaded and provisioned as `caddy validate` does (nothing listens).
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	cfg := new(caddy.Config)
	if err := json.Unmarshal(adapted, cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(cfg); err != nil {
		t.Fatalf("validate: %v", err)
	}
}

func TestCaddyfileRefusals(t *testing.T) {
	site := func(directives string) string {
		return "{\n\tadmin off\n\tauto_https off\n}\nhttp://:8080 {\n\troute {\n" + directives + "\n\t}\n}\n"
	}
	for _, tc := range []struct{ name, caddyfile, want string }{
		{"stupa_continue takes no argument", site("stupa_continue now"), "wrong argument count"},
		{"stupa_body_errors takes no argument", site("stupa_body_errors 400"), "wrong argument count"},
		{"stupa_answers ttl must be a duration", site("stupa_answers {\nttl soon\n}"), "ttl:"},
		{"stupa_answers max_answer must be a number", site("stupa_answers {\nmax_answer 64k\n}"), "max_answer:"},
		{"stupa_answers option needs a value", site("stupa_answers {\nttl\n}"), "wrong argument count"},
		{"stupa_answers unknown option", site("stupa_answers {\ncolour red\n}"), "unknown option colour"},
		{"stupa_answers_purge unknown option", site("stupa_answers_purge {\nsecret_file x\n}"), "unknown option secret_file"},
		{"stupa_splice needs gateways", site("stupa_splice {\ndrop_up Cookie\n}"), "needs Kubo's gateways"},
		{"stupa_splice option needs a value", site("stupa_splice 127.0.0.1:1 {\ndrop_up\n}"), "wrong argument count"},
		{"stupa_splice unknown option", site("stupa_splice 127.0.0.1:1 {\nshade x\n}"), "unknown option shade"},
		{
			"stupa_errors unknown option",
			"{\n\tservers {\n\t\tlistener_wrappers {\n\t\t\tstupa_errors {\n\t\t\t\tjson 80\n\t\t\t}\n\t\t}\n\t}\n}\nhttp://:8080 {\n\trespond 200\n}\n",
			`unknown option "json"`,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := adapt(t, tc.caddyfile)
			if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) {
				t.Fatalf("adapt: %v, want an error with %q", err, tc.want)
			}
		})
	}
}

// What Provision refuses: a handler without the options it cannot work without.
func TestCaddyfileIncompleteRefusedAtProvision(t *testing.T) {
	t.Setenv("XDG_DATA_HOME", t.TempDir())
	t.Setenv("XDG_CONFIG_HOME", t.TempDir())
	for _, tc := range []struct{ directive, want string }{
		{"stupa_answers {\nttl 1s\nmax_answer 10\nmax_total 100\n}", "stupa_answers needs ttl, max_answer, max_total and keep_header"},
		{"stupa_answers_purge {\nsecret x\n}", "stupa_answers_purge needs secret and secret_header"},
	} {
		adapted, err := adapt(t, "{\n\tadmin off\n\tauto_https off\n}\nhttp://:8080 {\n\troute {\n"+tc.directive+"\n\t}\n}\n")
		if err != nil {
			t.Fatalf("adapt: %v", err)
		}
		cfg := new(caddy.Config)
		if err := json.Unmarshal(adapted, cfg); err != nil {
			t.Fatal(err)
		}
		if err := caddy.Validate(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("validate: %v, want an error with %q", err, tc.want)
		}
	}
}
