package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"math"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	kgosasl "github.com/twmb/franz-go/pkg/sasl"
	kplain "github.com/twmb/franz-go/pkg/sasl/plain"
	kscram "github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/kafka"
	"github.com/sluice-mq/sluice/internal/sasl"
	"github.com/sluice-mq/sluice/internal/scram"
)

// kafkaListeners builds what each listener asks of its connections, and
// creates the configured SASL users when any listener uses SASL.
func kafkaListeners(ctx context.Context, cfg config.Config, specs []config.Listener, creds *scram.Store) ([]kafka.Listener, error) {
	out := make([]kafka.Listener, len(specs))
	var auth *sasl.Authenticator
	for i, l := range specs {
		out[i].Name = l.Name
		if ib, err := cfg.InterBroker(); cfg.ClusterMode() && err == nil && ib.Name == l.Name {
			out[i].InterBroker = true
		}
		if !l.SASL() {
			continue
		}
		if auth == nil {
			var err error
			if auth, err = sasl.New(cfg.SASL.Mechanisms, creds); err != nil {
				return nil, fmt.Errorf("%w: sasl.mechanisms: %v", config.ErrInvalid, err)
			}
			users := cfg.SASL.Users
			if cfg.ClusterMode() && cfg.Cluster.InterBrokerUser != "" {
				users = append(slices.Clone(users), cfg.Cluster.InterBrokerUser)
			}
			for _, u := range users {
				name, pw, _ := strings.Cut(u, ":")
				if err := creds.Ensure(ctx, name, pw); err != nil {
					return nil, fmt.Errorf("creating SASL user %q: %w", name, err)
				}
			}
		}
		out[i].SASL = auth
		out[i].SessionLifetime = cfg.SASL.SessionLifetime
	}
	return out, nil
}

// interBrokerOpts are the client options brokers use to reach each other
// through listener ib: SASL as cluster.inter_broker_user with the
// strongest mechanism the listeners offer, and TLS that checks the other
// broker's certificate against cluster.inter_broker_ca_file (else the
// system's roots) and presents this broker's own.
func interBrokerOpts(cfg config.Config, ib config.Listener) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	if ib.SASL() {
		name, pw, _ := strings.Cut(cfg.Cluster.InterBrokerUser, ":")
		mechs := cfg.SASL.Mechanisms
		if len(mechs) == 0 {
			mechs = sasl.Default
		}
		var m kgosasl.Mechanism
		for _, want := range []string{sasl.ScramSHA512, sasl.ScramSHA256, sasl.Plain} {
			if m == nil && slices.ContainsFunc(mechs, func(s string) bool { return strings.EqualFold(strings.TrimSpace(s), want) }) {
				switch want {
				case sasl.ScramSHA512:
					m = kscram.Auth{User: name, Pass: pw}.AsSha512Mechanism()
				case sasl.ScramSHA256:
					m = kscram.Auth{User: name, Pass: pw}.AsSha256Mechanism()
				default:
					m = kplain.Auth{User: name, Pass: pw}.AsMechanism()
				}
			}
		}
		if m == nil {
			return nil, fmt.Errorf("%w: sasl.mechanisms: the inter-broker listener needs SCRAM-SHA-512, SCRAM-SHA-256 or PLAIN", config.ErrInvalid)
		}
		opts = append(opts, kgo.SASL(m))
	}
	if ib.TLS() {
		tc, err := interBrokerTLS(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	return opts, nil
}

// interBrokerTLS is how a broker reaches another over TLS: checking its
// certificate against cluster.inter_broker_ca_file (else the system's
// roots) and presenting its own.
func interBrokerTLS(cfg config.Config) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if f := cfg.Cluster.InterBrokerCAFile; f != "" {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%w: cluster.inter_broker_ca_file: %v", config.ErrInvalid, err)
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: cluster.inter_broker_ca_file: %s holds no PEM certificate", config.ErrInvalid, f)
		}
	}
	cert, err := tls.LoadX509KeyPair(cfg.TLS.CertFile, cfg.TLS.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("%w: tls.cert_file: %v", config.ErrInvalid, err)
	}
	tc.Certificates = []tls.Certificate{cert}
	return tc, nil
}

// securityConfigs are the listener, SASL, TLS and authorizer settings as
// the Kafka broker configs tools read them (DescribeConfigs on a broker).
func securityConfigs(cfg config.Config, specs []config.Listener, lns []net.Listener) map[string]string {
	var listeners, advertisedL, protocols []string
	for i, l := range specs {
		listeners = append(listeners, l.Name+"://"+lns[i].Addr().String())
		adv := l.Advertised
		if adv == "" {
			h, p, _ := advertised(l.Bind, "", lns[i].Addr())
			adv = net.JoinHostPort(h, strconv.Itoa(int(p)))
		}
		advertisedL = append(advertisedL, l.Name+"://"+adv)
		protocols = append(protocols, l.Name+":"+l.Name)
	}
	mechs := cfg.SASL.Mechanisms
	if len(mechs) == 0 {
		mechs = sasl.Default
	}
	clientAuth := cfg.TLS.ClientAuth
	if clientAuth == "" {
		clientAuth = "none"
	}
	out := map[string]string{
		"listeners":                      strings.Join(listeners, ","),
		"advertised.listeners":           strings.Join(advertisedL, ","),
		"listener.security.protocol.map": strings.Join(protocols, ","),
		"sasl.enabled.mechanisms":        strings.Join(mechs, ","),
		"ssl.client.auth":                clientAuth,
		"authorizer.class.name":          "",
		"super.users":                    strings.Join(cfg.Authorizer.SuperUsers, ";"),
		"allow.everyone.if.no.acl.found": strconv.FormatBool(cfg.Authorizer.AllowEveryoneIfNoACLFound),
	}
	if cfg.Authorizer.Enabled {
		out["authorizer.class.name"] = "sluice.acl.Authorizer"
	}
	if ib, err := cfg.InterBroker(); err == nil {
		out["inter.broker.listener.name"] = ib.Name
	}
	return out
}

// kafkaUnlimited is a connection limit as Kafka reports it: 0, sluice's
// "unlimited", is Kafka's default of Int.MaxValue.
func kafkaUnlimited(n int32) string {
	if n == 0 {
		n = math.MaxInt32
	}
	return strconv.Itoa(int(n))
}
