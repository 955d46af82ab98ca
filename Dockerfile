# syntax=docker/dockerfile:1
# kenning's HTTP service for a team: `docker build -t kenning .`, or `docker compose up` with
# compose.yaml (PostgreSQL with pgvector for the organisation's shared memory).
#
# The build stage compiles the distribution binary (the release build, stripped); the runtime stage is Debian slim with that binary,
# run as an unprivileged user, its data (the user store, API keys, audit log) in the volume /data.
# Keys: `docker run --rm -v kenning-data:/data kenning keys create --name NAME` writes one into the
# volume, or mount a keys file made by `kenning keys create` and name it in KENNING_KEYS_FILE.

ARG RUST_VERSION=1.89
FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --locked --profile distribution --package kenning --bin kenning \
    && cp target/distribution/kenning /usr/local/bin/kenning

FROM debian:bookworm-slim AS runtime
# ca-certificates: TLS to PostgreSQL and to language model providers checks the system's roots.
# It is left unpinned (DL3008) so that a rebuild picks up the distribution's current root store.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --user-group --home-dir /data --shell /usr/sbin/nologin kenning \
    && mkdir /data \
    && chown kenning:kenning /data
COPY --from=build /usr/local/bin/kenning /usr/local/bin/kenning
USER 10001:10001
WORKDIR /data
ENV KENNING_DATA_DIR=/data KENNING_CONFIG_DIR=/data/config KENNING_LOG=info
VOLUME ["/data"]
EXPOSE 8080
# /healthz answers without a key; bash's /dev/tcp asks it, as the image has no HTTP client.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /healthz HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n' >&3 && grep -q '\"status\":\"ok\"' <&3"]
ENTRYPOINT ["kenning"]
CMD ["serve", "--http", "0.0.0.0:8080"]
