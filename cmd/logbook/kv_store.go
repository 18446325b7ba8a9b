package main

import (
	"context"
	"fmt"
	"net/url"
	"strings"

	"github.com/logbook/logbook/services/kv"
	"github.com/logbook/logbook/services/kv/cassandrakv"
	"github.com/logbook/logbook/services/kv/etcdkv"
	"github.com/logbook/logbook/services/kv/pebblekv"
	"github.com/logbook/logbook/services/kv/pgkv"
	"github.com/logbook/logbook/services/kv/rediskv"
)

// kvStoreHelp is --store's help: every backend the kv package has.
const kvStoreHelp = "where to keep the repository instead of the embedded database in --data: postgres://… (PostgreSQL), redis://host:port (one Redis server), etcd://host:port[,host:port…] (an etcd cluster) or cassandra://host:port[,host:port…]/keyspace (a Cassandra cluster; keyspace default logbook)"

// openKVBackend opens the kv backend --store names, or the embedded one
// in data when store is empty, and says where it is for logs (passwords
// hidden).
func openKVBackend(ctx context.Context, data, store string) (b kv.Backend, where string, err error) {
	scheme, rest, _ := strings.Cut(store, "://")
	switch {
	case store == "":
		if data == "" {
			return nil, "", usagef("--data must name a directory")
		}
		b, err = pebblekv.Open(data, pebblekv.Options{})
		where = data
	case isPostgresURL(store):
		where = redactURL(store)
		b, err = pgkv.Open(ctx, store, pgkv.Options{})
	case scheme == "redis":
		u, perr := url.Parse(store)
		if perr != nil || u.Host == "" || u.User != nil || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
			return nil, "", usagef("--store %q: want redis://host:port", redactURL(store))
		}
		where = store
		b, err = rediskv.Open(ctx, u.Host, rediskv.Options{})
	case scheme == "etcd":
		var endpoints []string
		for _, ep := range strings.Split(strings.TrimSuffix(rest, "/"), ",") {
			if ep == "" || strings.ContainsAny(ep, "/?@") {
				return nil, "", usagef("--store %q: want etcd://host:port[,host:port…]", redactURL(store))
			}
			endpoints = append(endpoints, ep)
		}
		where = store
		b, err = etcdkv.Open(ctx, endpoints, etcdkv.Options{})
	case scheme == "cassandra":
		hosts, keyspace, _ := strings.Cut(rest, "/")
		var points []string
		for _, h := range strings.Split(hosts, ",") {
			if h == "" || strings.ContainsAny(h, "?@#") {
				return nil, "", usagef("--store %q: want cassandra://host:port[,host:port…]/keyspace", redactURL(store))
			}
			points = append(points, h)
		}
		if strings.ContainsAny(keyspace, "/?#") {
			return nil, "", usagef("--store %q: want cassandra://host:port[,host:port…]/keyspace", redactURL(store))
		}
		where = store
		b, err = cassandrakv.Open(ctx, points, cassandrakv.Options{Keyspace: keyspace})
	default:
		return nil, "", usagef("--store %q: want postgres://…, redis://host:port, etcd://host:port or cassandra://host:port/keyspace (the embedded database is chosen with --data)", redactURL(store))
	}
	if err != nil {
		return nil, "", fmt.Errorf("open the repository %s: %w", where, err)
	}
	return b, where, nil
}
