# The edge's image: Caddy v2.11.9 built from its Go module with Stupa's patches
# (infra/stack/patches/caddy: S3 user metadata names keep their case; a limited body keeps
# splice) and handlers (the overlay infra/edge/caddy: small answers kept for a second, 100
# Continue before proxying, Go's own error answers in the service's shape, Kubo's answers
# relayed with splice), the same build the local stack runs
# (scripts/bootstrap.mjs, infra/stack/versions.json). Build from the repository root:
#   docker build -f infra/deploy/edge.Dockerfile -t stupa-edge .
FROM golang:1.26-bookworm AS build
COPY infra/stack/patches/caddy /patches
COPY infra/edge/caddy/answers.go /overlay/stupa_answers.go
COPY infra/edge/caddy/continue.go /overlay/stupa_continue.go
COPY infra/edge/caddy/errors.go /overlay/stupa_errors.go
COPY infra/edge/caddy/splice.go /overlay/stupa_splice.go
RUN dir=$(go mod download -json github.com/caddyserver/caddy/v2@v2.11.9 | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p') \
 && cp -r "$dir" /caddy && chmod -R u+w /caddy && cd /caddy \
 && for p in /patches/*.patch; do git apply "$p"; done \
 && cp /overlay/stupa_answers.go /overlay/stupa_continue.go /overlay/stupa_errors.go /overlay/stupa_splice.go cmd/caddy/ \
 && cd cmd/caddy && CGO_ENABLED=0 go build -trimpath -o /usr/bin/caddy .

FROM caddy:2.11.9
COPY --from=build /usr/bin/caddy /usr/bin/caddy
