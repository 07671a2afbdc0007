package testbroker

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreeAddrs picks n distinct free 127.0.0.1 ports below the kernel's
// ephemeral range, holding each until all are picked, for a broker that
// is given a fixed port and listens on it only later. A port from the
// ephemeral range could meanwhile be handed to any listener on :0 (other
// brokers' Kafka and registry listeners, other tests), and the broker
// would fail to start with "address already in use"; below the range only
// another fixed pick can take it.
func FreeAddrs(t testing.TB, n int) []string {
	t.Helper()
	lo := ephemeralLow()
	out := make([]string, 0, n)
	for try := 0; len(out) < n; try++ {
		if try == 1000 {
			t.Fatalf("testbroker: no free port below %d in 1000 tries", lo)
		}
		port := fixedPortMin + rand.IntN(lo-fixedPortMin)
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			continue
		}
		defer l.Close()
		out = append(out, l.Addr().String())
	}
	return out
}

// FreeAddr is FreeAddrs for one port.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return FreeAddrs(t, 1)[0]
}

// fixedPortMin is the least port FreeAddrs picks.
const fixedPortMin = 10000

// ephemeralLow is the start of the kernel's ephemeral port range (Linux:
// net.ipv4.ip_local_port_range), 32768 where it cannot be read.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if lo, err := strconv.Atoi(f[0]); err == nil && lo > fixedPortMin+1000 {
				return lo
			}
		}
	}
	return 32768
}
