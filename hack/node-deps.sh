#!/usr/bin/env bash
# Installs the OS packages the node plane needs (test/framework/node.go,
# `make test-node`) when one is missing: containerd and runc (the container
# runtime), the CNI plugins (bridge, host-local, portmap, loopback),
# iptables and conntrack (kube-proxy), iproute2 and nftables (the
# teardown of the bridge and of the tables iptables-nft creates).
# Debian's packages, as root; nothing else is downloaded.
set -euo pipefail
need=()
command -v containerd >/dev/null || need+=(containerd)
command -v runc >/dev/null || need+=(runc)
[ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/portmap ] || need+=(containernetworking-plugins)
command -v iptables >/dev/null || need+=(iptables)
command -v conntrack >/dev/null || need+=(conntrack)
command -v ip >/dev/null || need+=(iproute2)
command -v nft >/dev/null || need+=(nftables)
if [ ${#need[@]} -eq 0 ]; then
	echo "node-deps: containerd $(containerd --version | awk '{print $3}'), runc, CNI plugins, iptables, conntrack present"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "node-deps: missing ${need[*]}; run as root: hack/node-deps.sh" >&2
	exit 1
fi
echo "node-deps: installing ${need[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
# Debian starts the containerd service it installs; the node plane runs
# its own containerd (own socket, root and state), so the system one is
# left as the package set it up.
echo "node-deps: installed ${need[*]}"
