package remote

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"

	"google.golang.org/genproto/googleapis/bytestream"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thindist/thindist/internal/sys/digest"
)

// streamChunk is the size of one ByteStream message.
const streamChunk = 1 << 20

func (c *Client) resource(kind string, d digest.Digest, compressed bool) string {
	name := "blobs/" + d.String()
	if compressed {
		name = "compressed-blobs/zstd/" + d.String()
	}
	if kind != "" {
		name = kind + "/" + name
	}
	if c.opts.Instance != "" {
		name = c.opts.Instance + "/" + name
	}
	return name
}

func uuid() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// streamWrite uploads one blob with ByteStream Write and returns the bytes
// sent.
func (c *Client) streamWrite(ctx context.Context, d digest.Digest, content func() ([]byte, error)) (int64, error) {
	data, err := content()
	if err != nil {
		return 0, err
	}
	c.link.sample(c.enc, c.dec, data)
	zstd := c.zstdUp(d, false)
	if zstd {
		data = c.enc.EncodeAll(data, nil)
	}
	err = c.retry(ctx, func(ctx context.Context) (err error) {
		end := c.link.meter(up).begin(int64(len(data)))
		defer func() { end(int64(len(data)), err == nil) }()
		stream, err := c.bs.Write(ctx)
		if err != nil {
			return err
		}
		name := c.resource("uploads/"+uuid(), d, zstd)
		off := 0
		for {
			n := min(streamChunk, len(data)-off)
			req := &bytestream.WriteRequest{WriteOffset: int64(off), Data: data[off : off+n], FinishWrite: off+n == len(data)}
			if off == 0 {
				req.ResourceName = name
			}
			if err := stream.Send(req); err != nil {
				if err == io.EOF {
					break // the server ended the stream early (blob present): the status is in CloseAndRecv
				}
				return err
			}
			off += n
			if off == len(data) {
				break
			}
		}
		resp, err := stream.CloseAndRecv()
		if err != nil {
			return err
		}
		if cs := resp.GetCommittedSize(); cs != int64(len(data)) && cs != d.Size && cs != -1 {
			return fmt.Errorf("ByteStream.Write committed %d bytes of %d", cs, len(data))
		}
		return nil
	})
	return int64(len(data)), err
}

func (c *Client) streamRead(ctx context.Context, d digest.Digest) ([]byte, error) {
	zstd := c.zstdDown(d.Size)
	end := c.link.meter(down).begin(d.Size)
	stream, err := c.bs.Read(ctx, &bytestream.ReadRequest{ResourceName: c.resource("", d, zstd)})
	if err != nil {
		end(0, false)
		return nil, err
	}
	var buf bytes.Buffer
	for {
		msg, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			end(0, false)
			return nil, err
		}
		buf.Write(msg.Data)
		if int64(buf.Len()) > 2*d.Size+(1<<20) {
			end(0, false)
			return nil, status.Errorf(codes.DataLoss, "ByteStream.Read sent more than blob %s holds", d)
		}
	}
	end(int64(buf.Len()), true)
	if zstd {
		data, err := c.dec.DecodeAll(buf.Bytes(), make([]byte, 0, d.Size))
		if err != nil {
			return nil, status.Errorf(codes.DataLoss, "zstd: %v", err)
		}
		return data, nil
	}
	return buf.Bytes(), nil
}
