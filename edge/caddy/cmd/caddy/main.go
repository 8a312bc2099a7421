// The edge's binary: Caddy's own command line (caddycmd.Main: run, adapt, validate,
// list-modules...) with Caddy's standard modules, as Caddy's release is built, and Stupa's
// (the package in edge/caddy, registered by its init functions). scripts/bootstrap.mjs builds
// it against Caddy's module with our patches (stack/versions.json, the caddy component).
package main

import (
	// The time zone database inside the binary, as Caddy's own command has it.
	_ "time/tzdata"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "stupa/edge/caddy"
)

func main() {
	caddycmd.Main()
}
