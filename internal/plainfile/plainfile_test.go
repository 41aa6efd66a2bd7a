package plainfile

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, 511, 512, 513, 100000} {
		data := make([]byte, size)
		rand.Read(data)
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadFile(p); err != nil || !bytes.Equal(got, data) {
			t.Errorf("size %d: %d bytes, %v", size, len(got), err)
		}
		var buf bytes.Buffer
		if n, err := Copy(&buf, p, make([]byte, 100)); err != nil || n != int64(size) || !bytes.Equal(buf.Bytes(), data) {
			t.Errorf("Copy of %d bytes: %d, %v", size, n, err)
		}
		head := make([]byte, 64)
		n, err := ReadHead(p, head)
		if err != nil || n != min(64, size) || !bytes.Equal(head[:n], data[:n]) {
			t.Errorf("ReadHead of %d bytes: %d, %v", size, n, err)
		}
	}
	missing := filepath.Join(dir, "missing")
	if _, err := ReadFile(missing); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ReadHead(missing, make([]byte, 1)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	if _, err := ReadFile(dir); err == nil {
		t.Error("a directory was read as a file")
	}
}

func TestCreate(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	data := make([]byte, 70000)
	rand.Read(data)
	if err := Create(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
		t.Errorf("%d bytes, %v", len(got), err)
	}
	if err := Create(p, []byte("x"), 0o644); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Create over an existing file: %v", err)
	}
	if got, _ := os.ReadFile(p); !bytes.Equal(got, data) {
		t.Error("a failed Create changed the file")
	}
}
