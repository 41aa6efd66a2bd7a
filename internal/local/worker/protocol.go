package worker

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// A message, either way, is a u32 count of strings and then each string as
// a u32 length and its bytes, little-endian (worker/worker.cpp reads and
// writes the same).
//
// A job is [dir, argc, argv..., env...]; its answer is
// ["done", exit status, peak RSS in KiB, CPU in µs, stdout, stderr] or
// ["decline", reason] for a job the worker did not start.

// maxField bounds a field read from a worker: a corrupt length must not
// make thindist allocate gigabytes.
const maxField = 64 << 20

// The per-user server (internal/local/workerserver) speaks the same messages
// with its clients.

// WriteMessage writes one message of fields.
func WriteMessage(w io.Writer, fields []string) error {
	n := 4
	for _, f := range fields {
		n += 4 + len(f)
	}
	b := make([]byte, 0, n)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(fields)))
	for _, f := range fields {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	_, err := w.Write(b)
	return err
}

// ReadMessage reads one message of at most maxFields fields.
func ReadMessage(r *bufio.Reader, maxFields int) ([]string, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.LittleEndian.Uint32(hdr[:])
	if n > uint32(maxFields) {
		return nil, fmt.Errorf("malformed message: %d fields", n)
	}
	fields := make([]string, n)
	for i := range fields {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return nil, err
		}
		l := binary.LittleEndian.Uint32(hdr[:])
		if l > maxField {
			return nil, fmt.Errorf("malformed message: a field of %d bytes", l)
		}
		b := make([]byte, l)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, err
		}
		fields[i] = string(b)
	}
	return fields, nil
}
