// Package reapitest provides FakeServer, an in-process Remote Execution API
// v2 (REAPI) server that is a TEST DOUBLE for thindist's own tests.
//
// It is NOT a production server and must never be used as one: it keeps all
// blobs and action results in memory without eviction, runs actions as plain
// child processes of the test binary without any sandboxing or resource
// limits, shares one CAS across all instance names, and deliberately offers
// fault injection (see Fault) so that client error handling can be exercised.
// It stands in for real REAPI services (Buildbarn, BuildBuddy, EngFlow,
// NativeLink) in CI, where none of those is available.
//
// The fake serves the Capabilities, ContentAddressableStorage, ActionCache and
// Execution services of build.bazel.remote.execution.v2 and the
// google.bytestream.ByteStream service on a loopback address, optionally over
// TLS or mutual TLS (see NewTestCerts). Only the SHA256 digest function is
// supported; zstd is the only optional compressor.
//
// Tests observe what the client did through Stats, Uploads, Calls and
// InstanceNames, and inject faults with InjectFault or Options.Hook.
package reapitest
