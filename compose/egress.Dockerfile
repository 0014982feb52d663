# dockgate-egress: the egress proxy of SANDBOX_NETWORK=allowlist in a container
# (compose/egress.yml): scripts/egress-proxy.sh, the same squid configuration and firewall
# rules as on a host, run in the host's network namespace with NET_ADMIN.
#
# FILES names an image holding /rootfs: squid-openssl, iptables, openssl, ip and the docker
# CLI with every library they load, as the building host has them from Debian
# (scripts/images.sh makes it with scripts/egress-rootfs.sh), so the build needs no network.
ARG BASE=debian:bookworm-slim
ARG FILES=dockgate/egress-files:local

FROM ${FILES} AS files

FROM ${BASE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="dockgate-egress" \
      org.opencontainers.image.description="The egress proxy of SANDBOX_NETWORK=allowlist: squid (CONNECT with an SNI check, plain HTTP) to the listed names only, and the host firewall rules that leave it the only address a session reaches" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.vendor="dockgate"
COPY --from=files /rootfs/ /
# lib.sh beside egress-proxy.sh, which sources it from its own directory.
COPY scripts/egress-proxy.sh scripts/egress-policy-helper.sh scripts/lib.sh compose/egress-entrypoint.sh /usr/local/bin/
HEALTHCHECK --interval=2s --timeout=5s --start-period=120s --retries=3 \
  CMD ["test", "-s", "/run/dockgate-egress/env"]
ENTRYPOINT ["egress-entrypoint.sh"]
