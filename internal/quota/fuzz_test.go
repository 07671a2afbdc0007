package quota

import (
	"log/slog"
	"testing"
)

// FuzzQuotaRecord feeds arbitrary metadata keys and values (what another
// broker or a damaged store could hold) to the quota loader: it must never
// panic, and a key it accepts must encode back to itself.
func FuzzQuotaRecord(f *testing.F) {
	f.Add("client-id=<default>", []byte(`{"producer_byte_rate":1000}`))
	f.Add("client-id=c1/user=u%2F1", []byte(`{"consumer_byte_rate":2048000,"producer_byte_rate":1}`))
	f.Add("user=<default>", []byte(`{}`))
	f.Add("user=%4", []byte(`{"producer_byte_rate":"x"}`))
	f.Add("ip=1.2.3.4", []byte(`null`))
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		m := New(nil, slog.New(slog.DiscardHandler))
		m.apply(key, value)
		m.Throttle(ProducerByteRate, "ANONYMOUS", "c1", 100)
		if _, err := m.Describe(nil, false); err != nil {
			t.Fatal(err)
		}
		e, err := parseKey(key)
		if err != nil {
			return
		}
		again, err := parseKey(e.key())
		if err != nil || again.key() != e.key() {
			t.Fatalf("%q parsed to %q, which parses to %q (%v)", key, e.key(), again.key(), err)
		}
	})
}
