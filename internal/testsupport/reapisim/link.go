package reapisim

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// linkFrame is how much of a message the link carries before it turns to
// the next message waiting: HTTP/2's default frame size (the initial
// SETTINGS_MAX_FRAME_SIZE), in which gRPC's transport takes the concurrent
// streams of a connection in turn.
const linkFrame = 16 << 10

// link is one direction of the simulated network link. Messages share it
// as the streams of an HTTP/2 connection do: frame by frame, in turn, each
// frame taking its size / bytesPerSecond. A small message sent while a
// large one crosses is not held until the large one has crossed whole.
type link struct {
	bytesPerSecond float64
	bytes          atomic.Int64

	mu   sync.Mutex
	free time.Time // when the link has sent every frame queued so far
}

// transfer holds the caller until n bytes have crossed the link, each
// frame queued behind the frames queued before it.
func (l *link) transfer(ctx context.Context, n int) {
	l.bytes.Add(int64(n))
	if l.bytesPerSecond <= 0 || n == 0 {
		return
	}
	var prev time.Time // the end of this message's frame before
	for n > 0 {
		f := min(n, linkFrame)
		n -= f
		now := time.Now()
		l.mu.Lock()
		// A frame starts once the link is free, and not before the
		// message's frame before it has ended: as it was meant to,
		// however late the timer woke this caller, so that a message
		// alone on the link takes its size / bytesPerSecond.
		start := now
		if !prev.IsZero() {
			start = prev
		}
		if start.Before(l.free) {
			start = l.free
		}
		l.free = start.Add(time.Duration(float64(f) / l.bytesPerSecond * float64(time.Second)))
		prev = l.free
		l.mu.Unlock()
		if !sleepCtx(ctx, prev.Sub(now)) {
			return
		}
	}
}

func protoSize(m any) int {
	if pm, ok := m.(proto.Message); ok {
		return proto.Size(pm)
	}
	return 0
}

// Unary implements reapitest.Cluster: the call waits out the round trip,
// then its request crosses the link before the handler runs, the response
// after.
func (m *Simulator) Unary(ctx context.Context, req any, handler grpc.UnaryHandler) (any, error) {
	m.roundTrip(ctx)
	m.up.transfer(ctx, protoSize(req))
	resp, err := handler(ctx, req)
	if err == nil {
		m.down.transfer(ctx, protoSize(resp))
	}
	return resp, err
}

// Stream implements reapitest.Cluster: the call waits out the round
// trip, then every message of the stream crosses the link.
func (m *Simulator) Stream(ss grpc.ServerStream) grpc.ServerStream {
	m.roundTrip(ss.Context())
	return simStream{ServerStream: ss, m: m}
}

// simStream applies the link to every message of a stream.
type simStream struct {
	grpc.ServerStream
	m *Simulator
}

func (ss simStream) RecvMsg(msg any) error {
	if err := ss.ServerStream.RecvMsg(msg); err != nil {
		return err
	}
	ss.m.up.transfer(ss.Context(), protoSize(msg))
	return nil
}

func (ss simStream) SendMsg(msg any) error {
	ss.m.down.transfer(ss.Context(), protoSize(msg))
	return ss.ServerStream.SendMsg(msg)
}
