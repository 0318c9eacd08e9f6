// Command coredns is a minimal CoreDNS for the local cluster's DNS (<svc>.<ns>.svc names).
//
// The upstream command imports github.com/coredns/coredns/core/plugin, which pulls in every
// plugin, cloud ones included (route53, azure, clouddns, ...). This one imports CoreDNS's core and
// only the plugins below, and restricts dnsserver's directive list to them (v1.12.3 exports that
// list as the variable dnsserver.Directives; later releases set it with dnsserver.SetDirectives).
// A directive's place in that list is its place in the query chain, so the list keeps the order
// of CoreDNS's own core/dnsserver/zdirectives.go (generated from plugin.cfg); a Corefile naming
// any other plugin is rejected at start-up.
//
// `coredns -version` prints CoreDNS's version. `coredns -plugins` lists every registered plugin,
// which also includes a few that the ones below import (debug, dnstap, metadata, prometheus,
// transfer); those are not in the directive list, so a Corefile using them is rejected
// ("Unknown directive 'prometheus'").
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
)

// directives is the execution order: the subsequence of CoreDNS v1.12.3's zdirectives.go made of
// the plugins imported above.
var directives = []string{
	"bind",
	"ready",
	"health",
	"errors",
	"log",
	"cache",
	"kubernetes",
	"loop",
	"forward",
}

func main() {
	// Read when the Corefile is parsed (dnsserver's Directives func), so set before Run.
	dnsserver.Directives = directives
	coremain.Run()
}
