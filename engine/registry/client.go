package registry

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
)

// Client is Schemas over the REST API of a registry in another process:
// logbook's (http://HOST:PORT/registry, served by the write node) or any
// Confluent-compatible one. It uses franz-go's registry client.
type Client struct {
	c *sr.Client
}

// NewClient returns a Client for the registry at url, authenticating with
// token as a bearer token (empty: none). Registering needs a token with
// the schema-admin role.
func NewClient(url, token string) (*Client, error) {
	return NewClientTLS(url, token, nil)
}

// NewClientTLS is NewClient over an https:// url with tc as the client's
// TLS configuration: the CAs that sign the registry's certificate, and a
// client certificate for a registry that requires one (mutual TLS). A nil
// tc is Go's defaults (the system's CAs, no client certificate).
func NewClientTLS(url, token string, tc *tls.Config) (*Client, error) {
	opts := []sr.ClientOpt{sr.URLs(url)}
	if tc != nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = tc
		// franz-go's default client's timeout, over this transport.
		opts = append(opts, sr.HTTPClient(&http.Client{Timeout: 5 * time.Second, Transport: tr}))
	}
	if token != "" {
		opts = append(opts, sr.BearerToken(token))
	}
	c, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("registry: client for %s: %w", url, err)
	}
	return &Client{c: c}, nil
}

// Register registers an Avro schema under subject and returns its id (the
// existing id if the subject has it already).
func (c *Client) Register(ctx context.Context, subject, schema string) (int, error) {
	ss, err := c.c.CreateSchema(ctx, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro})
	if err != nil {
		return 0, err
	}
	return ss.ID, nil
}

// SchemaByID returns the text of schema id.
func (c *Client) SchemaByID(ctx context.Context, id int) (string, error) {
	s, err := c.c.SchemaByID(ctx, id)
	if err != nil {
		return "", err
	}
	return s.Schema, nil
}
