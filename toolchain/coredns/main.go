// CoreDNS with only the plugins of the real-node tier's Corefile (toolchain/realnode/coredns.yaml:
// errors, health, ready, hosts, kubernetes, cache, loop). Upstream's main links every plugin, the cloud DNS
// providers' SDKs among them, which make up most of its build time; the server and plugin code are
// upstream's, unchanged. Built by toolchain/install.sh against the pinned COREDNS_VERSION.
package main

import (
	_ "github.com/coredns/caddy/onevent"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"

	"github.com/coredns/coredns/coremain"
)

func main() {
	coremain.Run()
}
