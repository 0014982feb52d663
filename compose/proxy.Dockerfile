# dockgate-proxy: the Docker socket gate. Build from the repository root:
#
#   docker build -f compose/proxy.Dockerfile -t dockgate/proxy .
#
# (with DOCKER_BUILDKIT=1 and --network host if the build stage must reach Debian's
# archive through the host). BINARIES names the stage (or an image) holding /rootfs:
# `source` compiles here; scripts/images.sh passes an image made from binaries already
# compiled on the host (scripts/image-rootfs.sh), so CI compiles once.
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
 && cmake --build --preset release --target dockgate-proxy \
 && scripts/image-rootfs.sh /rootfs build/release/proxy/dockgate-proxy \
 && install -d -m 0755 /rootfs/etc/dockgate && install -m 0644 compose/policies/*.json /rootfs/etc/dockgate/

FROM ${BINARIES} AS binaries

FROM ${BASE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="dockgate-proxy" \
      org.opencontainers.image.description="Docker socket gate: every Engine API request routed, checked against a policy and rewritten" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.vendor="dockgate"
COPY --from=binaries /rootfs/ /
# compose/egress.yml's socket for the egress service, on a volume mounted here: a new named
# volume takes this directory's owner, the gate's user.
RUN mkdir -p /run/dockgate && chown 65532:65532 /run/dockgate
# Not root: the gate needs only the engine socket's group, given at run time
# (compose: group_add ["${DOCKER_GID}"]; docker run --group-add $(stat -c %g /var/run/docker.sock)).
USER 65532:65532
EXPOSE 2375
HEALTHCHECK --interval=10s --timeout=5s --start-period=10s --retries=3 \
  CMD ["dockgate-proxy", "healthcheck", "tcp://127.0.0.1:9323"]
ENTRYPOINT ["dockgate-proxy"]
# Without --policy the gate reads Tecnativa's variables (CONTAINERS=1, POST=0, ...): the
# image drops in where tecnativa/docker-socket-proxy was. Add
# `--policy /etc/dockgate/<profile>.json` (the example policies are there) to use a policy.
CMD ["serve", "--upstream", "unix:///var/run/docker.sock", \
     "--listen", "tcp://0.0.0.0:2375", "--allow-insecure-tcp", \
     "--metrics", "tcp://127.0.0.1:9323"]
