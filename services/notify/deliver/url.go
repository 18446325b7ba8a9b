package deliver

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// CheckURL says whether u can be a delivery endpoint: an absolute http
// or https URL with a host. The error shows the URL redacted.
func CheckURL(u string) error {
	p, err := url.Parse(u)
	switch {
	case u == "":
		return errors.New("no URL")
	case err != nil:
		return fmt.Errorf("%q is not a URL", RedactURL(u))
	case p.Scheme != "http" && p.Scheme != "https", p.Host == "", p.Opaque != "":
		return fmt.Errorf("%q: want an absolute http:// or https:// URL with a host", RedactURL(u))
	}
	return nil
}

// RedactURL is u as logs and dead letters may show it: its user info
// replaced by ***, each query value by *** (the names stay, sorted), the
// fragment dropped. What does not parse is *** whole.
func RedactURL(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return "***"
	}
	var b strings.Builder
	if p.Scheme != "" {
		b.WriteString(p.Scheme + ":")
	}
	if p.Opaque != "" {
		b.WriteString("***")
		return b.String()
	}
	if p.Host != "" || p.User != nil {
		b.WriteString("//")
		if p.User != nil {
			b.WriteString("***@")
		}
		b.WriteString(p.Host)
	}
	b.WriteString(p.EscapedPath())
	if p.RawQuery != "" {
		q, err := url.ParseQuery(p.RawQuery)
		if err != nil {
			b.WriteString("?***")
			return b.String()
		}
		names := make([]string, 0, len(q))
		for k := range q {
			names = append(names, url.QueryEscape(k)+"=***")
		}
		slices.Sort(names)
		b.WriteString("?" + strings.Join(names, "&"))
	}
	return b.String()
}

var urlInText = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)

// RedactReason is a failure's text with every URL in it redacted
// (RedactURL): what a dead letter keeps and shows to any viewer.
func RedactReason(s string) string {
	return urlInText.ReplaceAllStringFunc(s, RedactURL)
}
