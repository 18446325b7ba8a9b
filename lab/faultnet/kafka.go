package faultnet

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"strings"
)

// A Kafka client connects to its bootstrap address only to learn the
// brokers' advertised addresses, then to those: a proxy in front of the
// broker's one listener would be gone around. To cut one node off from
// Kafka, the broker gets one more listener per node (scripts/kafka.sh,
// KAFKA_NODE_LISTENERS), advertised at that node's proxy, and the node is
// given the proxy's address as its bootstrap.

var kafkaEntry = regexp.MustCompile(`^([A-Za-z][A-Za-z0-9_]*):([0-9]+):([^:]+):([0-9]+)$`)

// KafkaNodeProxies starts a proxy for each entry of a KAFKA_NODE_LISTENERS
// value ("NAME:PORT:HOST:ADVERTISED_PORT …", for a broker started with it):
// listening at HOST:ADVERTISED_PORT, forwarding to the broker's listener on
// 127.0.0.1:PORT. The proxies are keyed by the listener's name in upper
// case, as the broker names it.
func KafkaNodeProxies(listeners string) (map[string]*Proxy, error) {
	proxies := map[string]*Proxy{}
	fail := func(err error) (map[string]*Proxy, error) {
		for _, p := range proxies {
			p.Close()
		}
		return nil, err
	}
	for _, e := range strings.Fields(listeners) {
		m := kafkaEntry.FindStringSubmatch(e)
		if m == nil {
			return fail(fmt.Errorf("faultnet: Kafka node listener %q: want NAME:PORT:HOST:ADVERTISED_PORT", e))
		}
		name := strings.ToUpper(m[1])
		if _, dup := proxies[name]; dup {
			return fail(fmt.Errorf("faultnet: Kafka node listener %s named twice", name))
		}
		p, err := ListenOn(net.JoinHostPort(m[3], m[4]), net.JoinHostPort("127.0.0.1", m[2]))
		if err != nil {
			return fail(fmt.Errorf("faultnet: Kafka node listener %s: %w", name, err))
		}
		proxies[name] = p
	}
	if len(proxies) == 0 {
		return nil, fmt.Errorf("faultnet: no Kafka node listeners in %q", listeners)
	}
	return proxies, nil
}

// KafkaNodes prepares one Kafka listener per node name for a broker about
// to start: it picks a free port for each listener, starts its proxy on
// another free port of 127.0.0.1, and returns the proxies (keyed by the
// name in upper case) and the KAFKA_NODE_LISTENERS value to start the
// broker with. Node NAME's bootstrap address is then proxies[NAME].Addr().
func KafkaNodes(names ...string) (listeners string, proxies map[string]*Proxy, err error) {
	proxies = map[string]*Proxy{}
	var entries []string
	taken := map[int]bool{}
	for _, n := range names {
		name := strings.ToUpper(n)
		if !kafkaEntry.MatchString(name + ":1:h:1") {
			err = fmt.Errorf("faultnet: Kafka listener name %q: letters, digits and _", n)
			break
		}
		if _, dup := proxies[name]; dup || name == "PLAINTEXT" || name == "CONTROLLER" {
			err = fmt.Errorf("faultnet: Kafka listener name %q is taken", n)
			break
		}
		// A port just closed can be handed out again: none twice.
		var port int
		if port, err = FreePort(taken); err != nil {
			break
		}
		taken[port] = true
		var p *Proxy
		if p, err = Listen(net.JoinHostPort("127.0.0.1", strconv.Itoa(port))); err != nil {
			break
		}
		proxies[name] = p
		host, aport, _ := net.SplitHostPort(p.Addr())
		if ap, err := strconv.Atoi(aport); err == nil {
			taken[ap] = true
		}
		entries = append(entries, fmt.Sprintf("%s:%d:%s:%s", name, port, host, aport))
	}
	if err != nil {
		for _, p := range proxies {
			p.Close()
		}
		return "", nil, err
	}
	return strings.Join(entries, " "), proxies, nil
}

// FreePort returns a port of 127.0.0.1 free at the time of the call and
// not in taken (nil: none taken). A port just closed can be handed out
// again, so a caller picking several ports passes those it has.
func FreePort(taken map[int]bool) (int, error) {
	for range 100 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if !taken[port] {
			return port, nil
		}
	}
	return 0, errors.New("faultnet: no free port outside those taken after 100 tries")
}
