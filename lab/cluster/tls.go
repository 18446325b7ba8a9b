package cluster

import (
	"crypto/tls"
	"os"

	"github.com/logbook/logbook/engine/server"
	"github.com/logbook/logbook/internal/devca"
)

// nodeName is the name every node's certificate carries and nginx checks
// (proxy_ssl_name): nginx verifies an upstream against one name, however
// many servers the upstream has.
const nodeName = "node.logbook.internal"

// certs are a TLS cluster's files: one CA signs a certificate the nodes
// serve (for nodeName and 127.0.0.1), and one nginx serves to clients and
// presents to the nodes.
type certs struct {
	ca                  string
	nodeCert, nodeKey   string
	proxyCert, proxyKey string
	clientTLS           *tls.Config
}

// nginxTLS is what nginx's configuration names.
type nginxTLS struct{ CA, ProxyCert, ProxyKey, NodeName string }

// makeCerts makes a throwaway CA and the cluster's certificates in dir.
func makeCerts(dir string) (*certs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := devca.New("logbook cluster CA")
	if err != nil {
		return nil, err
	}
	c := &certs{}
	if c.ca, err = ca.WriteCA(dir, "ca"); err != nil {
		return nil, err
	}
	node, err := ca.Issue(devca.Leaf{Name: nodeName, Hosts: []string{nodeName, "127.0.0.1", "localhost"}})
	if err != nil {
		return nil, err
	}
	if c.nodeCert, c.nodeKey, err = node.Write(dir, "node"); err != nil {
		return nil, err
	}
	// nginx's certificate carries no role: a request through it needs
	// a token, as it would without TLS.
	proxy, err := ca.Issue(devca.Leaf{Name: "nginx", Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		return nil, err
	}
	if c.proxyCert, c.proxyKey, err = proxy.Write(dir, "nginx"); err != nil {
		return nil, err
	}
	// The harness's own client certificate (WaitReady asks the nodes
	// directly), without a role.
	harness, err := ca.Issue(devca.Leaf{Name: "cluster harness"})
	if err != nil {
		return nil, err
	}
	hc, hk, err := harness.Write(dir, "harness")
	if err != nil {
		return nil, err
	}
	if c.clientTLS, err = server.ClientTLS(c.ca, hc, hk); err != nil {
		return nil, err
	}
	return c, nil
}
