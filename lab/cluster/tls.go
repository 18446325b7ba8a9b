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
	ca                string
	nodeCert, nodeKey string
	nginx             *nginxTLS
	clientTLS         *tls.Config
	authority         *devca.CA
	// follower is the client certificate an HTTP-fed replica presents to
	// the node it follows (without a role: it follows with a token).
	followCert, followKey string
}

// issue signs another certificate with the cluster's CA.
func (c *certs) issue(l devca.Leaf) (devca.Pair, error) { return c.authority.Issue(l) }

// nginxTLS is what nginx's configuration names: the CA it verifies the
// nodes with, the certificate it serves to clients, the one it presents
// to the nodes (none: ClientCert empty), the name it checks the nodes'
// certificates for.
type nginxTLS struct {
	CA                    string
	ServerCert, ServerKey string
	ClientCert, ClientKey string
	NodeName              string
}

// makeCerts makes the cluster's certificates in dir, signed by ca, or by
// a throwaway CA it makes when ca is nil.
func makeCerts(dir string, ca *devca.CA) (*certs, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if ca == nil {
		var err error
		if ca, err = devca.New("logbook cluster CA"); err != nil {
			return nil, err
		}
	}
	var err error
	c := &certs{authority: ca}
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
	pc, pk, err := proxy.Write(dir, "nginx")
	if err != nil {
		return nil, err
	}
	c.nginx = &nginxTLS{CA: c.ca, ServerCert: pc, ServerKey: pk, ClientCert: pc, ClientKey: pk, NodeName: nodeName}
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
	// Every node requires a client certificate, the one an HTTP-fed
	// replica follows included.
	follower, err := ca.Issue(devca.Leaf{Name: "replica follower"})
	if err != nil {
		return nil, err
	}
	if c.followCert, c.followKey, err = follower.Write(dir, "follower"); err != nil {
		return nil, err
	}
	return c, nil
}
