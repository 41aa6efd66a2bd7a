package reapitest

import (
	"errors"
	"io"
	"testing"

	bspb "google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func startFake(t *testing.T, opts Options) (*FakeServer, *Client) {
	t.Helper()
	s, addr := StartT(t, opts)
	return s, NewClient(t, addr)
}

// read fetches a blob with ByteStream Read.
func (c *Client) read(t *testing.T, resourceName string) ([]byte, error) {
	t.Helper()
	stream, err := c.ByteStream.Read(callContext(t), &bspb.ReadRequest{ResourceName: resourceName})
	if err != nil {
		return nil, err
	}
	var out []byte
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		out = append(out, msg.Data...)
	}
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got error %v, want code %v", err, code)
	}
}
