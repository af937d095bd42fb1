# Builds the `manager` binary as a static musl executable and ships it alone, running as a non-root user.
FROM rust:1.95-alpine AS build
RUN apk add --no-cache musl-dev
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin manager && cp target/release/manager /manager

FROM scratch
COPY --from=build /manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
