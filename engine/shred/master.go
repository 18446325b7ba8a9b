package shred

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
)

// MasterKey wraps the data keys: 32 bytes, given to the process by a file
// or an environment variable (never on the command line, where any user
// of the machine can read it in the process list), and kept apart from
// the keyring: whoever holds both can read every subject not forgotten.
type MasterKey [32]byte

// MasterKeyEnv is the environment variable LoadMasterKey reads when no
// file is named.
const MasterKeyEnv = "LOGBOOK_MASTER_KEY"

// ErrNoMasterKey is LoadMasterKey finding neither a file nor the
// variable.
var ErrNoMasterKey = errors.New("shred: no master key: give a key file or set " + MasterKeyEnv)

// ParseMasterKey reads a master key written as 64 hexadecimal digits or
// as 32 bytes in standard base64; surrounding blanks are ignored.
func ParseMasterKey(s string) (MasterKey, error) {
	var k MasterKey
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil && len(b) == len(k) {
		copy(k[:], b)
		return k, nil
	}
	if b, err := base64.StdEncoding.DecodeString(s); err == nil && len(b) == len(k) {
		copy(k[:], b)
		return k, nil
	}
	return k, errors.New("shred: a master key is 64 hexadecimal digits or 32 bytes in base64")
}

// NewMasterKey returns a random master key in hexadecimal.
func NewMasterKey() string {
	var k MasterKey
	_, _ = rand.Read(k[:])
	return hex.EncodeToString(k[:])
}

// LoadMasterKey reads the master key from file, or, when file is "",
// from the environment variable MasterKeyEnv. A file that others than
// its owner may read is refused: the key would be as good as public.
func LoadMasterKey(file string) (MasterKey, error) {
	if file == "" {
		v, ok := os.LookupEnv(MasterKeyEnv)
		if !ok || v == "" {
			return MasterKey{}, ErrNoMasterKey
		}
		k, err := ParseMasterKey(v)
		if err != nil {
			return k, fmt.Errorf("%s: %w", MasterKeyEnv, err)
		}
		return k, nil
	}
	st, err := os.Stat(file)
	if err != nil {
		return MasterKey{}, fmt.Errorf("shred: master key: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return MasterKey{}, fmt.Errorf("shred: master key file %s is readable by others (mode %04o): chmod 600 it", file, st.Mode().Perm())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return MasterKey{}, fmt.Errorf("shred: master key: %w", err)
	}
	k, err := ParseMasterKey(string(b))
	if err != nil {
		return k, fmt.Errorf("%s: %w", file, err)
	}
	return k, nil
}
