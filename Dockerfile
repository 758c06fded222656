# Build: cgo is needed by the SQLite driver, the sqlite_fts5 tag by the audit search.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The context holds no .git: the commit comes as a build argument
# (docker build --build-arg COMMIT=$(git rev-parse HEAD) .), for `countersign version`.
ARG COMMIT=
RUN CGO_ENABLED=1 go build -tags sqlite_fts5 -trimpath -ldflags="-s -w -X main.builtCommit=${COMMIT}" -o /out/countersign ./cmd/countersign

# Run: a small Debian image (glibc for the cgo binary), as a non-root user.
FROM debian:bookworm-slim
RUN apt-get update && apt-get install -y --no-install-recommends ca-certificates curl \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --uid 10001 --user-group --no-create-home --home-dir /data --shell /usr/sbin/nologin countersign \
    && mkdir -p /data && chown countersign /data
COPY --from=build /out/countersign /usr/local/bin/countersign
USER countersign
WORKDIR /data
VOLUME ["/data"]
ENV COUNTERSIGN_DB=/data/countersign.db \
    COUNTERSIGN_ADDR=0.0.0.0:8080
EXPOSE 8080
# Plain HTTP, or HTTPS when started with --tls-cert/--tls-key (the
# certificate names the public host, not 127.0.0.1, hence -k).
HEALTHCHECK --interval=30s --timeout=3s --start-period=10s CMD curl -fsS http://127.0.0.1:8080/healthz || curl -fsSk https://127.0.0.1:8080/healthz || exit 1
ENTRYPOINT ["countersign"]
CMD ["serve"]
