# The edge's image: Caddy v2.11.9 with Stupa's patches (stack/patches/caddy: S3 user metadata
# names keep their case; a limited body keeps splice) and handlers (edge/caddy: small answers
# kept for a second, 100 Continue before proxying, Go's own error answers in the service's
# shape, Kubo's answers relayed with splice), the same build the local stack runs
# (scripts/bootstrap.mjs, stack/versions.json): edge/caddy is a Go module of ours whose
# cmd/caddy is Caddy's command with its standard modules and ours; its go.mod requires Caddy's
# module (and so Caddy's own dependencies), replaced here by a copy with the patches applied.
# Build from the repository root:
#   docker build -f deploy/edge.Dockerfile -t stupa-edge .
FROM golang:1.26-bookworm AS build
COPY stack/patches/caddy /patches
COPY edge/caddy/go.mod edge/caddy/go.sum /stupa/
RUN cd /stupa && go mod download
COPY edge/caddy /stupa
# Caddy's module at the version edge/caddy/go.mod requires (downloaded above), patched.
RUN cd /stupa && dir=$(go list -m -f '{{.Dir}}' github.com/caddyserver/caddy/v2) \
 && cp -r "$dir" /caddy && chmod -R u+w /caddy && cd /caddy \
 && for p in /patches/*.patch; do git apply "$p" || exit 1; done \
 && cd /stupa && go mod edit -replace github.com/caddyserver/caddy/v2=../caddy \
 && CGO_ENABLED=0 go build -trimpath -o /usr/bin/caddy ./cmd/caddy

FROM caddy:2.11.9
COPY --from=build /usr/bin/caddy /usr/bin/caddy
