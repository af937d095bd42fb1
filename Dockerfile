# CAPOV's operator image: the static `manager`, Debian's CA bundle (system-CA trust for `spec.tls.cert: true`) and
# `wget` (the troubleshooting command) as a link to `manager`, which answers as `wget` by that name; nothing else.
# Runs as the non-root user 65532.
#
# With internet access (BuildKit, Docker's default builder since 23.0):
#   docker build -t capov-manager:0.1.0 .
# Offline, from parts made on the machine (a static `manager` built with cargo, Debian's ca-certificates package):
# tools/image/build.sh, which runs
#   docker build --build-arg SOURCE=machine -f Dockerfile target/image/context
# Both build the same final stage below; only where `manager` and `parts` come from differs.
ARG SOURCE=internet

# --- SOURCE=internet: compile and collect the parts in official base images ---
FROM rust:1.95-alpine AS manager-internet
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin manager && cp target/release/manager /manager

FROM debian:bookworm-slim AS parts-internet
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/*
# The bundle is the package's Mozilla set, never the builder's local additions; `manager` answers as `wget` by its
# name.
RUN mkdir -p /parts/usr/bin /parts/etc/ssl/certs \
 && ln -s /manager /parts/usr/bin/wget \
 && cat /usr/share/ca-certificates/mozilla/*.crt > /parts/etc/ssl/certs/ca-certificates.crt

# --- SOURCE=machine: the same parts, prepared by tools/image/build.sh in the build context ---
FROM scratch AS manager-machine
COPY manager /manager

FROM scratch AS parts-machine
COPY parts/ /parts/

FROM manager-${SOURCE} AS manager
FROM parts-${SOURCE} AS parts

# --- The image ---
FROM scratch
COPY --from=parts /parts/ /
COPY --from=manager /manager /manager
# The engine client reads the system CAs from SSL_CERT_FILE; README.md "The image" shows how to add a private CA.
ENV PATH=/usr/bin \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
USER 65532:65532
ENTRYPOINT ["/manager"]
