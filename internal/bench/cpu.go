package bench

import (
	"errors"
	"time"
)

// ErrNoProcessCPU means this OS gives the driver no way to read another
// process's CPU time (only Linux's /proc is read), or no such process.
var ErrNoProcessCPU = errors.New("bench: process CPU time unavailable")

// CPU is the processor time (user plus system) used over one phase, by the
// broker (Server) and by the driver process itself (Client). A nil field is
// unknown: no --server-pid, an in-process kfake (which shares the driver's
// process, so its CPU is in Client), or an OS where it cannot be read.
type CPU struct {
	ServerSeconds         *float64 `json:"server_cpu_s,omitempty"`
	ServerMicrosPerRecord *float64 `json:"server_cpu_us_per_record,omitempty"`
	ClientSeconds         *float64 `json:"client_cpu_s,omitempty"`
	ClientMicrosPerRecord *float64 `json:"client_cpu_us_per_record,omitempty"`
}

// cpuMeter samples the CPU time of the server process (pid > 0) and of the
// driver.
type cpuMeter struct{ serverPID int }

// cpuSample is one reading; a negative duration is unknown.
type cpuSample struct{ server, client time.Duration }

func (m cpuMeter) sample() cpuSample {
	s := cpuSample{server: -1, client: -1}
	if m.serverPID > 0 {
		if d, err := processCPU(m.serverPID); err == nil {
			s.server = d
		}
	}
	if d, err := selfCPU(); err == nil {
		s.client = d
	}
	return s
}

// since is the CPU used from start to s over a phase that handled records.
func (s cpuSample) since(start cpuSample, records int64) CPU {
	var c CPU
	c.ServerSeconds, c.ServerMicrosPerRecord = cpuDelta(start.server, s.server, records)
	c.ClientSeconds, c.ClientMicrosPerRecord = cpuDelta(start.client, s.client, records)
	return c
}

func cpuDelta(from, to time.Duration, records int64) (secs, usPerRecord *float64) {
	if from < 0 || to < from {
		return nil, nil // unknown, or the pid was reused by another process
	}
	d := to - from
	s := d.Seconds()
	secs = &s
	if records > 0 {
		us := s * 1e6 / float64(records)
		usPerRecord = &us
	}
	return secs, usPerRecord
}
