package reapitest

import (
	"context"
	"sort"

	repb "github.com/bazelbuild/remote-apis/build/bazel/remote/execution/v2"
	semverpb "github.com/bazelbuild/remote-apis/build/bazel/semver"
)

// capabilitiesService implements repb.CapabilitiesServer.
type capabilitiesService struct {
	repb.UnimplementedCapabilitiesServer
	s *FakeServer
}

// GetCapabilities describes the server as Options configure it: SHA-256,
// REAPI 2.0 to 2.3, zstd when Options.Zstd (not for batches with
// Options.ZstdStreamOnly), ActionCache writes unless
// Options.ACUpdateDisabled.
func (c capabilitiesService) GetCapabilities(ctx context.Context, req *repb.GetCapabilitiesRequest) (*repb.ServerCapabilities, error) {
	c.s.noteInstance(req.GetInstanceName())
	var comps, batchComps []repb.Compressor_Value
	if c.s.opts.Zstd {
		comps = []repb.Compressor_Value{repb.Compressor_ZSTD}
		if !c.s.opts.ZstdStreamOnly {
			batchComps = comps
		}
	}
	var props []string
	for k := range c.s.opts.Platform {
		props = append(props, k)
	}
	sort.Strings(props)
	return &repb.ServerCapabilities{
		CacheCapabilities: &repb.CacheCapabilities{
			DigestFunctions: []repb.DigestFunction_Value{repb.DigestFunction_SHA256},
			ActionCacheUpdateCapabilities: &repb.ActionCacheUpdateCapabilities{
				UpdateEnabled: !c.s.opts.ACUpdateDisabled,
			},
			MaxBatchTotalSizeBytes:          c.s.opts.MaxBatchTotalSizeBytes,
			SymlinkAbsolutePathStrategy:     repb.SymlinkAbsolutePathStrategy_ALLOWED,
			SupportedCompressors:            comps,
			SupportedBatchUpdateCompressors: batchComps,
		},
		ExecutionCapabilities: &repb.ExecutionCapabilities{
			DigestFunction:          repb.DigestFunction_SHA256,
			DigestFunctions:         []repb.DigestFunction_Value{repb.DigestFunction_SHA256},
			ExecEnabled:             true,
			SupportedNodeProperties: nil,
		},
		LowApiVersion:  semver(2, 0),
		HighApiVersion: semver(2, 3),
	}, nil
}

func semver(major, minor int32) *semverpb.SemVer {
	return &semverpb.SemVer{Major: major, Minor: minor}
}
