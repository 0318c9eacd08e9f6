// Command network-policies enforces Kubernetes NetworkPolicies on the local cluster's node.
//
// The policy decisions are the controller of sigs.k8s.io/kube-network-policies (imported as a
// library): it watches NetworkPolicies, pods and namespaces and gives an accept or drop verdict
// for each packet it reads from an NFQUEUE. This program runs that controller with a kubeconfig
// (it runs on the host, not in a pod) and feeds the queue itself, because the controller's own
// nftables rules use the nft `queue` expression, which this machine's kernel lacks (adding such
// a rule fails with ENOENT), while the x_tables NFQUEUE target is there (nft's compat
// expression, as iptables-nft uses it).
//
// The rules it installs, in its own table (ip tf-mnist-network-policies), hook forward:
//
//	iifname != <bridge> accept
//	ct state established,related accept
//	queue num <id>        (x_tables NFQUEUE revision 3; no bypass: fail closed)
//
// Pod-to-pod packets cross the cluster's bridge, where netfilter sees them through br_netfilter
// (`up` sets net.bridge.bridge-nf-call-iptables=1) with the bridge as input device; other
// bridges and interfaces of the machine are never queued. Traffic from and to the node itself
// (kubelet probes, the API server's relay, DNS) takes the input and output hooks and is never
// queued either, which is the NetworkPolicy rule that a node always reaches its own pods.
//
// The rule goes in only once the controller has bound the queue (it appears in
// /proc/net/netfilter/nfnetlink_queue), so no connection is dropped for want of a reader, and
// it comes out on SIGTERM or SIGINT (or with -remove-rules, for a run that was killed). GET /healthz on -health-address answers 200 "ok" while
// both the rule and the queue's reader are there.
package main

import (
	"context"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/xt"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

// controllerModule is the module whose controller makes the decisions; -version prints its
// version as linked into this binary.
const controllerModule = "sigs.k8s.io/kube-network-policies"

// tableName is this program's own nftables table; nothing else writes to it.
const tableName = "tf-mnist-network-policies"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of this agent's client identity (required)")
	nodeName := flag.String("node-name", "", "the node whose pods this agent guards (required)")
	queueID := flag.Int("nfqueue-id", 100, "NFQUEUE number shared by the rule and the controller (1-65535)")
	healthAddress := flag.String("health-address", "127.0.0.1:10258", "host:port of GET /healthz")
	bridge := flag.String("bridge", "", "the bridge the pods are on (required)")
	remove := flag.Bool("remove-rules", false, "delete this program's nftables table and exit")
	check := flag.Bool("rules-present", false, "exit 0 when this program's nftables table exists, 1 when not")
	version := flag.Bool("version", false, "print the version of "+controllerModule+" and exit")
	klog.InitFlags(nil)
	flag.Parse()
	if *version {
		fmt.Printf("%s %s\n", controllerModule, linkedVersion(controllerModule))
		return
	}
	if *check {
		present, err := rulePresent()
		if err != nil {
			fmt.Fprintf(os.Stderr, "network-policies: listing tables: %v\n", err)
			os.Exit(2)
		}
		if !present {
			os.Exit(1)
		}
		return
	}
	if *remove {
		if err := removeRule(); err != nil && !errors.Is(err, syscall.ENOENT) {
			fmt.Fprintf(os.Stderr, "network-policies: removing table %s: %v\n", tableName, err)
			os.Exit(1)
		}
		return
	}
	if err := run(*kubeconfig, *nodeName, *bridge, *queueID, *healthAddress); err != nil {
		fmt.Fprintf(os.Stderr, "network-policies: %v\n", err)
		os.Exit(1)
	}
}

// linkedVersion returns the version of module path in this binary's build list, or "unknown".
func linkedVersion(path string) string {
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			if dep.Path == path {
				return dep.Version
			}
		}
	}
	return "unknown"
}

func run(kubeconfig, nodeName, bridge string, queueID int, healthAddress string) error {
	if kubeconfig == "" || nodeName == "" || bridge == "" {
		return errors.New("-kubeconfig, -node-name and -bridge are required")
	}
	if len(bridge) >= 16 {
		return fmt.Errorf("-bridge %q: an interface name has at most 15 characters", bridge)
	}
	if queueID < 1 || queueID > 65535 {
		return fmt.Errorf("-nfqueue-id %d: must be between 1 and 65535", queueID)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	config, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading -kubeconfig %s: %w", kubeconfig, err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		return err
	}
	// The controller looks up the pod of both addresses of every queued packet, and where its
	// informer knows no pod with that IP (a pod deleted while a peer still sends to it, one
	// whose IP is not reported yet) it asks its NRI plugin, which it dereferences without a nil
	// check: with NRI disabled that lookup panics, the queue loses its reader, and every
	// forwarded packet is dropped. So the plugin is enabled, but given a connection that
	// cannot be one: the NRI stub reads NRI_PLUGIN_SOCKET as a file descriptor number, fails
	// to parse this value, and its Run ends at once with that error (logged); the plugin then
	// knows no pod, so such a packet is judged as from or to an address outside the cluster.
	// It must not dial the default socket /var/run/nri/nri.sock, which would be another
	// runtime's (Debian's containerd 1.6 has no NRI).
	if err := os.Setenv("NRI_PLUGIN_SOCKET", "none"); err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	controller, err := networkpolicy.NewController(client,
		factory.Networking().V1().NetworkPolicies(), factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(), nil, nil, nil, nil,
		networkpolicy.Config{
			QueueID:  queueID,
			NodeName: nodeName,
			// Its own nftables rules cannot be added here (see the package comment); they would
			// go into this table, which therefore stays empty. The DNS workaround is for kernels
			// before 6.12. NRI stays enabled, unconnected (above).
			NFTableName:         "kube-network-policies",
			NetfilterBug1766Fix: false,
			NRIdisabled:         false,
		})
	if err != nil {
		return err
	}
	controllerDone := make(chan error, 1)
	go func() { controllerDone <- controller.Run(ctx) }()
	factory.Start(ctx.Done())

	var ruleIn atomic.Bool
	go serveHealth(healthAddress, queueID, &ruleIn)

	// Wait for the controller to bind the queue, then divert the forwarded packets to it.
	for !queueBound(queueID) {
		select {
		case <-ctx.Done():
			return nil
		case err := <-controllerDone:
			return fmt.Errorf("the policy controller stopped before binding NFQUEUE %d: %v", queueID, err)
		case <-time.After(200 * time.Millisecond):
		}
	}
	if err := installRule(bridge, queueID); err != nil {
		return fmt.Errorf("installing the nftables rule: %w", err)
	}
	ruleIn.Store(true)
	klog.Infof("NFQUEUE %d bound; forwarded new connections go to the policy controller", queueID)

	select {
	case <-ctx.Done():
	case err = <-controllerDone:
		err = fmt.Errorf("the policy controller stopped: %v", err)
	}
	ruleIn.Store(false)
	if rmErr := removeRule(); rmErr != nil {
		klog.Errorf("removing table %s: %v", tableName, rmErr)
	}
	return err
}

// queueBound reports whether a process reads NFQUEUE id (a line of
// /proc/net/netfilter/nfnetlink_queue starts with the queue number).
func queueBound(id int) bool {
	data, err := os.ReadFile("/proc/net/netfilter/nfnetlink_queue")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 && fields[0] == strconv.Itoa(id) {
			return true
		}
	}
	return false
}

// nfqueueInfo is struct xt_NFQ_info_v3 of <linux/netfilter/xt_NFQUEUE.h>: queuenum,
// queues_total and flags, three native-endian u16; flags 0 means no bypass, so a packet with
// no reader is dropped.
func nfqueueInfo(id int) *xt.Unknown {
	info := make([]byte, 6)
	binary.NativeEndian.PutUint16(info[0:], uint16(id))
	binary.NativeEndian.PutUint16(info[2:], 1)
	raw := xt.Unknown(info)
	return &raw
}

// installRule (re)creates table ip tf-mnist-network-policies with its one forward chain.
func installRule(bridge string, queueID int) error {
	conn, err := nftables.New()
	if err != nil {
		return err
	}
	table := &nftables.Table{Name: tableName, Family: nftables.TableFamilyIPv4}
	// add + delete + add: the table starts empty even if an earlier run left it behind.
	conn.AddTable(table)
	conn.DelTable(table)
	conn.AddTable(table)
	chain := conn.AddChain(&nftables.Chain{
		Name: "forward", Table: table, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookForward, Priority: nftables.ChainPriorityFilter,
	})
	// Interface names compare as IFNAMSIZ (16) bytes, NUL-padded.
	name := make([]byte, 16)
	copy(name, bridge)
	conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: name},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}})
	established := binaryutil.NativeEndian.PutUint32(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED)
	conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: established, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}})
	conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
		&expr.Target{Name: "NFQUEUE", Rev: 3, Info: nfqueueInfo(queueID)},
	}})
	return conn.Flush()
}

// rulePresent reports whether this program's table exists.
func rulePresent() (bool, error) {
	conn, err := nftables.New()
	if err != nil {
		return false, err
	}
	tables, err := conn.ListTablesOfFamily(nftables.TableFamilyIPv4)
	if err != nil {
		return false, err
	}
	for _, t := range tables {
		if t.Name == tableName {
			return true, nil
		}
	}
	return false, nil
}

// removeRule deletes this program's table (nothing else is touched).
func removeRule() error {
	conn, err := nftables.New()
	if err != nil {
		return err
	}
	conn.DelTable(&nftables.Table{Name: tableName, Family: nftables.TableFamilyIPv4})
	return conn.Flush()
}

// serveHealth answers GET /healthz: 200 "ok" while the rule is in and the queue has a reader,
// 503 otherwise.
func serveHealth(address string, queueID int, ruleIn *atomic.Bool) {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if ruleIn.Load() && queueBound(queueID) {
			fmt.Fprintln(w, "ok")
			return
		}
		http.Error(w, fmt.Sprintf("NFQUEUE %d rule or reader missing", queueID), http.StatusServiceUnavailable)
	})
	if err := http.ListenAndServe(address, mux); err != nil {
		klog.Errorf("health endpoint %s: %v", address, err)
	}
}
