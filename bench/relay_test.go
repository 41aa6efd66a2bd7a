package main

import (
	"bytes"
	"crypto/rand"
	"io"
	"net"
	"testing"
	"time"
)

// TestRelayForwards: what goes through the relay arrives whole, both
// ways, with a delay and a bandwidth cap set.
func TestRelayForwards(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // an echo server
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(c, c); c.Close() }()
		}
	}()
	r, err := startRelay(2*time.Millisecond, 800e6)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.setBackend(ln.Addr().String())
	c, err := net.Dial("tcp", r.Addr())
	if err != nil {
		t.Fatal(err)
	}
	want := make([]byte, 1<<20)
	rand.Read(want)
	go func() { c.Write(want); c.(*net.TCPConn).CloseWrite() }()
	got, err := io.ReadAll(c)
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read back %d bytes (%v), want the %d sent", len(got), err, len(want))
	}
	if up, down := r.moved(); up != int64(len(want)) || down != int64(len(want)) {
		t.Errorf("the relay counted %d bytes up and %d down, want %d each", up, down, len(want))
	}
}

// TestBucketReserves: each take reserves its bytes' time on the link
// after what was reserved before it, whoever takes.
func TestBucketReserves(t *testing.T) {
	b := newBucket(1e9) // 1 GB/s: 1 MB takes 1 ms
	start := time.Now()
	for range 3 {
		b.take(1e6)
	}
	if got := b.next.Sub(start); got < 3*time.Millisecond {
		t.Errorf("3 MB reserved %v of the link, want at least 3ms", got)
	}
	unlimited := newBucket(0)
	unlimited.take(1 << 30)
	if !unlimited.next.IsZero() {
		t.Errorf("an unlimited bucket reserved time")
	}
}
