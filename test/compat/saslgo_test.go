package compat

import (
	"crypto/tls"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/segmentio/kafka-go"
	kgsasl "github.com/segmentio/kafka-go/sasl"
	kgplain "github.com/segmentio/kafka-go/sasl/plain"
	kgscram "github.com/segmentio/kafka-go/sasl/scram"
	xscram "github.com/xdg-go/scram"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// saramaSCRAM is sarama's SCRAM client over xdg-go/scram, as sarama's
// own examples build it.
type saramaSCRAM struct {
	gen  xscram.HashGeneratorFcn
	conv *xscram.ClientConversation
}

func (s *saramaSCRAM) Begin(user, pass, authz string) error {
	cl, err := s.gen.NewClient(user, pass, authz)
	if err != nil {
		return err
	}
	s.conv = cl.NewConversation()
	return nil
}

func (s *saramaSCRAM) Step(challenge string) (string, error) { return s.conv.Step(challenge) }
func (s *saramaSCRAM) Done() bool                            { return s.conv.Done() }

// saramaSecured is sarama's config for mech ("" for none) as admin, over
// TLS trusting pool when pool is set.
func saramaSecured(mech string, tlsCfg *tls.Config, v sarama.KafkaVersion) *sarama.Config {
	cfg := saramaConfig(v)
	if mech != "" {
		cfg.Net.SASL.Enable = true
		cfg.Net.SASL.Handshake = true
		cfg.Net.SASL.User, cfg.Net.SASL.Password = "admin", "admin-secret"
		cfg.Net.SASL.Mechanism = sarama.SASLMechanism(mech)
		if v.IsAtLeast(sarama.V1_0_0_0) {
			cfg.Net.SASL.Version = sarama.SASLHandshakeV1
		} else {
			// The pre-KIP-152 exchange: SaslHandshake v0, then bare tokens
			// (sarama refuses it together with ApiVersions).
			cfg.Net.SASL.Version = sarama.SASLHandshakeV0
			cfg.ApiVersionsRequest = false
		}
		switch mech {
		case sarama.SASLTypeSCRAMSHA256:
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{gen: xscram.SHA256} }
		case sarama.SASLTypeSCRAMSHA512:
			cfg.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &saramaSCRAM{gen: xscram.SHA512} }
		}
	}
	if tlsCfg != nil {
		cfg.Net.TLS.Enable = true
		cfg.Net.TLS.Config = tlsCfg
	}
	return cfg
}

// saramaSecuredRoundTrip produces records with sarama through addr and
// reads them back with sarama.
func saramaSecuredRoundTrip(t *testing.T, addr, topic string, cfg *sarama.Config, want []rec) {
	t.Helper()
	pcfg := *cfg
	pcfg.Producer.Return.Successes = true
	pcfg.Producer.RequiredAcks = sarama.WaitForAll
	pcfg.Producer.Partitioner = sarama.NewManualPartitioner
	p, err := sarama.NewSyncProducer([]string{addr}, &pcfg)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	for _, r := range want {
		if _, _, err := p.SendMessage(&sarama.ProducerMessage{Topic: topic, Key: sarama.ByteEncoder(r.Key), Value: sarama.ByteEncoder(r.Value)}); err != nil {
			t.Fatalf("sarama send: %v", err)
		}
	}
	p.Close()
	c, err := sarama.NewConsumer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	for i := range want {
		select {
		case m := <-pc.Messages():
			if string(m.Value) != string(want[i].Value) {
				t.Fatalf("sarama read %q at %d, want %q", m.Value, i, want[i].Value)
			}
		case err := <-pc.Errors():
			t.Fatal(err)
		case <-time.After(time.Minute):
			t.Fatalf("sarama read %d of %d", i, len(want))
		}
	}
}

// TestSaramaSecured: sarama produces and consumes through SASL_PLAINTEXT
// (PLAIN, also with the v0 handshake and bare tokens, SCRAM-SHA-256,
// SCRAM-SHA-512), SSL and SASL_SSL.
func TestSaramaSecured(t *testing.T) {
	p := testbroker.NewPKI(t)
	b := startTLSBroker(t, p)
	sb, saslAddr := startSASLBroker(t)
	trust := &tls.Config{RootCAs: p.Pool}
	for _, c := range []struct {
		name, mech string
		b          *testbroker.Broker
		addr       string
		tls        *tls.Config
		v          sarama.KafkaVersion
	}{
		{"SASL_PLAINTEXT/PLAIN", sarama.SASLTypePlaintext, sb, saslAddr, nil, sarama.V3_6_0_0},
		// Before Kafka 1.0 sarama uses SaslHandshake v0 and bare tokens.
		{"SASL_PLAINTEXT/PLAIN-handshake-v0", sarama.SASLTypePlaintext, sb, saslAddr, nil, sarama.V0_11_0_0},
		{"SASL_PLAINTEXT/SCRAM-SHA-256", sarama.SASLTypeSCRAMSHA256, sb, saslAddr, nil, sarama.V3_6_0_0},
		{"SASL_PLAINTEXT/SCRAM-SHA-512", sarama.SASLTypeSCRAMSHA512, sb, saslAddr, nil, sarama.V3_6_0_0},
		{"SSL", "", b, b.Server().ListenerAddr(config.SSL), trust, sarama.V3_6_0_0},
		{"SASL_SSL/SCRAM-SHA-512", sarama.SASLTypeSCRAMSHA512, b, b.Server().ListenerAddr(config.SASLSSL), trust, sarama.V3_6_0_0},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic := topicName(t)
			testbroker.CreateTopic(t, c.b.Addr(), topic, 1, nil)
			saramaSecuredRoundTrip(t, c.addr, topic, saramaSecured(c.mech, c.tls, c.v), kcatRecords(10))
		})
	}
}

// TestKafkaGoSecured: kafka-go writes and reads through SASL_PLAINTEXT
// (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) and SASL_SSL.
func TestKafkaGoSecured(t *testing.T) {
	p := testbroker.NewPKI(t)
	b := startTLSBroker(t, p)
	sb, saslAddr := startSASLBroker(t)
	s256, _ := kgscram.Mechanism(kgscram.SHA256, "admin", "admin-secret")
	s512, _ := kgscram.Mechanism(kgscram.SHA512, "admin", "admin-secret")
	for _, c := range []struct {
		name string
		b    *testbroker.Broker
		addr string
		mech kgsasl.Mechanism
		tls  *tls.Config
	}{
		{"SASL_PLAINTEXT/PLAIN", sb, saslAddr, kgplain.Mechanism{Username: "admin", Password: "admin-secret"}, nil},
		{"SASL_PLAINTEXT/SCRAM-SHA-256", sb, saslAddr, s256, nil},
		{"SASL_PLAINTEXT/SCRAM-SHA-512", sb, saslAddr, s512, nil},
		{"SASL_SSL/SCRAM-SHA-512", b, b.Server().ListenerAddr(config.SASLSSL), s512, &tls.Config{RootCAs: p.Pool}},
	} {
		t.Run(c.name, func(t *testing.T) {
			topic := topicName(t)
			testbroker.CreateTopic(t, c.b.Addr(), topic, 1, nil)
			tr := &kafka.Transport{TLS: c.tls, SASL: c.mech}
			dialer := &kafka.Dialer{Timeout: 10 * time.Second, TLS: c.tls, SASLMechanism: c.mech}
			w := &kafka.Writer{Addr: kafka.TCP(c.addr), Transport: tr, Topic: topic, RequiredAcks: kafka.RequireAll,
				BatchTimeout: 10 * time.Millisecond, MaxAttempts: 3}
			ctx := ctxFor(t, time.Minute)
			want := kcatRecords(10)
			msgs := make([]kafka.Message, len(want))
			for i, r := range want {
				msgs[i] = kafka.Message{Key: r.Key, Value: r.Value}
			}
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatalf("kafka-go write through %s: %v", c.name, err)
			}
			w.Close()
			r := kafka.NewReader(kafka.ReaderConfig{Brokers: []string{c.addr}, Topic: topic, Partition: 0, MaxWait: 500 * time.Millisecond, Dialer: dialer})
			defer r.Close()
			for i := range want {
				m, err := r.ReadMessage(ctx)
				if err != nil || string(m.Value) != string(want[i].Value) {
					t.Fatalf("kafka-go read %d through %s: %q %v", i, c.name, m.Value, err)
				}
			}
		})
	}
}
