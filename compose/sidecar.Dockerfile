# dockgate-sidecar: the sandbox session service (the Aivory sidecar's HTTP API). It
# reaches Docker only through the gate (DOCKER_HOST). Build from the repository root:
#
#   docker build -f compose/sidecar.Dockerfile -t dockgate/sidecar .
#
# BINARIES as in proxy.Dockerfile.
ARG BASE=debian:bookworm-slim
ARG BINARIES=source

FROM ${BASE} AS source
RUN apt-get update \
 && apt-get install -y --no-install-recommends g++ cmake ninja-build pkg-config binutils \
      libboost1.81-dev libsimdjson-dev libssl-dev libarchive-dev libspdlog-dev libfmt-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN cmake --preset release -DDOCKGATE_BUILD_TESTS=OFF -DDOCKGATE_BUILD_BENCH=OFF >/dev/null \
 && cmake --build --preset release --target dockgate-sidecar \
 && scripts/image-rootfs.sh /rootfs build/release/sidecar/dockgate-sidecar

FROM ${BINARIES} AS binaries

FROM ${BASE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="dockgate-sidecar" \
      org.opencontainers.image.description="Sandbox sessions, code execution, files and workspace archives, through the dockgate gate" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.vendor="dockgate"
COPY --from=binaries /rootfs/ /
# Archives (SANDBOX_LOCAL_STORAGE_DIR) on a volume: a new named volume takes this
# directory's owner.
RUN mkdir -p /var/lib/dockgate/archives && chown 65532:65532 /var/lib/dockgate/archives
USER 65532:65532
ENV SANDBOX_LISTEN=0.0.0.0:8000 \
    SANDBOX_LOCAL_STORAGE_DIR=/var/lib/dockgate/archives \
    DOCKER_HOST=tcp://proxy:2375
EXPOSE 8000
HEALTHCHECK --interval=10s --timeout=5s --start-period=20s --retries=3 \
  CMD ["dockgate-sidecar", "healthcheck"]
ENTRYPOINT ["dockgate-sidecar"]
