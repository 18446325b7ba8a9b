package bench

import (
	"errors"
	"fmt"
	"net/url"
)

// withSearchPath returns the postgres:// URL with its search_path (the
// schema a store lives in) set to schema, replacing any given.
// An unparsable URL's error leaves out the URL, which may hold a password.
func withSearchPath(store, schema string) (string, error) {
	u, err := url.Parse(store)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return "", fmt.Errorf("bench: the PostgreSQL URL: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String(), nil
}
