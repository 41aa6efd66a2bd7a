package proc

import (
	"io"
	"sync"
)

// CaptureLimit is how much of each output stream a Capture keeps: enough
// for any diagnostic, bounded for a process that floods its output.
const CaptureLimit = 1 << 20

// Capture keeps the first CaptureLimit bytes written to it and drops the
// rest (the writer is never blocked or failed).
type Capture struct{ b []byte }

// Bytes returns what was kept.
func (c *Capture) Bytes() []byte { return c.b }

func (c *Capture) Write(p []byte) (int, error) {
	if room := CaptureLimit - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

// scratch holds the read buffers of Capture.ReadFrom.
var scratch = sync.Pool{New: func() any { return new([4096]byte) }}

// ReadFrom drains r (a process's stdout or stderr pipe: os/exec copies it
// with io.Copy, which uses ReadFrom when there is one). Without it io.Copy
// allocates a 32 KiB buffer per stream per process although compilers
// rarely print anything, which on a large run is most of thindist's
// garbage. A pooled buffer makes a silent process cost no allocation at
// all (see docs/design.md, "Output capture").
func (c *Capture) ReadFrom(r io.Reader) (int64, error) {
	buf := scratch.Get().(*[4096]byte)
	defer scratch.Put(buf)
	var n int64
	for {
		k, err := r.Read(buf[:])
		if k > 0 {
			n += int64(k)
			c.Write(buf[:k])
		}
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}
