# dockgate-fleet-balancer: HAProxy (Debian 12's haproxy 2.6) with compose/fleet/haproxy.cfg,
# the fleet's one address (compose/fleet/docker-compose.yml).
#
# FILES names an image holding /rootfs: /usr/sbin/haproxy with every library it loads, as
# the building host has it from Debian's package (scripts/images.sh makes it with
# scripts/image-rootfs.sh), so the build needs no network.
ARG BASE=debian:bookworm-slim
ARG FILES=dockgate/fleet-balancer-files:local

FROM ${FILES} AS files

FROM ${BASE}
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="dockgate-fleet-balancer" \
      org.opencontainers.image.description="HAProxy in front of a fleet of dockgate sidecars: POST /sessions by load, every other call by its session_id on a consistent hash ring" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.vendor="dockgate"
COPY --from=files /rootfs/ /
COPY compose/fleet/haproxy.cfg /etc/dockgate-fleet/haproxy.cfg
# HAProxy needs no privilege here: it binds an unprivileged port and reads its config.
USER 65534:65534
ENV FLEET_BIND=0.0.0.0:8000
EXPOSE 8000
ENTRYPOINT ["/usr/local/bin/haproxy", "-db", "-f", "/etc/dockgate-fleet/haproxy.cfg"]
