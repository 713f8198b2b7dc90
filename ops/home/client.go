package home

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// ClientFile is the client config a server writes into its data dir.
const ClientFile = "client.json"

// Operator names, in Client.Creds, the file client commands use by
// default: the admin's NATS user and the key that signs caller tokens.
const Operator = "operator"

// Client is what a command needs to reach the server that owns a data
// dir: where it listens, and the credentials file of each role.
type Client struct {
	// Server is the URL (a comma-separated list for a cluster) clients
	// connect to.
	Server string `json:"server"`
	// Creds maps a role (agent, adapter, worker, gateway, ops, admin,
	// and "operator") to its credentials file, an absolute path.
	Creds map[string]string `json:"creds,omitempty"`
	// WrittenBy is the command that wrote the file, for whoever reads it.
	WrittenBy string `json:"writtenBy,omitempty"`
}

// WriteClient writes c as dir's client config, all at once (a reader sees
// the old file or the new one), readable by the owner only, with every
// credentials path made absolute so it holds from any folder.
func WriteClient(dir string, c Client) error {
	out := Client{Server: c.Server, WrittenBy: c.WrittenBy, Creds: map[string]string{}}
	for role, p := range c.Creds {
		out.Creds[role] = abs(p)
	}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ClientFile+".*.tmp")
	if err != nil {
		return fmt.Errorf("write the client config in %s: %v (pass a writable --data DIR)", dir, err)
	}
	_, werr := f.Write(append(b, '\n'))
	cerr := f.Close()
	if werr == nil {
		werr = cerr
	}
	if werr == nil {
		werr = os.Chmod(f.Name(), 0o600)
	}
	if werr == nil {
		werr = os.Rename(f.Name(), filepath.Join(dir, ClientFile))
	}
	if werr != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write the client config %s: %v", filepath.Join(dir, ClientFile), werr)
	}
	return nil
}

// ReadClient reads dir's client config; ok is false when there is none
// (no server has run on dir yet). A file that cannot be read or parsed is
// an error naming it.
func ReadClient(dir string) (c Client, ok bool, err error) {
	p := filepath.Join(dir, ClientFile)
	b, err := os.ReadFile(p)
	if isNotExist(err) {
		return Client{}, false, nil
	}
	if err != nil {
		return Client{}, false, fmt.Errorf("client config %s: %v", p, err)
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return Client{}, false, fmt.Errorf("client config %s is not valid JSON (%v): remove it; the next serve writes it again", p, err)
	}
	for role, path := range c.Creds {
		if !filepath.IsAbs(path) {
			c.Creds[role] = filepath.Join(dir, path)
		}
	}
	return c, true, nil
}
