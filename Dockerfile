# syntax=docker/dockerfile:1
# Images of inplace: `make docker-build-manager` and `make docker-build-agent`
# build the targets inplace-manager and inplace-agent (which also carries
# inplace-supervisor, for process scope). All are static Go binaries on
# distroless, run as a non-root user. The build stages copy only
# the packages each binary needs; a test checks this list by running the
# same go build on a tree holding only what is copied
# (test/integration/deploy/dockerfile_test.go).
ARG GO_VERSION=1.26

FROM --platform=$BUILDPLATFORM golang:${GO_VERSION} AS deps
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download

FROM deps AS build-agent
ARG TARGETOS=linux TARGETARCH=amd64 VERSION=v0.0.0-dev COMMIT=
COPY agent/ agent/
COPY api/ api/
COPY cmd/internal/ cmd/internal/
COPY cmd/agent/ cmd/agent/
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -ldflags="-s -w -X github.com/inplace-dev/inplace/cmd/internal/version.version=${VERSION} -X github.com/inplace-dev/inplace/cmd/internal/version.commit=${COMMIT}" -o /out/inplace-agent ./cmd/agent

# The supervisor of process scope, copied into every such Pod at its start:
# the standard library, the supervisor and the protocol only.
FROM deps AS build-supervisor
ARG TARGETOS=linux TARGETARCH=amd64 VERSION=v0.0.0-dev COMMIT=
COPY agent/supervisor/ agent/supervisor/
COPY api/protocol/ api/protocol/
COPY cmd/internal/ cmd/internal/
COPY cmd/supervisor/ cmd/supervisor/
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -ldflags="-s -w -X github.com/inplace-dev/inplace/cmd/internal/version.version=${VERSION} -X github.com/inplace-dev/inplace/cmd/internal/version.commit=${COMMIT}" -o /out/inplace-supervisor ./cmd/supervisor

FROM deps AS build-manager
ARG TARGETOS=linux TARGETARCH=amd64 VERSION=v0.0.0-dev COMMIT=
COPY api/ api/
COPY controller/ controller/
COPY policies/ policies/
COPY webhook/ webhook/
COPY cmd/internal/ cmd/internal/
COPY cmd/manager/ cmd/manager/
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -ldflags="-s -w -X github.com/inplace-dev/inplace/cmd/internal/version.version=${VERSION} -X github.com/inplace-dev/inplace/cmd/internal/version.commit=${COMMIT}" -o /out/inplace-manager ./cmd/manager

FROM gcr.io/distroless/static-debian12:nonroot AS inplace-agent
COPY --from=build-agent /out/inplace-agent /inplace-agent
COPY --from=build-supervisor /out/inplace-supervisor /usr/local/bin/inplace-supervisor
USER 65532:65532
ENTRYPOINT ["/inplace-agent"]

FROM gcr.io/distroless/static-debian12:nonroot AS inplace-manager
COPY --from=build-manager /out/inplace-manager /inplace-manager
USER 65532:65532
ENTRYPOINT ["/inplace-manager"]
