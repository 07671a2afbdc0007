package config

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Security protocols a listener may use (Kafka's names).
const (
	Plaintext     = "PLAINTEXT"
	SASLPlaintext = "SASL_PLAINTEXT"
	SSL           = "SSL"
	SASLSSL       = "SASL_SSL"
)

// securityProtocols are the listener names accepted.
var securityProtocols = []string{Plaintext, SASLPlaintext, SSL, SASLSSL}

// saslMechanisms are the mechanisms sasl.mechanisms may name.
var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"}

// SASL configures SASL authentication on SASL_PLAINTEXT listeners.
type SASL struct {
	// Mechanisms offered; empty means SCRAM-SHA-512, SCRAM-SHA-256 and
	// PLAIN, which check the same users: the SCRAM credentials kept in the
	// metadata store. OAUTHBEARER, offered only when named, accepts
	// unsecured JWS tokens as Kafka's default validator does: for
	// development, since anyone can write one.
	Mechanisms []string `yaml:"mechanisms"`
	// Users are "name:password" pairs whose SCRAM-SHA-256 and -512
	// credentials are created at start when missing (a credential that
	// exists, e.g. changed since with AlterUserScramCredentials, is kept).
	// Prefer SLUICE_SASL_USERS to a file or flag.
	Users []string `yaml:"users"`
	// SessionLifetime, when positive, ends a login after this long
	// (Kafka's connections.max.reauth.ms): clients re-authenticate on the
	// connection (KIP-368) or it is closed. 0: logins never expire.
	SessionLifetime time.Duration `yaml:"session_lifetime"`
}

// Authorizer configures ACL checks (Kafka's authorizer.class.name,
// super.users and allow.everyone.if.no.acl.found).
type Authorizer struct {
	// Enabled checks every request against the ACLs; off, everything is
	// allowed and the ACL APIs answer SECURITY_DISABLED.
	Enabled bool `yaml:"enabled"`
	// SuperUsers are principals allowed everything, e.g. User:admin.
	SuperUsers []string `yaml:"super_users"`
	// AllowEveryoneIfNoACLFound allows an operation on a resource that no
	// ACL names.
	AllowEveryoneIfNoACLFound bool `yaml:"allow_everyone_if_no_acl_found"`
}

// Listener is one Kafka listener: a security protocol, the address it
// binds and the address clients are told.
type Listener struct {
	Name       string // the security protocol
	Bind       string // host:port
	Advertised string // host:port; empty: derived from Bind
}

// SASL reports whether the listener authenticates clients with SASL.
func (l Listener) SASL() bool { return l.Name == SASLPlaintext || l.Name == SASLSSL }

// TLS reports whether the listener speaks TLS.
func (l Listener) TLS() bool { return l.Name == SSL || l.Name == SASLSSL }

// parseListener reads NAME://host:port.
func parseListener(s string) (name, addr string, err error) {
	name, addr, ok := strings.Cut(strings.TrimSpace(s), "://")
	if !ok {
		return "", "", fmt.Errorf("%q is not NAME://host:port", s)
	}
	name = strings.ToUpper(name)
	if !slices.Contains(securityProtocols, name) {
		return "", "", fmt.Errorf("%q: listener %s is not one of %s", s, name, strings.Join(securityProtocols, ", "))
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", "", fmt.Errorf("%q: %v", s, err)
	}
	return name, addr, nil
}

// KafkaListeners returns the Kafka listeners: those of listeners (with
// advertised_listeners), or else one PLAINTEXT listener on listen
// advertising advertised_addr. The first is the broker's main address.
func (c Config) KafkaListeners() ([]Listener, error) {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, key, fmt.Sprintf(format, args...))
	}
	if len(c.Listeners) == 0 {
		if len(c.AdvertisedListeners) > 0 {
			return nil, bad("advertised_listeners", "needs listeners")
		}
		return []Listener{{Name: Plaintext, Bind: c.Listen, Advertised: c.AdvertisedAddr}}, nil
	}
	if c.AdvertisedAddr != "" {
		return nil, bad("advertised_addr", "cannot be used with listeners; use advertised_listeners")
	}
	var out []Listener
	for _, s := range c.Listeners {
		name, addr, err := parseListener(s)
		if err != nil {
			return nil, bad("listeners", "%v", err)
		}
		if slices.ContainsFunc(out, func(l Listener) bool { return l.Name == name }) {
			return nil, bad("listeners", "listener %s is named twice", name)
		}
		out = append(out, Listener{Name: name, Bind: addr})
	}
	for _, s := range c.AdvertisedListeners {
		name, addr, err := parseListener(s)
		if err != nil {
			return nil, bad("advertised_listeners", "%v", err)
		}
		i := slices.IndexFunc(out, func(l Listener) bool { return l.Name == name })
		if i < 0 {
			return nil, bad("advertised_listeners", "%s is not in listeners", name)
		}
		h, p, _ := net.SplitHostPort(addr)
		if n, err := strconv.Atoi(p); h == "" || err != nil || n <= 0 || n > 65535 {
			return nil, bad("advertised_listeners", "%q must name a host and a port in 1-65535", s)
		}
		out[i].Advertised = addr
	}
	return out, nil
}

// validateSecurity checks listeners and the SASL settings together.
func (c Config) validateSecurity() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, key, fmt.Sprintf(format, args...))
	}
	ls, err := c.KafkaListeners()
	if err != nil {
		return err
	}
	if c.ClusterMode() {
		ib, err := c.InterBroker()
		if err != nil {
			return err
		}
		if ib.SASL() {
			if name, pw, ok := strings.Cut(c.Cluster.InterBrokerUser, ":"); !ok || name == "" || pw == "" {
				return bad("cluster.inter_broker_user", "the inter-broker listener %s uses SASL: give name:password", ib.Name)
			}
		}
	}
	if slices.ContainsFunc(ls, Listener.TLS) {
		if _, err := c.TLS.ServerConfig(); err != nil {
			return err
		}
	}
	if c.SASL.SessionLifetime < 0 {
		return bad("sasl.session_lifetime", "must not be negative")
	}
	for _, m := range c.SASL.Mechanisms {
		if !slices.Contains(saslMechanisms, strings.ToUpper(strings.TrimSpace(m))) {
			return bad("sasl.mechanisms", "%q is not one of %s", m, strings.Join(saslMechanisms, ", "))
		}
	}
	for _, u := range c.Authorizer.SuperUsers {
		if typ, name, ok := strings.Cut(u, ":"); !ok || typ == "" || name == "" {
			return bad("authorizer.super_users", "%q is not Type:name (e.g. User:admin)", u)
		}
	}
	for _, u := range c.SASL.Users {
		name, pw, ok := strings.Cut(u, ":")
		if !ok || name == "" || pw == "" {
			return bad("sasl.users", "each entry must be name:password (got one with %d characters)", len(u))
		}
	}
	return nil
}

// InterBroker is the listener brokers send each other requests through:
// cluster.inter_broker_listener, else PLAINTEXT.
func (c Config) InterBroker() (Listener, error) {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalid, key, fmt.Sprintf(format, args...))
	}
	ls, err := c.KafkaListeners()
	if err != nil {
		return Listener{}, err
	}
	want := strings.ToUpper(c.Cluster.InterBrokerListener)
	if want == "" {
		want = Plaintext
	}
	for _, l := range ls {
		if l.Name == want {
			return l, nil
		}
	}
	if c.Cluster.InterBrokerListener == "" {
		return Listener{}, bad("cluster.inter_broker_listener", "cluster mode sends requests between brokers through a PLAINTEXT listener unless this names another")
	}
	return Listener{}, bad("cluster.inter_broker_listener", "%s is not in listeners", want)
}
