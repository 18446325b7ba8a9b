package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/logbook/logbook/internal/devca"
)

// Defaults of the cluster's identity provider: the issuer its tokens
// name and the audience they are for, as the nodes are told to check.
const (
	IdPIssuer   = "https://idp.logbook.internal"
	IdPAudience = "logbook-cluster"
)

// IdP is the cluster's throwaway identity provider: one ES256 key, made
// fresh, whose public half it publishes as a JSON Web Key Set over HTTPS
// (a certificate of the cluster's CA) at URL, and with which it signs
// bearer JSON Web Tokens. The nodes verify them (flights serve
// --jwks-url URL --issuer Issuer --audience Audience).
type IdP struct {
	URL      string // the key set's https URL
	Issuer   string
	Audience string
	// KeyFile is the signing key, PEM (PKCS #8), readable by its owner
	// only: LoadIdP reads it to mint more tokens, a test's wrong ones
	// included.
	KeyFile string
	key     *ecdsa.PrivateKey
	kid     string
	srv     *http.Server
}

// Claims are what a minted token says. Issuer and Audience default to
// the IdP's; Expiry to an hour from now, NotBefore and IssuedAt to now.
type Claims struct {
	Subject   string
	Roles     []string
	Issuer    string
	Audience  string
	NotBefore time.Time
	IssuedAt  time.Time
	Expiry    time.Time
}

// newIdP makes the key, writes it to dir/idp.key, and serves the key set
// over HTTPS on a free loopback port with a certificate c's CA signs.
func newIdP(dir string, c *certs) (*IdP, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	p := &IdP{Issuer: IdPIssuer, Audience: IdPAudience, KeyFile: filepath.Join(dir, "idp.key"), key: key, kid: keyID(key)}
	if err := os.WriteFile(p.KeyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	leaf, err := c.issue(devca.Leaf{Name: "cluster identity provider", Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		return nil, err
	}
	cert, err := leaf.TLS()
	if err != nil {
		return nil, err
	}
	set, err := json.Marshal(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: key.Public(), KeyID: p.kid, Algorithm: string(jose.ES256), Use: "sig"}}})
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /jwks.json", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/jwk-set+json")
		_, _ = w.Write(set)
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}}
	go func() { _ = p.srv.ServeTLS(l, "", "") }()
	p.URL = "https://" + l.Addr().String() + "/jwks.json"
	return p, nil
}

// LoadIdP reads an IdP's signing key from keyFile, to mint tokens it
// signs (it serves nothing).
func LoadIdP(keyFile, issuer, audience string) (*IdP, error) {
	b, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, fmt.Errorf("cluster: %s holds no PEM block", keyFile)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", keyFile, err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("cluster: %s: not an EC key", keyFile)
	}
	return &IdP{Issuer: issuer, Audience: audience, KeyFile: keyFile, key: key, kid: keyID(key)}, nil
}

// keyID names a key by its JWK thumbprint (RFC 7638), so that a key read
// back from its file has the name the key set gives it.
func keyID(key *ecdsa.PrivateKey) string {
	tp, err := (&jose.JSONWebKey{Key: key.Public()}).Thumbprint(crypto.SHA256)
	if err != nil {
		panic(fmt.Sprintf("cluster: thumbprint of a P-256 key: %v", err))
	}
	return fmt.Sprintf("%x", tp[:8])
}

// Mint signs a token (ES256) with the IdP's key.
func (p *IdP) Mint(c Claims) (string, error) {
	if p == nil || p.key == nil {
		return "", errors.New("cluster: no identity provider")
	}
	now := time.Now()
	if c.Issuer == "" {
		c.Issuer = p.Issuer
	}
	if c.Audience == "" {
		c.Audience = p.Audience
	}
	if c.IssuedAt.IsZero() {
		c.IssuedAt = now
	}
	if c.NotBefore.IsZero() {
		c.NotBefore = now
	}
	if c.Expiry.IsZero() {
		c.Expiry = now.Add(time.Hour)
	}
	if c.Subject == "" {
		c.Subject = strings.Join(c.Roles, "+")
	}
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: p.key},
		(&jose.SignerOptions{}).WithType("JWT").WithHeader(jose.HeaderKey("kid"), p.kid))
	if err != nil {
		return "", err
	}
	std := jwt.Claims{Issuer: c.Issuer, Subject: c.Subject, Audience: jwt.Audience{c.Audience},
		IssuedAt: jwt.NewNumericDate(c.IssuedAt), NotBefore: jwt.NewNumericDate(c.NotBefore), Expiry: jwt.NewNumericDate(c.Expiry)}
	return jwt.Signed(s).Claims(std).Claims(map[string]any{"roles": c.Roles}).Serialize()
}

// close stops serving the key set.
func (p *IdP) close() {
	if p != nil && p.srv != nil {
		_ = p.srv.Close()
	}
}
