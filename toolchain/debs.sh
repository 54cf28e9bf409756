#!/usr/bin/env bash
# Unpacks the real node's Debian packages into the cache, without installing anything system-wide:
# `apt-get download` fetches each .deb from the configured Debian mirror and `dpkg-deb -x` unpacks it
# into $cache/node/debian-<hash>/, where <hash> covers the package list and each resolved version, so a
# new Debian point release unpacks into a fresh folder. Idempotent: a complete folder is reused.
#
#   toolchain/debs.sh CACHE
#
# containerd and runc run the pods, containernetworking-plugins wires them to a bridge, iptables (and the
# libraries it needs that a minimal Debian lacks) serves kube-proxy and the bridge plugin, and mmdebstrap
# builds the Debian base image. The libraries are found through LD_LIBRARY_PATH (kvtier sets it).
set -euo pipefail

cache=${1:?usage: debs.sh CACHE}
packages=(containerd runc containernetworking-plugins iptables libip6tc2 libnftnl11
  libnetfilter-conntrack3 libnfnetlink0 mmdebstrap)

log() { printf '[toolchain] %s\n' "$*" >&2; }

# The candidate version of every package; apt-get update only when the lists lack one of them.
candidates() {
  apt-cache policy "${packages[@]}" 2>/dev/null | awk '/^[a-z0-9]/{p=$1} /Candidate:/{print p $2}'
}
resolved=$(candidates)
if [[ $(grep -vc '(none)' <<<"$resolved") -ne ${#packages[@]} ]]; then
  log "apt-get update (some node packages have no candidate yet)"
  apt-get update -qq >/dev/null
  resolved=$(candidates)
fi
if [[ $(grep -vc '(none)' <<<"$resolved") -ne ${#packages[@]} ]]; then
  log "no candidate for some node packages in the configured Debian mirror:"
  grep '(none)' <<<"$resolved" >&2 || true
  exit 1
fi

hash=$(sha256sum <<<"$resolved" | cut -c1-8)
out="$cache/node/debian-$hash"
if [[ ! -f $out/.complete ]]; then
  log "unpacking Debian packages into $out: $(tr '\n' ' ' <<<"$resolved")"
  rm -rf "$out" "$out.debs" && mkdir -p "$out" "$out.debs"
  # apt-get download writes into the current folder; _apt needs to be able to write there.
  chmod 0777 "$out.debs"
  (cd "$out.debs" && apt-get download -qq "${packages[@]}" >/dev/null)
  for deb in "$out.debs"/*.deb; do dpkg-deb -x "$deb" "$out"; done
  rm -rf "$out.debs"
  # Debian picks iptables' flavour with update-alternatives at install time; here the nft one.
  for t in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do
    ln -sf xtables-nft-multi "$out/usr/sbin/$t"
  done
  printf '%s\n' "$resolved" >"$out/.versions"
  touch "$out/.complete"
fi
ln -sfn "$out" "$cache/node/debian"
log "node packages ready in $out"
