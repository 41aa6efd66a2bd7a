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
//
// With Options.Cluster the server's workers and network are another's: the
// cluster simulator of package reapisim makes the server a SIMULATION of a
// cluster's timing for the benchmark (bench/cluster.go).
//
// Behaviour worth knowing when writing client tests:
//
//   - Execute: a missing Action or Command blob fails the RPC with
//     FAILED_PRECONDITION (PreconditionFailure details, type MISSING); a
//     missing input-root blob is reported in ExecuteResponse.status instead.
//     A platform that Options.Platform does not accept fails the RPC with
//     UNAVAILABLE (FAILED_PRECONDITION with Options.NoWorkerFailedPrecondition)
//     before any Operation is sent. A non-cached Execute always
//     sends one in-progress Operation (stage QUEUED) before the done one.
//   - Action timeout: ExecuteResponse.status is DEADLINE_EXCEEDED and the
//     result is not cached. Results with a non-zero exit code, a non-OK
//     status or Action.do_not_cache are never cached.
//   - arguments[0]: absolute, relative to the working directory when it
//     contains a slash, else looked up in the action's PATH (falling back to
//     the test process's PATH when the action sets none). The environment
//     is exactly Command.environment_variables.
//   - ByteStream Write reads the whole stream (no early return when the blob
//     already exists); the final committed_size is the number of bytes
//     received, i.e. the compressed length for compressed-blobs. A stream
//     that ends without finish_write is kept as a partial upload that
//     QueryWriteStatus reports and a Write with the matching write_offset
//     resumes. QueryWriteStatus of an unknown upload returns committed_size
//     0 rather than NOT_FOUND; of a stored blob, complete=true.
//   - The CAS is shared by all instance names; the action cache is keyed by
//     instance name and action digest. Nothing is ever evicted.
//   - Not implemented: digest functions other than SHA256, compressors
//     other than zstd, inlined stdout/stderr/output contents, GetTree page
//     tokens, the blob split/splice APIs, and OutputDirectory's
//     root_directory_digest. Actions run unsandboxed as the test user,
//     unless Options.Chroot runs each chrooted into its input root.
package reapitest
