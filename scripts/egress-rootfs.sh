#!/usr/bin/env bash
# The files of the dockgate/egress image (compose/egress.Dockerfile), taken from this host
# the way scripts/image-rootfs.sh takes dockgate's programs: squid (squid-openssl, its
# data and error pages), iptables (the binary this host's `iptables` runs, and its
# extensions), openssl, ip and the docker CLI, with every library they load. The host has
# them from Debian's archive (scripts/install-deps.sh); nothing is fetched.
#
#   scripts/egress-rootfs.sh DEST
set -euo pipefail
dest=${1:?usage: egress-rootfs.sh DEST}
cd "$(dirname "$0")/.."
iptables_bin=$(readlink -f /usr/sbin/iptables)  # xtables-nft-multi or xtables-legacy-multi
scripts/image-rootfs.sh "$dest" /usr/sbin/squid "$iptables_bin" /usr/bin/openssl /usr/sbin/ip /usr/bin/docker
ln -sf "$(basename "$iptables_bin")" "$dest/usr/local/bin/iptables"
# iptables loads its matches and targets (tcp, standard, ...) at run time.
xtables=$(dirname "$(readlink -f "$(ldd "$iptables_bin" | awk '/libxtables/{print $3}')")")/xtables
mkdir -p "$dest$xtables" && cp -a "$xtables/." "$dest$xtables/"
# squid's data: mime table, icons, error pages (squid-langpack), errorpage.css; openssl's
# configuration. Directories as packaged; no documentation.
{
  dpkg -L squid-common squid-langpack | grep -v -e '^/usr/share/doc' -e '^/usr/share/man' |
    while read -r f; do if [[ -L $f || -f $f ]]; then echo "$f"; fi; done
  printf '%s\n' /usr/lib/squid/unlinkd /etc/squid/errorpage.css /etc/ssl/openssl.cnf /usr/lib/ssl/openssl.cnf
} | sed 's|^/||' | tar -C / -c --no-recursion -T - | tar -C "$dest" -x
