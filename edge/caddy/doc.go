// Package stupaedge is Stupa's own Caddy modules, the edge's handlers: the memory of small
// answers and its purge (answers.go), 100 Continue before proxying (continue.go), Go's own
// error answers in the service's shape and a body's read errors as the reader's (errors.go),
// and Kubo's answers relayed with splice (splice.go). Each registers its modules and Caddyfile
// directive in init, so importing the package is enough; edge/caddyfile.ts writes the
// Caddyfile that uses them.
//
// This directory is a Go module of its own. Its go.mod requires Caddy's module at the version
// of stack/versions.json and nothing newer than Caddy's own go.mod asks for, so the edge is
// built from Caddy's dependencies: after a change, `go list -m all` here and in Caddy's module
// must give the same versions.
//
// The edge's binary is its command cmd/caddy: Caddy's command with Caddy's standard modules
// and this package. scripts/bootstrap.mjs (and deploy/edge.Dockerfile) builds it from a copy
// of this module whose go.mod replaces Caddy's module with a copy carrying our patches
// (stack/patches/caddy). `go vet ./...` and `go test ./...` here (CI: .ci/run) test the
// handlers against Caddy's unpatched module: nothing the tests check depends on the patches
// (splice.go's bytes moving kernel to kernel does; the built edge's tests check that).
package stupaedge
