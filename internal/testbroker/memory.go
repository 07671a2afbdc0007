package testbroker

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
)

// Memory is what the kernel says of a process's memory, in bytes
// (/proc/PID/status).
type Memory struct {
	// RSS is the resident set now (VmRSS): anonymous memory plus mapped
	// files and shared memory that are in RAM.
	RSS int64
	// HWM is the peak RSS over the process's life (VmHWM).
	HWM int64
	// Anon is the anonymous part of RSS (RssAnon): the Go heap, stacks
	// and runtime, without mapped files.
	Anon int64
}

// ReadMemory reads the memory of process pid. It takes a pid rather than a
// Proc so that a sampler in another goroutine can call it while the test
// goroutine restarts brokers.
func ReadMemory(pid int) (Memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	var m Memory
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		name, rest, ok := bytes.Cut(sc.Bytes(), []byte(":"))
		if !ok {
			continue
		}
		var dst *int64
		switch string(name) {
		case "VmRSS":
			dst = &m.RSS
		case "VmHWM":
			dst = &m.HWM
		case "RssAnon":
			dst = &m.Anon
		default:
			continue
		}
		// "   12345 kB"
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			return Memory{}, fmt.Errorf("testbroker: /proc/%d/status: unexpected %s line %q", pid, name, sc.Bytes())
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("testbroker: /proc/%d/status: %s: %v", pid, name, err)
		}
		*dst = kb << 10
		found++
	}
	if found < 3 {
		// A zombie has no memory lines.
		return Memory{}, fmt.Errorf("testbroker: /proc/%d/status has no memory figures (exited?)", pid)
	}
	return m, nil
}
